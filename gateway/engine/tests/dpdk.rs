//! The DPDK backend on DPDK's virtual devices (no NIC, no hugepages):
//! packets land in mbufs that are our own region buffers and reach the
//! application as ordinary bursts, and an engine restarted in the same
//! process reuses EAL and gets its device back. Built with `--features dpdk`.
#![cfg(feature = "dpdk")]

use std::time::{Duration, Instant};

use daqiri::{DropReason, Engine};

mod common;
use common::veth::{Veth, udp_frame};
use daqiri_config::model::{ActionType, Flow, FlowAction, FlowMatch, PortMatch, TxOffload};
use daqiri_config::testing::{TestConfig, rx, tx};

/// One RX queue on `net_null0`, which hands out a 64-byte frame on every
/// poll slot: the engine's overhead alone.
fn null_device() -> TestConfig {
    TestConfig::dpdk("net_null0")
        .master_core(0)
        .region("rx_mem", 16384, 2048)
        .rx_queue(rx(0, "rx_mem").core(1).batch(256).timeout_us(1000))
}

fn start(config: &TestConfig) -> daqiri::Result<Engine> {
    Engine::from_yaml(&config.yaml())
}

fn rx_of(config: &mut TestConfig) -> &mut daqiri_config::model::RxConfig {
    config.model_mut().interfaces[0].rx.as_mut().unwrap()
}

/// Receives until `want` packets came in bursts; returns the bursts' sizes.
fn receive(engine: &Engine, want: usize) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sizes = Vec::new();
    while sizes.iter().sum::<usize>() < want {
        assert!(Instant::now() < deadline, "only {} of {want} packets in 10 s", sizes.iter().sum::<usize>());
        if let Some(burst) = engine.get_rx_burst(0, 0).expect("port 0 queue 0") {
            for packet in burst.packets() {
                assert_eq!(packet.len(), 64, "net_null's frames are 64 bytes");
                assert_eq!(packet.data().len(), 64);
            }
            sizes.push(burst.num_packets());
        }
    }
    sizes
}

#[test]
fn null_device_packets_arrive_in_region_buffers_and_go_back_on_drop() {
    let engine = start(&null_device()).expect("the engine starts on net_null0");
    let sizes = receive(&engine, 100_000);
    assert!(sizes.iter().all(|&n| n <= 256), "bursts respect batch_size: {:?}", &sizes[..8]);
    // While it runs, net_null fills every free buffer at once: count them
    // once receive has stopped and the bursts still queued are dropped too.
    engine.shutdown();
    while let Ok(Some(burst)) = engine.get_rx_burst(0, 0) {
        drop(burst);
    }
    let stats = engine.stats();
    let region = stats.regions.iter().find(|r| r.name == "rx_mem").expect("the region");
    assert_eq!(region.in_use, 0, "dropped bursts gave their buffers back");
    drop(engine);

    // A second engine in the same process: EAL is reused, the device comes back.
    let engine = start(&null_device()).expect("a restarted engine gets net_null0 again");
    receive(&engine, 10_000);
}

#[test]
fn flow_isolation_drops_what_no_flow_matches_and_counts_it() {
    // net_null's frames are zeros: not IPv4, so no flow matches them.
    let engine = start(&null_device().isolated()).expect("the engine starts on net_null0");
    let deadline = Instant::now() + Duration::from_secs(10);
    let dropped = || engine.stats().ports[0].rx_port_drops.drops(DropReason::UnmatchedFlow);
    while dropped() < 10_000 {
        assert!(Instant::now() < deadline, "unmatched frames were not counted: {}", dropped());
        assert!(engine.get_rx_burst(0, 0).unwrap().is_none(), "an unmatched frame was delivered");
    }
}

#[test]
fn several_queues_receive_on_their_own_cores_and_flows_among_them_need_rte_flow() {
    let two_queues = TestConfig::dpdk("net_null0")
        .master_core(0)
        .region("rx_mem", 16384, 2048)
        .rx_queue(rx(0, "rx_mem").core(0).batch(256).timeout_us(1000))
        .rx_queue(rx(1, "rx_mem").core(1).batch(256).timeout_us(1000));
    // No flows: each queue receives what the device puts on it, on its own worker.
    let engine = start(&two_queues).expect("two queues without flows need no rte_flow");
    let stats = engine.stats();
    let workers: Vec<_> = stats.ports[0].rx_queues.iter().map(|q| q.worker.clone().expect("a worker")).collect();
    assert_eq!((workers[0].core, workers[1].core), (Some(0), Some(1)), "{workers:?}");
    assert_ne!(workers[0].tid, workers[1].tid, "one thread per queue: {workers:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = [0usize; 2];
    while got.iter().any(|&n| n < 1000) {
        assert!(Instant::now() < deadline, "both queues receive: {got:?}");
        for q in 0..2 {
            if let Some(burst) = engine.get_rx_burst(0, q).unwrap() {
                got[q as usize] += burst.num_packets();
            }
        }
    }
    drop(engine);

    // A flow among several queues needs the NIC's flow engine, which net_null lacks.
    let with_flow = two_queues.udp_flow(5, 1, 5000);
    let error = start(&with_flow).expect_err("steering among two queues needs rte_flow");
    assert_eq!(error.status, daqiri::Status::NotSupported);
    assert!(
        error.message.contains("rx.flows of interface \"port\": the net_null PMD cannot program its flows"),
        "{error}"
    );

    // The device was given back: the one-queue config starts again.
    let engine = start(&null_device()).expect("net_null0 after a failed start");
    receive(&engine, 1_000);
}

#[test]
#[ignore = "needs root for a veth pair; tests/run.sh runs it"]
fn af_packet_over_veth_receives_an_independent_senders_frames_with_their_flow_ids() {
    receives_an_independent_senders_frames_over_veth("p", |iface| {
        format!("net_af_packet0,iface={iface},framecnt=8192")
    });
}

#[test]
#[ignore = "needs root for a veth pair; tests/run.sh runs it"]
fn af_xdp_over_veth_receives_through_a_staging_pool_with_flow_ids() {
    // net_af_xdp builds its UMEM from its RX pool: packets land in a staging pool and are copied.
    receives_an_independent_senders_frames_over_veth("x", |iface| format!("net_af_xdp0,iface={iface}"));
}

#[test]
#[ignore = "needs root for a veth pair; tests/run.sh runs it"]
fn af_packet_sockets_no_rx_queue_reads_are_refused_by_path() {
    // Two sockets, one RX queue: the flows the kernel hashed to the second
    // socket would never be read.
    let veth = Veth::new("q");
    let config = daqiri_config::testing::TestConfig::dpdk(&format!(
        "net_af_packet0,iface={},qpairs=2,framecnt=8192",
        veth.receive
    ))
    .master_core(0)
    .region("mem", 4096, 4096)
    .rx_queue(daqiri_config::testing::rx(0, "mem").core(1));
    let error = Engine::from_yaml(&config.yaml()).expect_err("one RX queue for two sockets");
    assert_eq!(error.status, daqiri::Status::NotSupported, "{error}");
    assert!(error.message.contains("rx.queues of interface \"port\""), "{error}");
    assert!(error.message.contains("opens 2 sockets (qpairs)") && error.message.contains("set qpairs=1"), "{error}");
    // As many queues as sockets start.
    let two = config.rx_queue(daqiri_config::testing::rx(1, "mem").core(1));
    Engine::from_yaml(&two.yaml()).expect("two RX queues read two sockets");
}

/// A raw socket sends three flows' frames into one end of a veth pair; the
/// engine, on the device `address` builds for the other end, must deliver
/// every matched frame unchanged with its flow id and count the rest.
fn receives_an_independent_senders_frames_over_veth(tag: &str, address: impl Fn(&str) -> String) {
    const PER_FLOW: u32 = 2_000;
    let veth = Veth::new(tag);
    let range = FlowMatch { udp_dst: Some(PortMatch { first: 6000, last: 6009 }), ..FlowMatch::default() };
    let config = TestConfig::dpdk(&address(&veth.receive))
        .master_core(0)
        .region("rx_mem", 8192, 4096)
        .rx_queue(rx(0, "rx_mem").core(1).batch(64).timeout_us(1000))
        .isolated()
        .udp_flow(11, 0, 5000)
        .flow(22, &[0], range);
    // The PMD's ring holds every frame the test sends, so a poller delayed
    // by parallel tests loses none.
    let engine = start(&config).expect("the engine starts on net_af_packet over veth");
    let sender = veth.sender();
    let mut sent = std::collections::HashMap::new();
    for seq in 0..PER_FLOW {
        for (dst, flow) in [(5000, 11), (6000 + (seq % 10) as u16, 22), (7000, 0)] {
            let frame = udp_frame(1234, dst, seq);
            sender.send(&frame);
            if flow != 0 {
                sent.insert((flow, seq), frame);
            }
        }
        if seq % 64 == 63 {
            // Wire-like pacing: the PMD's ring is not what this test measures.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sent.is_empty() && Instant::now() < deadline {
        let Some(burst) = engine.get_rx_burst(0, 0).unwrap() else { continue };
        for packet in burst.packets() {
            let flow = packet.flow_id().expect("only matched frames arrive");
            let seq = u32::from_be_bytes(packet.data()[42..46].try_into().unwrap());
            let frame =
                sent.remove(&(flow, seq)).unwrap_or_else(|| panic!("flow {flow} seq {seq} twice or never sent"));
            assert_eq!(packet.data(), &frame[..], "flow {flow} seq {seq} arrived changed");
        }
    }
    let stats = engine.stats();
    let missed = stats.ports[0].rx_port_drops.drops(DropReason::NicMissed);
    assert!(
        sent.is_empty(),
        "{} of {} frames never arrived ({missed} counted as nic_missed)",
        sent.len(),
        2 * PER_FLOW
    );
    let unmatched = stats.ports[0].rx_port_drops.drops(DropReason::UnmatchedFlow);
    assert!(unmatched >= u64::from(PER_FLOW), "port 7000's frames are dropped and counted: {unmatched}");
    let flows: Vec<(u32, u64)> = stats.ports[0].flows.iter().map(|f| (f.id, f.packets)).collect();
    assert_eq!(flows, vec![(11, u64::from(PER_FLOW)), (22, u64::from(PER_FLOW))]);
    assert!(
        stats.ports[0]
            .link
            .nic_counters
            .iter()
            .any(|(name, n)| name == "rx_good_packets" && *n >= u64::from(3 * PER_FLOW)),
        "the PMD's own counters are read: {:?}",
        stats.ports[0].link.nic_counters
    );
}

/// `net_ring0` loops each TX queue back to the RX queue of the same index.
fn ring_config(rx_region: &str) -> TestConfig {
    TestConfig::dpdk("net_ring0")
        .master_core(0)
        .region("tx_mem", 4096, 2048)
        .region("rx_mem", 4096, 2048)
        .rx_queue(rx(0, rx_region).named("rq").core(1).batch(64).timeout_us(200))
        .isolated()
        .udp_flow(3, 0, 5000)
        .tx_queue(tx(0, "tx_mem").named("tq").core(1).batch(64).offloads(&[TxOffload::TxEthSrc]))
}

#[test]
fn tx_comes_back_through_net_ring_across_two_engine_restarts() {
    const PACKETS: u32 = 5_000;
    // Separate regions (RX copies the TX pool's mbufs), one shared region
    // (zero-copy), separate again: each a new engine in this process.
    for rx_region in ["rx_mem", "tx_mem", "rx_mem"] {
        let engine = start(&ring_config(rx_region)).expect("the engine starts on net_ring0");
        let mut expected = std::collections::BTreeMap::new();
        let mut received = 0u32;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut next = 0u32;
        while received < PACKETS {
            assert!(Instant::now() < deadline, "{rx_region}: {received} of {PACKETS} back in 20 s");
            if next < PACKETS && engine.tx_burst_available(0, 0, 64).unwrap() {
                let n = (PACKETS - next).min(64) as usize;
                let mut burst = engine.get_tx_packet_burst(0, 0, n).unwrap();
                for i in 0..n {
                    let frame = udp_frame(1234, 5000, next);
                    burst.packet_mut(i).write(&frame).unwrap();
                    expected.insert(next, frame);
                    next += 1;
                }
                engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
            }
            while let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
                for packet in burst.packets() {
                    assert_eq!(packet.flow_id(), Some(3));
                    let seq = u32::from_be_bytes(packet.data()[42..46].try_into().unwrap());
                    let mut frame = expected.remove(&seq).unwrap_or_else(|| panic!("seq {seq} twice or never sent"));
                    frame[6..12].copy_from_slice(&packet.data()[6..12]);
                    assert_eq!(packet.data(), &frame[..], "seq {seq} changed on the way");
                    assert_ne!(&packet.data()[6..12], &[2, 0, 0, 0, 0, 1], "tx_eth_src wrote the port's MAC");
                    received += 1;
                }
            }
        }
        let stats = engine.stats();
        assert_eq!(stats.ports[0].tx_queues[0].stats.packets, u64::from(PACKETS));
        assert_eq!(stats.ports[0].rx_queues[0].stats.packets, u64::from(PACKETS));
        engine.shutdown();
        let stats = engine.stats();
        for region in &stats.regions {
            assert_eq!(region.in_use, 0, "{rx_region}: region {} got every buffer back", region.name);
        }
    }
}

/// Sends `count` frames to UDP port `dst` through the TX queue and returns
/// the flow ids of what came back within a second.
fn ring_round_trip(engine: &Engine, dst: u16, count: usize) -> Vec<Option<u32>> {
    let mut burst = engine.get_tx_packet_burst(0, 0, count).unwrap();
    for i in 0..count {
        burst.packet_mut(i).write(&udp_frame(1234, dst, i as u32)).unwrap();
    }
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut ids = Vec::new();
    while Instant::now() < deadline && ids.len() < count {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            ids.extend(burst.packets().map(|p| p.flow_id()));
        }
    }
    ids
}

#[test]
fn flows_added_at_runtime_steer_on_dpdk_and_a_refused_one_leaves_the_rules() {
    let mut config = ring_config("rx_mem");
    rx_of(&mut config).dynamic_flow_capacity = 4;
    let engine = start(&config).expect("the engine starts on net_ring0");
    assert!(ring_round_trip(&engine, 6000, 8).is_empty(), "no flow for 6000 yet: isolated");

    let flow = |text: &str| serde_yaml::from_str::<daqiri::config::model::Flow>(text).unwrap();
    engine
        .add_flow(0, flow("{ name: late, id: 9, action: { type: queue, id: 0 }, match: { udp_dst: 6000 } }"))
        .unwrap();
    assert_eq!(ring_round_trip(&engine, 6000, 8), vec![Some(9); 8]);

    // net_ring has no flow engine: a transform needs one, and the PMD's reason comes back.
    let refused = engine
        .add_flow(0, flow("{ name: pop, id: 10, actions: [{ type: vlan_pop }, { type: queue, id: 0 }], match: { udp_dst: 6001 } }"))
        .expect_err("vlan_pop needs rte_flow");
    assert_eq!(refused.status, daqiri::Status::NotSupported, "{refused}");
    assert!(refused.message.contains("net_ring"), "the PMD is named: {refused}");
    assert_eq!(ring_round_trip(&engine, 5000, 8), vec![Some(3); 8], "the running rules are untouched");
    assert_eq!(ring_round_trip(&engine, 6000, 8), vec![Some(9); 8]);
    assert_eq!(engine.runtime_flows(0).unwrap().len(), 1);

    engine.delete_flow(0, 9).unwrap();
    assert!(ring_round_trip(&engine, 6000, 8).is_empty(), "deleted: isolated again");
}

#[test]
fn a_paced_tx_queue_keeps_its_rate_through_net_ring() {
    const MBPS: f64 = 40.0;
    const WINDOW: Duration = Duration::from_secs(5);
    // net_ring has no queue rate limit: the sender paces in software.
    let mut config = ring_config("rx_mem");
    let queue = &mut config.model_mut().interfaces[0].tx.as_mut().unwrap().queues[0];
    (queue.offloads, queue.pacing_mbps) = (Vec::new(), Some(40));
    let engine = start(&config).expect("the engine starts on net_ring0");
    let frame = udp_frame(1234, 5000, 0);
    let frame = [&frame[..], &[0u8; 1200][..]].concat();
    let (mut first, mut bytes) = (None::<Instant>, 0usize);
    let until = Instant::now() + WINDOW + Duration::from_millis(500);
    while Instant::now() < until {
        if let Ok(mut burst) = engine.get_tx_packet_burst(0, 0, 32) {
            for i in 0..32 {
                burst.packet_mut(i).write(&frame).unwrap();
            }
            let _ = engine.send_tx_burst(burst);
        }
        while let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            let start = *first.get_or_insert_with(Instant::now);
            if start.elapsed() < WINDOW {
                bytes += burst.packets().map(|p| p.len()).sum::<usize>();
            }
        }
    }
    let mbps = bytes as f64 * 8.0 / WINDOW.as_secs_f64() / 1e6;
    eprintln!("paced net_ring queue: {mbps:.3} Mb/s received over 5 s for pacing_mbps 40");
    assert!((mbps - MBPS).abs() / MBPS < 0.02, "{mbps:.2} Mb/s over 5 s, more than 2% off {MBPS}");
}

#[test]
fn a_pool_below_one_and_a_half_rings_is_raised_to_three_as_daqiri_does() {
    let mut small = null_device();
    small.model_mut().memory_regions[0].num_bufs = 1000;
    let valid = small.validate().unwrap();
    let warnings = daqiri::preflight::host_warnings(&valid);
    let raised = warnings
        .iter()
        .find(|w| w.path == "daqiri.cfg.memory_regions[0].num_bufs")
        .unwrap_or_else(|| panic!("check reports the raise: {warnings:?}"));
    assert!(raised.message.contains("raised to 3072"), "{}", raised.message);
    let engine = Engine::new(valid).expect("the engine starts with the raised pool");
    assert_eq!(engine.stats().regions[0].num_bufs, 3072);
    receive(&engine, 10_000);
}

/// A pcap file (microsecond timestamps) of `frames`, the i-th captured at
/// `first_second + i` seconds and `micros` microseconds.
fn pcap_file(path: &std::path::Path, frames: &[Vec<u8>], first_second: u32, micros: u32) {
    let mut bytes = Vec::new();
    for field in [0xa1b2_c3d4u32.to_le_bytes().as_slice(), &2u16.to_le_bytes(), &4u16.to_le_bytes()] {
        bytes.extend_from_slice(field);
    }
    for word in [0u32, 0, 65_535, 1] {
        bytes.extend_from_slice(&word.to_le_bytes()); // thiszone, sigfigs, snaplen, Ethernet
    }
    for (i, frame) in frames.iter().enumerate() {
        for word in [first_second + i as u32, micros, frame.len() as u32, frame.len() as u32] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(frame);
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn hardware_timestamps_come_from_the_pmd_and_a_pmd_without_them_is_named() {
    // net_pcap replays a capture and stamps each packet with its capture time,
    // in microseconds (DPDK leaves a timestamp's unit to the PMD); bursts carry
    // DAQIRI's unit, nanoseconds since the epoch.
    let path = std::env::temp_dir().join(format!("daqiri-stamps-{}.pcap", std::process::id()));
    let frames: Vec<Vec<u8>> = (0..20).map(|seq| udp_frame(1234, 5000, seq)).collect();
    pcap_file(&path, &frames, 1_700_000_000, 123_456);
    let mut config = null_device();
    config.model_mut().interfaces[0].address = format!("net_pcap0,rx_pcap={}", path.display());
    rx_of(&mut config).hardware_timestamps = true;
    let engine = start(&config).expect("net_pcap stamps its packets");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stamps = Vec::new();
    while stamps.len() < frames.len() && Instant::now() < deadline {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            for packet in burst.packets() {
                let seq = u32::from_be_bytes(packet.data()[42..46].try_into().unwrap());
                stamps.push((seq, packet.rx_timestamp()));
            }
        }
    }
    let expected: Vec<(u32, Option<u64>)> =
        (0..20).map(|seq| (seq, Some(((1_700_000_000 + u64::from(seq)) * 1_000_000 + 123_456) * 1000))).collect();
    assert_eq!(stamps, expected, "each packet carries its capture time in nanoseconds");
    drop(engine);
    let _ = std::fs::remove_file(&path);

    let mut stampless = null_device();
    rx_of(&mut stampless).hardware_timestamps = true;
    let error = start(&stampless).expect_err("net_null has no timestamps");
    assert_eq!(error.status, daqiri::Status::NotSupported);
    assert!(error.message.contains("the net_null PMD") && error.message.contains("rx.hardware_timestamps"), "{error}");
}

#[test]
fn tx_flows_become_egress_rules_or_fail_naming_the_pmd() {
    let vlan_push = |dei: Option<u8>| FlowAction {
        kind: ActionType::VlanPush,
        id: None,
        ids: None,
        vlan_id: Some(100),
        pcp: Some(3),
        dei,
        ethertype: None,
        tunnel: None,
    };
    let tagged = |dei: Option<u8>| {
        let mut config = ring_config("rx_mem");
        let rx_flow = rx_of(&mut config).flows[0].clone();
        let flow = Flow { name: "tag".into(), id: 1, action: None, actions: Some(vec![vlan_push(dei)]), ..rx_flow };
        config.model_mut().interfaces[0].tx.as_mut().unwrap().flows.push(flow);
        config
    };
    let with_tx_flows = tagged(None);
    let error = start(&with_tx_flows).expect_err("net_ring has no flow engine for egress rules");
    assert_eq!(error.status, daqiri::Status::NotSupported, "{error}");
    assert!(error.message.contains("tx.flows \"tag\"") && error.message.contains("the net_ring PMD"), "{error}");

    let error = start(&tagged(Some(1))).expect_err("rte_flow cannot set DEI");
    assert!(error.message.contains("daqiri.cfg.interfaces[0].tx.flows[0].actions[0].dei"), "{error}");

    // The port was given back: the config without TX flows starts.
    let engine = start(&ring_config("rx_mem")).expect("net_ring0 after a refused start");
    assert_eq!(ring_round_trip(&engine, 5000, 8), vec![Some(3); 8]);
}

/// Writes `frame` into a TX packet of two segments: its 42 bytes of
/// Ethernet, IPv4 and UDP headers, then its payload (sent as a chain).
fn write_chain(packet: &mut daqiri::PacketMut<'_>, frame: &[u8]) {
    let (headers, payload) = frame.split_at(42);
    packet.segment_buffer(0).unwrap()[..42].copy_from_slice(headers);
    packet.segment_buffer(1).unwrap()[..payload.len()].copy_from_slice(payload);
    packet.set_lengths(&[42, payload.len()]).unwrap();
}

#[test]
fn a_chained_mbuf_arrives_whole_and_gives_every_segment_back() {
    // TX sends each packet as a chain: headers from `hdr`, payload from
    // `tx_mem`. The RX queue lands in `hdr` too, so the chain's head is one
    // of its own buffers: the whole chain must be copied, not its head kept.
    let mut config = ring_config("hdr").region("hdr", 4096, 2048);
    config.model_mut().interfaces[0].tx.as_mut().unwrap().queues[0].memory_regions =
        vec!["hdr".into(), "tx_mem".into()];
    let engine = start(&config).expect("the engine starts on net_ring0");
    let frame = udp_frame(1234, 5000, 7);
    for _ in 0..4 {
        let mut burst = engine.get_tx_packet_burst(0, 0, 16).unwrap();
        for i in 0..16 {
            write_chain(&mut burst.packet_mut(i), &frame);
        }
        engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut received = 0;
    while received < 64 && Instant::now() < deadline {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            for packet in burst.packets() {
                assert_eq!(&packet.data()[12..], &frame[12..], "headers and payload, in one frame");
                received += 1;
            }
        }
    }
    assert_eq!(received, 64);
    engine.shutdown();
    for region in &engine.stats().regions {
        assert_eq!(region.in_use, 0, "region {} got every segment back", region.name);
    }
}

#[test]
fn plain_frames_and_chains_in_one_poll_arrive_in_order_in_bursts_of_batch_size() {
    // No flow and no isolation: a poll's frames that are one mbuf of the
    // queue's pool go into the burst a column at a time, a chain is copied
    // one by one; every other packet of each TX burst is a chain, so polls
    // mix both. batch_size 48 is no multiple of a 64-mbuf poll.
    let mut config = TestConfig::dpdk("net_ring0")
        .master_core(0)
        .region("hdr", 4096, 2048)
        .region("tx_mem", 4096, 2048)
        .rx_queue(rx(0, "hdr").named("rq").core(1).batch(48).timeout_us(200_000))
        .tx_queue(tx(0, "tx_mem").named("tq").core(1).batch(64));
    config.model_mut().interfaces[0].tx.as_mut().unwrap().queues[0].memory_regions =
        vec!["hdr".into(), "tx_mem".into()];
    let engine = start(&config).expect("the engine starts on net_ring0");
    const PACKETS: u32 = 960;
    for first in (0..PACKETS).step_by(32) {
        let mut burst = engine.get_tx_packet_burst(0, 0, 32).unwrap();
        for i in 0..32 {
            let frame = udp_frame(1234, 5000, first + i as u32);
            if i % 2 == 0 {
                {
                    let mut packet = burst.packet_mut(i);
                    packet.segment_buffer(0).unwrap()[..frame.len()].copy_from_slice(&frame);
                    packet.set_lengths(&[frame.len()]).unwrap();
                }
                burst.free_packet_segment(1, i);
            } else {
                write_chain(&mut burst.packet_mut(i), &frame);
            }
        }
        engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut next, mut sizes) = (0u32, Vec::new());
    while next < PACKETS && Instant::now() < deadline {
        let Some(burst) = engine.get_rx_burst(0, 0).unwrap() else { continue };
        sizes.push(burst.num_packets());
        for packet in burst.packets() {
            let frame = udp_frame(1234, 5000, next);
            assert_eq!(packet.data(), &frame[..], "packet {next}, whole and in order");
            assert_eq!(packet.flow_id(), None);
            next += 1;
        }
    }
    assert_eq!(next, PACKETS, "every packet arrived");
    assert!(sizes.iter().all(|&n| n == 48), "full bursts of batch_size only: {sizes:?}");
    engine.shutdown();
    for region in &engine.stats().regions {
        assert_eq!(region.in_use, 0, "region {} got every buffer back", region.name);
    }
}

#[test]
fn header_data_split_needs_a_pmd_with_buffer_split_and_names_the_one_without() {
    let split = TestConfig::dpdk("net_null0")
        .master_core(0)
        .region("rx_mem", 16384, 2048)
        .region("hdr_mem", 16384, 256)
        .rx_queue(rx(0, "hdr_mem").split_into("rx_mem").core(1).batch(256).timeout_us(1000));
    let error = start(&split).expect_err("net_null has no buffer split");
    assert_eq!(error.status, daqiri::Status::NotSupported, "{error}");
    assert!(
        error.message.contains("the net_null PMD has none (RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT)"),
        "the PMD is named: {error}"
    );
    let engine = start(&null_device()).expect("net_null0 after a refused start");
    receive(&engine, 1_000);
}
