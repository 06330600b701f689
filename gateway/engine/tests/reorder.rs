//! CPU reorder plans end to end on the software loopback: frames leave a TX
//! queue shuffled, with losses, duplicates and late copies, and come back as
//! aggregates that must equal what an independent model of the rules in
//! `../shared/reorder.md` builds, counter for counter.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use daqiri::headers::UdpFrame;
use daqiri::reorder::MAX_OPEN_BATCHES;
use daqiri::{Engine, PlanStats, flags};
use daqiri_config::model::{DataTypes, Endianness, InputType, MemoryKind, MissingAction, OutputType, ReorderType};
use daqiri_config::testing::{TestConfig, rx, tx};
use proptest::prelude::*;

mod common;
use common::{frame, send_payloads};

/// Bytes after the sequence number in each test frame's UDP payload.
const DATA: usize = 16;
/// Ethernet, IPv4 and UDP headers: the sequence number starts here.
const HEADERS: usize = 42;

/// A software loop whose RX queue `r` isolates flows 7 (UDP port 5000,
/// reordered by plan `plan` into region `out`) and 8 (port 6000): a 16-bit
/// sequence number right after the headers, `packets_per_batch` packets a
/// batch, converted as `data_types` says.
fn loopback_plan(packets_per_batch: u16, timeout_us: u32, data_types: Option<DataTypes>) -> TestConfig {
    let mut config = TestConfig::loopback()
        .region("tx", 1024, 256)
        .region("rx", 1024, 256)
        .region("out", 64, 65536)
        .tx_queue(tx(0, "tx").batch(64))
        .rx_queue(rx(0, "rx").named("r").batch(64).timeout_us(u64::from(timeout_us)))
        .isolated()
        .udp_flow(7, 0, 5000)
        .udp_flow(8, 0, 6000)
        .cpu_reorder("plan", &[7], "out", HEADERS as u32, u32::from(packets_per_batch));
    let plan = &mut config.model_mut().interfaces[0].rx.as_mut().unwrap().reorder_configs[0];
    let sequence = plan.method.seq_packets_per_batch.as_mut().unwrap();
    sequence.sequence_number.bit_width = 16;
    plan.payload_byte_offset = (HEADERS + 2) as u32;
    plan.data_types = data_types;
    config
}

fn start(config: &TestConfig) -> Engine {
    Engine::from_yaml(&config.yaml()).unwrap_or_else(|e| panic!("{e}"))
}

/// What a packet with sequence number `seq` carries after it.
fn data_of(seq: u16) -> Vec<u8> {
    let [hi, lo] = seq.to_be_bytes();
    (0..DATA as u8).map(|j| hi.rotate_left(u32::from(j)) ^ lo.wrapping_mul(j | 1) ^ j).collect()
}

fn sequenced(seq: u16) -> Vec<u8> {
    let mut payload = seq.to_be_bytes().to_vec();
    payload.extend(data_of(seq));
    payload
}

/// One aggregate as the application saw it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Aggregate {
    batch_id: u64,
    timed_out: bool,
    source_packets: u32,
    /// The slots the burst says no packet filled.
    missing: Vec<u32>,
    bytes: Vec<u8>,
}

/// Stops the engine (emitting open batches) and reads every aggregate.
fn aggregates_after_stop(engine: &Engine) -> Vec<Aggregate> {
    engine.shutdown();
    let mut found = Vec::new();
    while let Ok(Some(burst)) = engine.get_rx_burst(0, 0) {
        assert_ne!(burst.flags() & flags::REORDERED, 0, "only aggregates were expected");
        assert_eq!((burst.num_packets(), burst.reorder_plan()), (1, Some(0)));
        assert!(burst.timestamp_ns().is_some());
        let missing = burst.reorder_missing().expect("an aggregate tells its empty slots");
        assert_eq!(missing.count() + burst.source_packets(), missing.slots());
        found.push(Aggregate {
            batch_id: burst.batch_id().unwrap(),
            timed_out: burst.flags() & flags::REORDER_TIMEOUT != 0,
            source_packets: burst.source_packets(),
            missing: missing.iter().collect(),
            bytes: burst.packet(0).data().to_vec(),
        });
    }
    found.sort();
    found
}

/// The rules, written out once more: batches by id (wrapping around the id
/// space, whatever `cyclic_sequence` says), a window of `MAX_OPEN_BATCHES`,
/// late / duplicate / out-of-window counted, the oldest batch emitted first
/// when a newer one needs room, every open batch emitted at stop, and an
/// incomplete one discarded under `missing_action: drop`.
struct Model {
    packets_per_batch: u64,
    ids: u64,
    discard_incomplete: bool,
    open: Vec<(u64, BTreeMap<u64, Vec<u8>>)>,
    newest: Option<u64>,
    emitted: Vec<u64>,
    out: Vec<Aggregate>,
    stats: PlanStats,
}

impl Model {
    fn new(packets_per_batch: u16, missing_action: MissingAction) -> Self {
        let packets_per_batch = u64::from(packets_per_batch);
        Self {
            packets_per_batch,
            ids: 65536 / packets_per_batch,
            discard_incomplete: missing_action == MissingAction::Drop,
            open: Vec::new(),
            newest: None,
            emitted: Vec::new(),
            out: Vec::new(),
            stats: PlanStats { name: "plan".into(), packets_per_batch: packets_per_batch as u32, ..Default::default() },
        }
    }

    fn behind(&self, id: u64) -> u64 {
        self.newest.map_or(0, |n| (n + self.ids - id) % self.ids)
    }

    fn is_ahead(&self, id: u64) -> bool {
        self.newest.is_none_or(|n| {
            let ahead = (id + self.ids - n) % self.ids;
            ahead != 0 && ahead <= self.ids / 2
        })
    }

    fn packet(&mut self, seq: u16) {
        let (id, slot) = (u64::from(seq) / self.packets_per_batch, u64::from(seq) % self.packets_per_batch);
        if !self.open.iter().any(|(b, _)| *b == id) && !self.open_batch(id) {
            return;
        }
        let at = self.open.iter().position(|(b, _)| *b == id).unwrap();
        if self.open[at].1.insert(slot, data_of(seq)).is_some() {
            self.stats.packets_duplicate += 1;
            return;
        }
        self.stats.packets_placed += 1;
        if self.open[at].1.len() as u64 == self.packets_per_batch {
            self.stats.batches_complete += 1;
            self.emit(at, false);
        }
    }

    fn open_batch(&mut self, id: u64) -> bool {
        if self.is_ahead(id) {
            self.newest = Some(id);
            self.emitted.retain(|&e| e != id);
        } else if self.emitted.contains(&id) {
            self.stats.packets_late += 1;
            return false;
        } else if self.behind(id) > MAX_OPEN_BATCHES as u64 {
            self.stats.packets_out_of_window += 1;
            return false;
        }
        if self.open.len() == MAX_OPEN_BATCHES {
            let oldest = (0..self.open.len()).max_by_key(|&i| self.behind(self.open[i].0)).unwrap();
            if self.behind(id) > self.behind(self.open[oldest].0) {
                self.stats.packets_out_of_window += 1;
                return false;
            }
            self.emit(oldest, true);
        }
        self.open.push((id, BTreeMap::new()));
        true
    }

    /// Emits open batch `at`; `early` when it is not full (the window or stop closed it).
    fn emit(&mut self, at: usize, early: bool) {
        let (id, slots) = self.open.remove(at);
        self.emitted.push(id);
        self.stats.packets_missing += self.packets_per_batch - slots.len() as u64;
        if early && self.discard_incomplete {
            self.stats.batches_discarded += 1;
            self.stats.packets_discarded += slots.len() as u64;
            return;
        }
        if early {
            self.stats.batches_evicted += 1;
        }
        let missing = (0..self.packets_per_batch as u32).filter(|s| !slots.contains_key(&u64::from(*s))).collect();
        let mut bytes = vec![0u8; self.packets_per_batch as usize * DATA];
        for (slot, data) in &slots {
            bytes[*slot as usize * DATA..][..DATA].copy_from_slice(data);
        }
        self.out.push(Aggregate { batch_id: id, timed_out: early, source_packets: slots.len() as u32, missing, bytes });
    }

    fn stop(mut self) -> (Vec<Aggregate>, PlanStats) {
        while !self.open.is_empty() {
            self.emit(0, true);
        }
        self.out.sort();
        (self.out, self.stats)
    }
}

/// One generated stream: which packets go out, in which order.
#[derive(Debug, Clone)]
struct Stream {
    packets_per_batch: u16,
    first: u16,
    batches: usize,
    lost: Vec<bool>,
    jitter: Vec<u16>,
    duplicated: Vec<bool>,
    late: Vec<usize>,
}

impl Stream {
    /// Sequence numbers in sending order.
    fn order(&self) -> Vec<u16> {
        let count = self.batches * usize::from(self.packets_per_batch);
        let base = self.first - self.first % self.packets_per_batch;
        let mut keyed = Vec::new();
        for k in 0..count {
            let seq = base.wrapping_add(k as u16);
            let key = k + usize::from(self.jitter[k]);
            if !self.lost[k] {
                keyed.push((key, seq));
            }
            if self.duplicated[k] {
                keyed.push((key + usize::from(self.jitter[count - 1 - k]), seq));
            }
        }
        keyed.sort_by_key(|&(key, _)| key);
        let mut order: Vec<u16> = keyed.into_iter().map(|(_, seq)| seq).collect();
        order.extend(self.late.iter().map(|&k| base.wrapping_add((k % count) as u16)));
        order
    }
}

fn streams() -> impl Strategy<Value = Stream> {
    const MOST: usize = 12 * 16;
    (
        prop::sample::select(vec![4u16, 8, 16]),
        // Half the streams cross the top of the sequence space, where ids wrap.
        prop_oneof![any::<u16>(), u16::MAX - 256..=u16::MAX],
        1usize..=12,
        prop::collection::vec(prop::bool::weighted(0.08), MOST),
        prop::collection::vec(0u16..48, MOST),
        prop::collection::vec(prop::bool::weighted(0.05), MOST),
        prop::collection::vec(0usize..MOST, 0..6),
    )
        .prop_map(|(packets_per_batch, first, batches, lost, jitter, duplicated, late)| Stream {
            packets_per_batch,
            first,
            batches,
            lost,
            jitter,
            duplicated,
            late,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shuffled_lossy_streams_reorder_as_the_model_says(
        stream in streams(),
        missing_action in prop::sample::select(vec![MissingAction::Passthrough, MissingAction::Drop]),
        cyclic in any::<bool>(),
    ) {
        // cyclic_sequence is upstream's hw acknowledgement: the model ignores it.
        let order = stream.order();
        let mut config = loopback_plan(stream.packets_per_batch, 0, None);
        let plan = &mut config.model_mut().interfaces[0].rx.as_mut().unwrap().reorder_configs[0];
        (plan.missing_action, plan.cyclic_sequence) = (Some(missing_action), Some(cyclic));
        let engine = start(&config);
        send_payloads(&engine, 5000, &order.iter().map(|&seq| sequenced(seq)).collect::<Vec<_>>());
        let got = aggregates_after_stop(&engine);
        let mut model = Model::new(stream.packets_per_batch, missing_action);
        for &seq in &order {
            model.packet(seq);
        }
        let (want, want_stats) = model.stop();
        prop_assert_eq!(&got, &want);
        let mut stats = engine.stats().ports[0].reorder[0].clone();
        stats.open_batches = 0;
        prop_assert_eq!(stats, want_stats);
    }
}

#[test]
fn a_lost_packet_times_its_batch_out_zero_filled_and_other_flows_pass_through() {
    let engine = start(&loopback_plan(8, 2000, None));
    // Batch 1 (sequence numbers 8..16) without 11, newest first.
    let payloads: Vec<Vec<u8>> = (8..16).rev().filter(|&s| s != 11).map(sequenced).collect();
    send_payloads(&engine, 5000, &payloads);
    send_payloads(&engine, 6000, &[b"not reordered".to_vec()]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut aggregate, mut plain) = (None, None);
    while (aggregate.is_none() || plain.is_none()) && Instant::now() < deadline {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            if burst.flags() & flags::REORDERED != 0 { aggregate = Some(burst) } else { plain = Some(burst) }
        }
    }
    let aggregate = aggregate.expect("the timeout emits the incomplete batch");
    assert_eq!(aggregate.flags(), flags::REORDERED | flags::REORDER_TIMEOUT);
    assert_eq!((aggregate.batch_id(), aggregate.source_packets()), (Some(1), 7));
    let bytes = aggregate.packet(0).data();
    for slot in 0..8u16 {
        let want = if slot == 3 { vec![0; DATA] } else { data_of(8 + slot) };
        assert_eq!(&bytes[usize::from(slot) * DATA..][..DATA], &want[..], "slot {slot}");
    }
    let plain = plain.expect("flow 8 is not in the plan");
    assert_eq!(plain.packet(0).flow_id(), Some(8));
    assert!(plain.packet(0).data().ends_with(b"not reordered"));
    assert_eq!(aggregate.reorder_missing().unwrap().iter().collect::<Vec<_>>(), [3]);
    let stats = &engine.stats().ports[0].reorder[0];
    assert_eq!((stats.batches_timed_out, stats.packets_placed, stats.packets_missing), (1, 7, 1));
}

/// Upstream reads `cyclic_sequence` (default false) for `reorder_engine: hw`
/// alone: a software plan that says false or true, or nothing, reassembles
/// the batch after the highest id all the same.
#[test]
fn batch_ids_wrap_whatever_cyclic_sequence_says() {
    // Batches 16382 and 16383 (the last two of 16-bit sequence numbers, 4 a
    // batch), then batch 0 whole.
    let order: Vec<u16> = (65528..=65535).chain(0..4).collect();
    for cyclic in [None, Some(false), Some(true)] {
        let mut config = loopback_plan(4, 0, None);
        config.model_mut().interfaces[0].rx.as_mut().unwrap().reorder_configs[0].cyclic_sequence = cyclic;
        let engine = start(&config);
        send_payloads(&engine, 5000, &order.iter().map(|&seq| sequenced(seq)).collect::<Vec<_>>());
        let ids: Vec<u64> = aggregates_after_stop(&engine).iter().map(|a| a.batch_id).collect();
        let stats = engine.stats().ports[0].reorder[0].clone();
        assert_eq!((ids, stats.packets_out_of_window), (vec![0, 16382, 16383], 0), "{cyclic:?}: {stats:?}");
    }
}

#[test]
fn missing_action_drop_discards_an_incomplete_batch_and_delivers_complete_ones() {
    let mut config = loopback_plan(8, 2000, None);
    config.model_mut().interfaces[0].rx.as_mut().unwrap().reorder_configs[0].missing_action = Some(MissingAction::Drop);
    let engine = start(&config);
    // Batch 1 without 11 times out; batch 2 comes whole.
    let payloads: Vec<Vec<u8>> = (8..16).filter(|&s| s != 11).chain(16..24).map(sequenced).collect();
    send_payloads(&engine, 5000, &payloads);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut aggregates = Vec::new();
    while engine.stats().ports[0].reorder[0].batches_discarded == 0 && Instant::now() < deadline {
        aggregates.extend(engine.get_rx_burst(0, 0).unwrap());
    }
    aggregates.extend(engine.get_rx_burst(0, 0).unwrap());
    let stats = engine.stats().ports[0].reorder[0].clone();
    assert_eq!(
        (stats.batches_discarded, stats.packets_discarded, stats.packets_missing, stats.batches_timed_out),
        (1, 7, 1, 0),
        "{stats:?}"
    );
    let [whole] = &aggregates[..] else { panic!("only batch 2 is delivered: {} aggregates", aggregates.len()) };
    assert_eq!((whole.batch_id(), whole.flags(), whole.source_packets()), (Some(2), flags::REORDERED, 8));
    assert_eq!(whole.reorder_missing().unwrap().count(), 0);
}

#[test]
fn conversion_applies_to_each_slot_in_place() {
    // Each packet carries 8 int16 samples in network order; the aggregate holds them as fp32.
    let types =
        DataTypes { input_type: InputType::Int16, output_type: OutputType::Fp32, endianness: Endianness::Network };
    let engine = start(&loopback_plan(4, 0, Some(types)));
    let sample = |seq: u16, j: u16| (i32::from(seq) * 1000 - 30_000 + i32::from(j) * 7) as i16;
    let payloads: Vec<Vec<u8>> = [2u16, 0, 3, 1]
        .iter()
        .map(|&seq| {
            let mut p = seq.to_be_bytes().to_vec();
            p.extend((0..8).flat_map(|j| sample(seq, j).to_be_bytes()));
            p
        })
        .collect();
    send_payloads(&engine, 5000, &payloads);
    let got = aggregates_after_stop(&engine);
    assert_eq!(got.len(), 1);
    assert!(!got[0].timed_out);
    let floats: Vec<f32> = got[0].bytes.chunks(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect();
    let want: Vec<f32> = (0..4).flat_map(|seq| (0..8).map(move |j| f32::from(sample(seq, j)))).collect();
    assert_eq!(floats, want);
}

#[test]
fn a_full_window_emits_its_oldest_batch_and_refuses_older_ones() {
    let engine = start(&loopback_plan(4, 0, None));
    // One packet each of batches 10..=17 fills the window of 8.
    let mut order: Vec<u16> = (10..=17).map(|batch| batch * 4).collect();
    // Batch 9 is within 8 of the newest but older than every open batch: out of window.
    order.push(9 * 4);
    // Batch 18 needs room: batch 10, the oldest, is emitted incomplete.
    order.push(18 * 4);
    // A packet of batch 10 now is late; one of batch 2 (16 behind) is out of window.
    order.extend([10 * 4 + 1, 2 * 4]);
    send_payloads(&engine, 5000, &order.iter().map(|&seq| sequenced(seq)).collect::<Vec<_>>());
    // The RX queue's own worker takes what the loop carried: wait until the plan saw every packet.
    let seen = |s: &daqiri::PlanStats| {
        s.packets_placed + s.packets_late + s.packets_duplicate + s.packets_out_of_window + s.packets_rejected
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen(&engine.stats().ports[0].reorder[0]) < order.len() as u64 {
        assert!(Instant::now() < deadline, "the plan saw {:?}", engine.stats().ports[0].reorder[0]);
        std::thread::yield_now();
    }
    let stats = engine.stats().ports[0].reorder[0].clone();
    assert_eq!(MAX_OPEN_BATCHES, 8);
    assert_eq!(stats.open_batches, 8, "{stats:?}");
    assert_eq!((stats.batches_evicted, stats.packets_out_of_window, stats.packets_late), (1, 2, 1), "{stats:?}");
    let first = engine.get_rx_burst(0, 0).unwrap().expect("batch 10 was emitted to make room");
    assert_eq!((first.batch_id(), first.source_packets()), (Some(10), 1));
    assert_eq!(first.flags(), flags::REORDERED | flags::REORDER_TIMEOUT);
}

#[test]
#[ignore = "needs reserved hugepages; tests/run.sh reserves them"]
fn upstream_sw_loopback_cpu_reorder_example_delivers_reordered_batches() {
    // DAQIRI's own example, unchanged: 1,000-byte payloads after 64 bytes of
    // headers, a 32-bit sequence number at byte 64, 1,024 packets per batch.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/tests/data/upstream/daqiri_bench_raw_sw_loopback_reorder_seq_1024.yaml"
    );
    // Written for a host with cores 3 to 11.
    daqiri::preflight::allow_unpinned_cores(true);
    let engine = Engine::from_file(path).unwrap();
    let port = engine.get_port_id("loopback_ports").unwrap();
    let frame = UdpFrame { src_port: 5000, dst_port: 5000, ..frame(5000) };
    for batch in 0..2u32 {
        let mut burst = engine.get_tx_packet_burst(port, 0, 1024).unwrap();
        for i in 0..1024u32 {
            // Sent in a scrambled order: slot (i * 389) mod 1024.
            let seq = batch * 1024 + (i * 389) % 1024;
            let mut payload = vec![0u8; 22];
            payload.extend(seq.to_be_bytes());
            payload.extend((0..996u32).map(|j| (seq ^ j) as u8));
            burst.packet_mut(i as usize).write_udp_frame(&frame, &payload).unwrap();
        }
        engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut aggregates = Vec::new();
    while aggregates.len() < 2 && Instant::now() < deadline {
        if let Some(burst) = engine.get_rx_burst(port, 0).unwrap() {
            aggregates.push(burst);
        }
    }
    assert_eq!(aggregates.len(), 2, "stats: {:?}", engine.stats().ports[0].reorder);
    for (batch, aggregate) in aggregates.iter().enumerate() {
        assert_eq!(aggregate.flags(), flags::REORDERED);
        assert_eq!((aggregate.batch_id(), aggregate.source_packets()), (Some(batch as u64), 1024));
        let bytes = aggregate.packet(0).data();
        assert_eq!(bytes.len(), 1024 * 1000);
        for (slot, payload) in bytes.chunks(1000).enumerate() {
            let seq = (batch * 1024 + slot) as u32;
            assert_eq!(payload[..4], seq.to_be_bytes(), "batch {batch} slot {slot}");
            assert!(payload[4..].iter().enumerate().all(|(j, &b)| b == (seq ^ j as u32) as u8));
        }
    }
}

#[test]
fn a_replay_names_what_it_cannot_run() {
    let config = loopback_plan(4, 0, None).validate().unwrap();
    let err = daqiri::reorder::Replay::new(&config, "nope").unwrap_err();
    assert!(err.to_string().contains("no interface named \"nope\""), "{err}");
    let mut gpu = loopback_plan(4, 0, None);
    let model = gpu.model_mut();
    model.interfaces[0].rx.as_mut().unwrap().reorder_configs[0].reorder_type = ReorderType::Gpu;
    model.memory_regions.iter_mut().for_each(|r| r.kind = MemoryKind::HostPinned);
    let err = daqiri::reorder::Replay::new(&gpu.validate().unwrap(), "loop").unwrap_err();
    assert!(err.to_string().contains("interfaces[0].rx.reorder_configs[0].reorder_type"), "{err}");
}
