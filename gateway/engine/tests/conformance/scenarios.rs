//! The shared features, each written once and run against every bed. A
//! scenario returns how the bed met it; a failed expectation panics.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use daqiri::{Burst, DropReason, Engine, Status};
use daqiri_config::model::{EthernetMatch, FlowMatch, PortMatch, TxOffload};
use daqiri_config::testing::{TestConfig, rx};

use crate::beds::{Bed, Sender};
use crate::outcome::Outcome;

/// Buffers in region `mem`, where every RX queue lands.
const BUFS: u32 = 8192;

/// Datagrams each sender sends in the steering scenarios ([`steer_senders`]).
const STEERED_EACH: u32 = 30;

/// What one queue received: each packet's flow id and bytes (segments joined).
type Received = Vec<(Option<u32>, Vec<u8>)>;

/// The payload of datagram `seq` of `len` bytes: the sequence number
/// (big-endian), then bytes that depend on it.
pub fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8).collect();
    bytes[..4].copy_from_slice(&seq.to_be_bytes());
    bytes
}

/// Polls every queue of port 0 until `want` packets arrived in all, or `within` passed.
fn receive(engine: &Engine, queues: u16, want: usize, within: Duration) -> Vec<Received> {
    let mut got = vec![Received::new(); usize::from(queues)];
    let deadline = Instant::now() + within;
    while got.iter().map(Vec::len).sum::<usize>() < want && Instant::now() < deadline {
        for q in 0..queues {
            if let Some(burst) = engine.get_rx_burst(0, q).expect("port 0 has the queue") {
                for packet in burst.packets() {
                    let bytes: Vec<u8> =
                        (0..packet.num_segments()).filter_map(|s| packet.segment(s)).flatten().copied().collect();
                    got[usize::from(q)].push((packet.flow_id(), bytes));
                }
            }
        }
    }
    got
}

/// Starts the engine, or says how the bed refused the config: with
/// `NOT_SUPPORTED` naming the first of `paths` its message holds, else the
/// test fails.
pub fn start_or_refusal(bed: &dyn Bed, config: &TestConfig, paths: &[&str]) -> Result<Engine, Outcome> {
    match bed.start(config) {
        Ok(engine) => Ok(engine),
        Err(e) => {
            assert_eq!(e.status, Status::NotSupported, "refused, but not as NOT_SUPPORTED: {e}");
            let path = paths
                .iter()
                .find(|p| e.message.contains(**p))
                .unwrap_or_else(|| panic!("the refusal names one of {paths:?}: {e}"));
            Err(Outcome::Refused((*path).to_owned()))
        }
    }
}

/// What a bed with one RX queue says to a config of two.
const ONE_QUEUE: &str = "rx.queues";

/// Every datagram of a flow arrives byte-exact, in the order sent, with its flow id.
pub fn delivery(bed: &dyn Bed) -> Outcome {
    const COUNT: u32 = 2000;
    let sender = bed.sender(0);
    let mut config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(1).batch(32).timeout_us(bed.burst_timeout_us(200)));
    if bed.matches_flows() {
        config = config.udp_src_flow(7, 0, sender.port());
    }
    let engine = bed.start(&config).expect("the engine starts");
    let sent: Vec<Vec<u8>> = (0..COUNT).map(|seq| payload(seq, 200)).collect();
    for (i, p) in sent.iter().enumerate() {
        sender.send(&engine, p);
        pace(i);
    }
    let got = receive(&engine, 1, if bed.has_datagrams() { sent.len() } else { 1 }, Duration::from_secs(10));
    if !bed.has_datagrams() {
        // A byte stream: the bytes, in order, whatever the packet boundaries.
        let mut stream: Vec<u8> = got[0].iter().flat_map(|(_, b)| b.clone()).collect();
        let want: Vec<u8> = sent.concat();
        let deadline = Instant::now() + Duration::from_secs(10);
        while stream.len() < want.len() && Instant::now() < deadline {
            stream.extend(receive(&engine, 1, 1, Duration::from_millis(100))[0].iter().flat_map(|(_, b)| b.clone()));
        }
        assert!(stream == want, "the stream arrived changed ({} of {} bytes)", stream.len(), want.len());
        return Outcome::Passed;
    }
    assert_eq!(got[0].len(), sent.len(), "every datagram arrives; {}", counted(&engine));
    for (i, ((flow, bytes), want)) in got[0].iter().zip(&sent).enumerate() {
        assert_eq!(*flow, bed.matches_flows().then_some(7), "packet {i} carries its flow id, where flows match");
        assert_eq!(&bytes[bed.headers()..], &want[..], "packet {i} arrives byte-exact and in order");
    }
    Outcome::Passed
}

/// Two flows steer to two queues on two cores; each packet reaches its
/// flow's queue.
pub fn flows_to_queues(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no datagrams to match");
    }
    let (a, b) = (bed.sender(0), bed.sender(1));
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(0).batch(16).timeout_us(bed.burst_timeout_us(200)))
        .rx_queue(rx(1, "mem").core(1).batch(16).timeout_us(bed.burst_timeout_us(200)))
        .udp_src_flow(10, 0, a.port())
        .udp_src_flow(11, 1, b.port());
    let engine = match start_or_refusal(bed, &config, &["rx.flows", ONE_QUEUE]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    for seq in 0..500u32 {
        a.send(&engine, &payload(seq, 100));
        b.send(&engine, &payload(seq, 120));
        pace(seq as usize * 2);
    }
    let got = receive(&engine, 2, 1000, Duration::from_secs(10));
    for (queue, (flow, len)) in [(10, 100), (11, 120)].into_iter().enumerate() {
        assert_eq!(got[queue].len(), 500, "queue {queue} gets its flow's 500 datagrams");
        for (seq, (id, bytes)) in got[queue].iter().enumerate() {
            assert_eq!(*id, Some(flow));
            assert_eq!(&bytes[bed.headers()..], &payload(seq as u32, len)[..], "queue {queue} datagram {seq}");
        }
    }
    Outcome::Passed
}

/// A flow reload moves a flow to another queue while its datagrams are in
/// flight: each datagram arrives exactly once, byte-exact, those before the
/// swap on the old queue with the old id, the rest on the new one.
pub fn flow_reload_loses_nothing(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no datagrams to match");
    }
    const HALF: u32 = 1000;
    let sender = bed.sender(0);
    let queues = |config: daqiri_config::testing::TestConfig| {
        config
            .region("mem", BUFS, bed.buf_size())
            .rx_queue(rx(0, "mem").core(0).batch(16).timeout_us(bed.burst_timeout_us(200)))
            .rx_queue(rx(1, "mem").core(1).batch(16).timeout_us(bed.burst_timeout_us(200)))
    };
    let before = queues(bed.config()).udp_src_flow(20, 0, sender.port());
    let after = queues(bed.config()).udp_src_flow(21, 1, sender.port());
    let engine = match start_or_refusal(bed, &before, &["rx.flows", ONE_QUEUE]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    for seq in 0..HALF {
        sender.send(&engine, &payload(seq, 150));
        pace(seq as usize);
    }
    // No wait: the first half is still on its way through the receiver.
    engine.reload_flows(after.validate().expect("a valid config")).expect("the flows reload");
    for seq in HALF..2 * HALF {
        sender.send(&engine, &payload(seq, 150));
        pace(seq as usize);
    }
    let got = receive(&engine, 2, 2 * HALF as usize, Duration::from_secs(10));
    let mut seen = vec![0u32; 2 * HALF as usize];
    let mut last = [None::<u32>; 2];
    for (queue, flow) in [(0, 20), (1, 21)] {
        for (id, bytes) in &got[queue] {
            let seq = u32::from_be_bytes(bytes[bed.headers()..][..4].try_into().unwrap());
            assert_eq!(*id, Some(flow), "datagram {seq} on queue {queue} carries that queue's flow id");
            assert_eq!(&bytes[bed.headers()..], &payload(seq, 150)[..], "datagram {seq} arrives byte-exact");
            assert!(last[queue].is_none_or(|l| l < seq), "queue {queue} receives in order: {seq} after {last:?}");
            last[queue] = Some(seq);
            seen[seq as usize] += 1;
        }
    }
    let lost: Vec<usize> = seen.iter().enumerate().filter(|&(_, &n)| n != 1).map(|(seq, _)| seq).collect();
    assert!(lost.is_empty(), "every datagram arrives exactly once; not so: {:?}", &lost[..lost.len().min(20)]);
    assert!(last[1].is_some(), "the reloaded flow steers to queue 1");
    Outcome::Passed
}

/// Under `flow_isolation` only what a flow matches is received; the rest is
/// dropped and counted as unmatched, or, where the backend can, handed to
/// the kernel and counted so (as a NIC in rte_flow isolated mode does).
pub fn isolation(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no datagrams to match");
    }
    const EACH: u32 = 300;
    let (matched, other) = (bed.sender(0), bed.sender(1));
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(1).batch(16).timeout_us(200))
        .udp_src_flow(30, 0, matched.port())
        .isolated();
    let engine = match start_or_refusal(bed, &config, &["rx.flow_isolation", "rx.flows"]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    for seq in 0..EACH {
        matched.send(&engine, &payload(seq, 80));
        other.send(&engine, &payload(seq, 90));
        pace(seq as usize * 2);
    }
    let got = receive(&engine, 1, EACH as usize, Duration::from_secs(10));
    assert_eq!(got[0].len(), EACH as usize, "the matched flow's datagrams arrive");
    for (seq, (id, bytes)) in got[0].iter().enumerate() {
        assert_eq!(*id, Some(30));
        assert_eq!(&bytes[bed.headers()..], &payload(seq as u32, 80)[..], "datagram {seq} is the matched flow's");
    }
    let unmatched = || {
        let port = &engine.stats().ports[0];
        let to_kernel =
            port.link.nic_counters.iter().find(|(name, _)| name == "xdp_passed_unmatched").map_or(0, |c| c.1);
        port.rx_port_drops.drops(DropReason::UnmatchedFlow) + to_kernel
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while unmatched() < u64::from(EACH) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        unmatched(),
        u64::from(EACH),
        "every other datagram is counted as unmatched (dropped or passed to the kernel)"
    );
    assert!(receive(&engine, 1, 1, Duration::from_millis(200))[0].is_empty(), "nothing else arrives");
    Outcome::Passed
}

/// One flow over two queues (RSS): sixteen senders' datagrams spread over
/// both, and each sender's all land on one queue, in order, with the flow id.
pub fn rss_spread(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no datagrams to spread");
    }
    const SENDERS: u16 = 16;
    const EACH: u32 = 40;
    const LEN: usize = 64;
    let spread = daqiri_config::model::FlowMatch { ipv4_len: Some(28 + LEN as u16), ..Default::default() };
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(0).batch(16).timeout_us(200))
        .rx_queue(rx(1, "mem").core(1).batch(16).timeout_us(200))
        .flow(40, &[0, 1], spread);
    let engine = match start_or_refusal(bed, &config, &["rx.flows", ONE_QUEUE]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    let senders: Vec<_> = (0..SENDERS).map(|i| bed.sender(i)).collect();
    for seq in 0..EACH {
        for (i, sender) in senders.iter().enumerate() {
            sender.send(&engine, &payload(i as u32 * 1000 + seq, LEN));
        }
        pace(seq as usize * 16);
    }
    let got = receive(&engine, 2, usize::from(SENDERS) * EACH as usize, Duration::from_secs(10));
    let queue_of = per_sender(bed, &got, LEN, u32::from(SENDERS) * EACH, |_| (40, vec![0, 1]));
    assert!(got.iter().all(|q| !q.is_empty()), "the flow spreads over both queues: {queue_of:?}");
    Outcome::Passed
}

/// Flows by Ethernet address, as DAQIRI's `match.ethernet`: a source
/// address qualifying a UDP match, a source address alone, and a
/// destination address alone. Each sender's frames reach its flow's queue,
/// byte-exact and in order.
pub fn ethernet_steering(bed: &dyn Bed) -> Outcome {
    let senders = 6;
    // Senders 0 and 1 by their source; the rest by the destination they share.
    by_ethernet(bed, senders, |macs| {
        vec![
            (60, vec![0], ethernet(Some(macs(0).0), None, Some(5000))),
            (61, vec![1], ethernet(Some(macs(1).0), None, None)),
            (62, vec![0], ethernet(None, Some(macs(0).1), None)),
        ]
    })
    .map_or_else(
        |refused| refused,
        |queue_of| {
            let home: Vec<_> = (0..senders).map(|s| queue_of[&s]).collect();
            assert_eq!(home, [0, 1, 0, 0, 0, 0], "each sender's queue");
            Outcome::Passed
        },
    )
}

/// A destination address alone over two queues spreads by MAC: sixteen
/// senders' frames use both, each sender's all on one.
pub fn ethernet_rss_spread(bed: &dyn Bed) -> Outcome {
    let senders = 16;
    by_ethernet(bed, senders, |macs| vec![(63, vec![0, 1], ethernet(None, Some(macs(0).1), None))]).map_or_else(
        |refused| refused,
        |queue_of| {
            let spread: Vec<_> = (0..senders).map(|s| queue_of[&s]).collect();
            assert!(spread.contains(&0) && spread.contains(&1), "the flow spreads by MAC over both queues: {spread:?}");
            Outcome::Passed
        },
    )
}

/// Flows by IPv4 address, as DAQIRI's `match.ipv4_src` / `ipv4_dst`: one
/// sender's source address alone; the destination every sender shares,
/// qualified by a second sender's UDP source port; a destination nobody
/// sends to; and the shared destination alone, which takes the rest. Each
/// sender's datagrams reach its flow's queue, byte-exact and in order.
pub fn ipv4_steering(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no datagrams to match");
    }
    let senders: Vec<_> = (0..4).map(|i| bed.sender(i)).collect();
    // RDMA messages carry no addresses: their config names some all the same, to be refused.
    let ip = |i: usize| senders[i].ipv4().unwrap_or(([10, 0, 1, i as u8], [10, 0, 0, 2]));
    let address = |octets: [u8; 4]| Some(std::net::Ipv4Addr::from(octets));
    let flows = [
        (70, 1, FlowMatch { ipv4_src: address(ip(1).0), ..FlowMatch::default() }),
        (
            71,
            1,
            FlowMatch {
                ipv4_dst: address(ip(2).1),
                udp_src: Some(PortMatch::single(senders[2].port())),
                ..FlowMatch::default()
            },
        ),
        (72, 1, FlowMatch { ipv4_dst: address([10, 255, 255, 254]), ..FlowMatch::default() }),
        (73, 0, FlowMatch { ipv4_dst: address(ip(0).1), ..FlowMatch::default() }),
    ];
    let flows = flows.map(|(id, queue, matches)| (id, vec![queue], matches));
    let expected = [(73, 0), (70, 1), (71, 1), (73, 0)];
    let queue_of = match steer_senders(bed, &senders, &flows, &["match.ipv4_dst", "rx.flows", ONE_QUEUE], |sender| {
        let (flow, queue) = expected[sender as usize];
        (flow, vec![queue])
    }) {
        Ok(queue_of) => queue_of,
        Err(refused) => return refused,
    };
    let home: Vec<_> = (0..senders.len() as u32).map(|s| queue_of[&s]).collect();
    assert_eq!(home, [0, 1, 1, 0], "each sender's queue");
    Outcome::Passed
}

/// A `match.ethernet` of these addresses, beside a UDP destination port.
fn ethernet(src: Option<[u8; 6]>, dst: Option<[u8; 6]>, udp_dst: Option<u16>) -> FlowMatch {
    let text = |mac: [u8; 6]| mac.map(|b| format!("{b:02x}")).join(":");
    FlowMatch {
        ethernet: Some(EthernetMatch { src: src.map(text), dst: dst.map(text) }),
        udp_dst: udp_dst.map(PortMatch::single),
        ..FlowMatch::default()
    }
}

/// Runs `senders` senders through two queues steered by the flows `flows`
/// builds (id, queues, match) from each sender's (source, destination)
/// MACs. Every datagram must arrive once, byte-exact, in order per sender,
/// with its flow's id and on one queue per sender: returns that queue by
/// sender, or how the bed refused the config.
fn by_ethernet(
    bed: &dyn Bed,
    senders: u32,
    flows: impl Fn(&dyn Fn(usize) -> ([u8; 6], [u8; 6])) -> Vec<(u32, Vec<u16>, FlowMatch)>,
) -> Result<BTreeMap<u32, usize>, Outcome> {
    if !bed.has_datagrams() {
        return Err(Outcome::NotApplicable("a byte stream has no datagrams to match"));
    }
    let senders: Vec<_> = (0..senders as u16).map(|i| bed.sender(i)).collect();
    // Sockets send without Ethernet: their config names addresses all the same, to be refused.
    let macs = |i: usize| senders[i].macs().unwrap_or(([2, 0, 0, 1, 0, i as u8], [2, 0, 0, 0, 0, 2]));
    let flows = flows(&macs);
    let flow_of = |sender: u32| {
        let (src, dst) = macs(sender as usize);
        let frame_matches = |m: &FlowMatch| {
            let e = m.ethernet.as_ref().expect("an Ethernet match");
            e.src_mac().is_none_or(|s| s == src) && e.dst_mac().is_none_or(|d| d == dst)
        };
        flows.iter().find(|(_, _, m)| frame_matches(m)).map(|(id, queues, _)| (*id, queues.clone()))
    };
    let every_sender = |sender: u32| flow_of(sender).expect("every sender's frames match a flow");
    steer_senders(bed, &senders, &flows, &["match.ethernet", "rx.flows", ONE_QUEUE], every_sender)
}

/// Runs `senders` through two queues steered by `flows` (id, queues,
/// match), each sending [`STEERED_EACH`] datagrams tagged `sender * 1000 +
/// seq` in turn; checks them as [`per_sender`] does against `flow_of`, and
/// returns the queue by sender, or how the bed refused the config by one of
/// `refused_by`.
fn steer_senders(
    bed: &dyn Bed,
    senders: &[Box<dyn Sender>],
    flows: &[(u32, Vec<u16>, FlowMatch)],
    refused_by: &[&str],
    flow_of: impl Fn(u32) -> (u32, Vec<u16>),
) -> Result<BTreeMap<u32, usize>, Outcome> {
    let mut config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(0).batch(16).timeout_us(bed.burst_timeout_us(200)))
        .rx_queue(rx(1, "mem").core(1).batch(16).timeout_us(bed.burst_timeout_us(200)));
    for (id, queues, matches) in flows {
        config = config.flow(*id, queues, matches.clone());
    }
    let engine = start_or_refusal(bed, &config, refused_by)?;
    for seq in 0..STEERED_EACH {
        for (i, sender) in senders.iter().enumerate() {
            sender.send(&engine, &payload(i as u32 * 1000 + seq, 70));
        }
        pace(seq as usize * senders.len());
    }
    let got = receive(&engine, 2, senders.len() * STEERED_EACH as usize, Duration::from_secs(10));
    Ok(per_sender(bed, &got, 70, senders.len() as u32 * STEERED_EACH, flow_of))
}

/// Checks the datagrams of senders tagged `sender * 1000 + seq`, with
/// payloads of `len` bytes, that `got` holds by queue: each byte-exact,
/// carrying its sender's flow id, on one of that flow's queues (`flow_of`)
/// and all on the same one, in order; `total` in all. Returns the queue
/// each sender's datagrams landed on.
fn per_sender(
    bed: &dyn Bed,
    got: &[Received],
    len: usize,
    total: u32,
    flow_of: impl Fn(u32) -> (u32, Vec<u16>),
) -> BTreeMap<u32, usize> {
    let mut queue_of = BTreeMap::new();
    let mut next = BTreeMap::new();
    for (queue, received) in got.iter().enumerate() {
        for (id, bytes) in received {
            let tag = u32::from_be_bytes(bytes[bed.headers()..][..4].try_into().unwrap());
            let (sender, seq) = (tag / 1000, tag % 1000);
            assert_eq!(&bytes[bed.headers()..], &payload(tag, len)[..], "sender {sender}'s datagram {seq} byte-exact");
            let (flow, queues) = flow_of(sender);
            assert_eq!(*id, Some(flow), "sender {sender}'s datagrams carry flow {flow}");
            assert!(queues.contains(&(queue as u16)), "sender {sender}'s flow steers to queues {queues:?}");
            let first = *queue_of.entry(sender).or_insert(queue);
            assert_eq!(first, queue, "sender {sender}'s datagrams all land on queue {first}");
            let expected = next.entry(sender).or_insert(0);
            assert_eq!(seq, *expected, "sender {sender}'s datagrams arrive in order");
            *expected += 1;
        }
    }
    assert_eq!(next.values().sum::<u32>(), total, "every datagram arrives");
    queue_of
}

/// Two RX queues that name cores 0 and 1 run on two threads, each pinned
/// to its queue's core, as `/proc` shows and the status reports.
pub fn worker_per_core(bed: &dyn Bed) -> Outcome {
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(0).batch(16))
        .rx_queue(rx(1, "mem").core(1).batch(16));
    let engine = match start_or_refusal(bed, &config, &["rx.queues[1].cpu_core", ONE_QUEUE]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    let stats = engine.stats();
    let workers: Vec<_> = stats.ports[0]
        .rx_queues
        .iter()
        .map(|q| q.worker.clone().unwrap_or_else(|| panic!("queue {} has a worker", q.id)))
        .collect();
    assert_ne!(workers[0].tid, workers[1].tid, "each core has its own thread: {workers:?}");
    for (core, worker) in workers.iter().enumerate() {
        assert_eq!(worker.core, Some(core as u32), "queue {core}'s worker is pinned to its core: {worker:?}");
        let status = std::fs::read_to_string(format!("/proc/self/task/{}/status", worker.tid))
            .unwrap_or_else(|e| panic!("thread {} ({}) exists: {e}", worker.tid, worker.name));
        let allowed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list");
        assert_eq!(allowed.trim(), core.to_string(), "the kernel runs {} on core {core} only", worker.name);
    }
    Outcome::Passed
}

/// Traffic received, the engine stopped, and what it delivered before the
/// stop drained: every buffer of every region is back in its pool.
pub fn pools_back_after_drain(bed: &dyn Bed) -> Outcome {
    const SENT: u32 = 1000;
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(1).batch(8).timeout_us(bed.burst_timeout_us(100)));
    let engine = bed.start(&config).expect("the engine starts");
    let sender = bed.sender(0);
    for seq in 0..SENT {
        sender.send(&engine, &payload(seq, 300));
        pace(seq as usize);
    }
    // Drained: every byte sent was read and its burst dropped.
    let bytes = u64::from(SENT) * (300 + bed.headers() as u64);
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while read < bytes {
        assert!(Instant::now() < deadline, "{read} of {bytes} bytes arrived; {}", counted(&engine));
        if let Some(burst) = engine.get_rx_burst(0, 0).expect("port 0 queue 0") {
            read += burst.total_bytes();
        }
    }
    stops_with_every_buffer_back(&engine);
    Outcome::Passed
}

/// Stops `engine` (its receivers give back what they held for their next
/// receive) and checks that every region has every buffer back.
pub fn stops_with_every_buffer_back(engine: &Engine) {
    engine.shutdown();
    for region in engine.stats().regions {
        assert_eq!(region.in_use, 0, "region {} has every buffer back", region.name);
    }
}

/// The next burst of queue 0 within 10 s.
pub fn next_burst(engine: &Engine) -> Burst {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "a burst arrives");
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            return burst;
        }
    }
}

/// A CPU reorder plan over a flow whose packets arrive out of order puts
/// each packet's data in its slot: the aggregate equals the oracle.
pub fn cpu_reorder(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no packets to reorder");
    }
    if !bed.matches_flows() {
        return Outcome::NotApplicable("its messages match no flow, and a reorder plan takes packets by flow id");
    }
    const PER_BATCH: u32 = 16;
    const BATCHES: u32 = 4;
    const DATA: usize = 96;
    let sender = bed.sender(0);
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .region("batches", 64, u64::from(PER_BATCH) * DATA as u64)
        .rx_queue(rx(0, "mem").core(1).batch(PER_BATCH).timeout_us(bed.burst_timeout_us(20_000)))
        .udp_src_flow(3, 0, sender.port())
        .cpu_reorder("plan", &[3], "batches", bed.headers() as u32, PER_BATCH);
    let engine = bed.start(&config).expect("the engine starts");
    send_scrambled(&engine, sender.as_ref(), PER_BATCH * BATCHES, PER_BATCH, DATA);
    let aggregates = collect_batches(&engine, BATCHES, |burst| burst.packet(0).data().to_vec());
    for (id, aggregate) in aggregates {
        let oracle = oracle_batch(id, PER_BATCH, DATA);
        assert!(
            aggregate == oracle,
            "batch {id} equals the oracle (first bytes {:?} vs {:?})",
            &aggregate[..8],
            &oracle[..8]
        );
    }
    Outcome::Passed
}

/// Sends datagrams 0..`count`, each batch of `per_batch` in a scrambled
/// order (a fixed permutation), `data` bytes after each sequence number.
pub fn send_scrambled(engine: &Engine, sender: &dyn Sender, count: u32, per_batch: u32, data: usize) {
    let mut order: Vec<u32> = (0..count).collect();
    for batch in order.chunks_mut(per_batch as usize) {
        batch.reverse();
        batch.swap(1, 7);
    }
    for (i, &seq) in order.iter().enumerate() {
        sender.send(engine, &payload(seq, 4 + data));
        pace(i);
    }
}

/// The first `batches` aggregates queue 0 delivers within 10 s, by batch
/// id, each read by `read`; fails unless all came.
pub fn collect_batches(engine: &Engine, batches: u32, read: impl Fn(&Burst) -> Vec<u8>) -> BTreeMap<u64, Vec<u8>> {
    let mut aggregates = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while aggregates.len() < batches as usize && Instant::now() < deadline {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap()
            && let Some(id) = burst.batch_id()
        {
            aggregates.insert(id, read(&burst));
        }
    }
    assert_eq!(aggregates.len(), batches as usize, "every batch is emitted");
    aggregates
}

/// Batch `id` as the oracle places it: each slot's data in slot order.
pub fn oracle_batch(id: u64, per_batch: u32, data: usize) -> Vec<u8> {
    (0..per_batch).flat_map(|slot| payload(id as u32 * per_batch + slot, 4 + data)[4..].to_vec()).collect()
}

/// Bursts written by the raw and pcap writers hold the packets' bytes exactly.
pub fn writers(bed: &dyn Bed) -> Outcome {
    let config =
        bed.config().region("mem", BUFS, bed.buf_size()).rx_queue(rx(0, "mem").core(1).batch(10).timeout_us(500));
    let engine = bed.start(&config).expect("the engine starts");
    let sender = bed.sender(0);
    let dir = tempfile::tempdir().unwrap();
    let raw = daqiri::writer::RawWriter::new(dir.path(), "pkt", 0).unwrap();
    let pcap_path = dir.path().join("capture.pcap");
    let mut pcap = daqiri::writer::PcapWriter::create(&pcap_path, daqiri::writer::PcapResolution::Nanos, None).unwrap();
    for seq in 0..10u32 {
        sender.send(&engine, &payload(seq, 64 + seq as usize));
    }
    let burst = next_burst(&engine);
    let packets: Vec<Vec<u8>> = burst.packets().map(|p| p.data().to_vec()).collect();
    raw.write(&burst).expect("the raw writer writes");
    pcap.write_burst(&burst).expect("the pcap writer writes");
    drop(pcap);
    for (i, packet) in packets.iter().enumerate() {
        assert_eq!(&std::fs::read(raw.path(i)).unwrap(), packet, "raw file {i} holds packet {i}");
    }
    let file = std::fs::read(&pcap_path).unwrap();
    assert_eq!(&file[..4], &0xa1b2_3c4du32.to_le_bytes(), "a nanosecond pcap");
    let mut at = 24;
    for (i, packet) in packets.iter().enumerate() {
        let incl = u32::from_le_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
        assert_eq!(&file[at + 16..at + 16 + incl], &packet[..], "pcap record {i} holds packet {i}");
        at += 16 + incl;
    }
    assert_eq!(at, file.len(), "one record per packet");
    Outcome::Passed
}

/// An RX queue of two regions splits each packet's first region's worth of
/// bytes (its headers) from the rest, or the bed refuses it by path.
pub fn header_data_split(bed: &dyn Bed) -> Outcome {
    const HEAD: usize = 64;
    let config = bed
        .config()
        .region("mem", BUFS, HEAD as u64)
        .region("payload", BUFS, 2048)
        .rx_queue(rx(0, "mem").core(1).batch(8).timeout_us(500).split_into("payload"));
    let engine = match start_or_refusal(bed, &config, &["rx.queues[0].memory_regions"]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    let sender = bed.sender(0);
    let sent: Vec<Vec<u8>> = (0..8u32).map(|seq| payload(seq, 400)).collect();
    for p in &sent {
        sender.send(&engine, p);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = 0;
    while seen < sent.len() {
        assert!(Instant::now() < deadline, "{seen} of {} packets arrived", sent.len());
        let Some(burst) = engine.get_rx_burst(0, 0).unwrap() else { continue };
        for packet in burst.packets() {
            let head = packet.segment(0).expect("the headers' segment");
            let tail = packet.segment(1).expect("the payload's segment");
            assert_eq!(head.len(), HEAD, "the first segment fills its region's buffer");
            let joined = [head, tail].concat();
            assert_eq!(&joined[bed.headers()..], &sent[seen][..], "packet {seen} split without a byte lost");
            seen += 1;
        }
    }
    Outcome::Passed
}

/// An application that stops reading loses packets only as counted drops:
/// what reached the ring plus what was dropped, by reason, is what was sent.
pub fn drops_counted_when_stalled(bed: &dyn Bed) -> Outcome {
    if let Some(why) = bed.flow_controlled() {
        return Outcome::NotApplicable(why);
    }
    const SENT: u32 = 600;
    let config = bed
        .config()
        .region("mem", BUFS, bed.buf_size())
        .rx_meta_buffers(8)
        .rx_queue(rx(0, "mem").core(1).batch(4).timeout_us(100));
    let engine = bed.start(&config).expect("the engine starts");
    let sender = bed.sender(0);
    for seq in 0..SENT {
        sender.send(&engine, &payload(seq, 100));
        pace(seq as usize);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let accounted = || {
        let stats = engine.stats();
        let port = &stats.ports[0];
        let queue = &port.rx_queues[0].stats;
        let drops: u64 = DropReason::ALL.iter().map(|&r| queue.drops(r) + port.rx_port_drops.drops(r)).sum();
        (queue.packets, drops, queue.drops(DropReason::RingFull) + queue.drops(DropReason::NoFreeBurstBuffers))
    };
    while {
        let (delivered, drops, _) = accounted();
        delivered + drops < u64::from(SENT)
    } {
        assert!(Instant::now() < deadline, "accounted for {:?} of {SENT}", accounted());
        std::thread::sleep(Duration::from_millis(10));
    }
    let (delivered, drops, full) = accounted();
    let stats = engine.stats();
    let by_reason: Vec<(&str, u64, u64)> = DropReason::ALL
        .iter()
        .map(|&r| (r.as_str(), stats.ports[0].rx_queues[0].stats.drops(r), stats.ports[0].rx_port_drops.drops(r)))
        .filter(|&(_, queue, port)| queue + port > 0)
        .collect();
    assert_eq!(
        delivered + drops,
        u64::from(SENT),
        "every packet is delivered or counted as dropped: {delivered} delivered, (reason, queue, port) {by_reason:?}"
    );
    assert!(full > 0, "the stalled application's drops are counted as ring_full/no_free_burst_buffers");
    Outcome::Passed
}

/// TX queue 0 sends datagrams onto the bed's wire: an independent reader
/// at the far end gets each byte-exact and in order, and every TX buffer
/// is back in its pool once sent.
pub fn tx_byte_exact(bed: &dyn Bed) -> Outcome {
    const COUNT: u32 = 500;
    let mut reader = bed.tx_reader();
    let config =
        bed.tx_config().region("mem", BUFS, bed.buf_size()).rx_queue(rx(0, "mem").core(1).batch(1).timeout_us(100));
    let engine = bed.start(&config).expect("the engine starts");
    reader.attach(&engine);
    // A greeting the reader sent may sit in RX queue 0; it is not under test.
    while engine.get_rx_burst(0, 0).unwrap().is_some() {}
    let tx_region = bed.tx_region();
    let in_use = || engine.stats().regions.iter().find(|r| r.name == tx_region).map(|r| r.in_use);
    let idle = in_use();
    let sent: Vec<Vec<u8>> = (0..COUNT).map(|seq| payload(seq, 256)).collect();
    let mut stream = Vec::new();
    // A chunk at a time, read before the next: the reader's kernel buffer
    // (or the loopback's RX ring) holds a chunk, not the whole run.
    for (c, chunk) in sent.chunks(32).enumerate() {
        for p in chunk {
            crate::beds::send_one(&engine, |burst| bed.write_tx(&mut burst.packet_mut(0), p));
        }
        if bed.has_datagrams() {
            for (i, payload) in chunk.iter().enumerate() {
                let seq = c * 32 + i;
                let want = bed.tx_bytes(payload);
                let got =
                    reader.next(&engine, Duration::from_secs(10)).unwrap_or_else(|| panic!("datagram {seq} arrives"));
                assert!(
                    got == want,
                    "datagram {seq} arrives byte-exact and in order (got {} bytes starting {:?})",
                    got.len(),
                    &got[..got.len().min(8)]
                );
            }
        } else {
            let until = stream.len() + chunk.iter().map(Vec::len).sum::<usize>();
            while stream.len() < until {
                let Some(bytes) = reader.next(&engine, Duration::from_secs(10)) else { break };
                stream.extend(bytes);
            }
        }
    }
    if !bed.has_datagrams() {
        assert!(stream == sent.concat(), "the stream arrives unchanged ({} bytes)", stream.len());
    }
    // A PMD that keeps sent buffers keeps them however long one waits.
    let keeps = bed.keeps_sent_tx_buffers();
    let wait = if keeps.is_some() { Duration::from_secs(2) } else { Duration::from_secs(10) };
    let deadline = Instant::now() + wait;
    while in_use() != idle {
        if Instant::now() >= deadline
            && let Some(limit) = keeps
        {
            // Bounded by the PMD's TX ring (tx_descriptors, 1024 by default).
            let held = in_use().unwrap_or(0) - idle.unwrap_or(0);
            assert!(held <= 1024, "{held} sent TX buffers of {tx_region} are out: more than a TX ring holds");
            eprintln!("{held} of {COUNT} sent TX buffers stay out of {tx_region}");
            return Outcome::PassedWithin(limit.to_owned());
        }
        assert!(
            Instant::now() < deadline,
            "every TX buffer of {tx_region} is back: {:?} in use, {idle:?} when idle",
            in_use()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Outcome::Passed
}

/// The port's Ethernet address (`Engine::mac_address`, DAQIRI's
/// `get_mac_addr`) is the one the far end of the wire sees: the source of
/// every frame its TX queue sends with `offloads: [tx_eth_src]` (the frames
/// are written with another source). A port with no Ethernet of its own
/// answers `NOT_SUPPORTED`.
pub fn port_mac(bed: &dyn Bed) -> Outcome {
    const COUNT: u32 = 8;
    let mut config =
        bed.tx_config().region("mem", BUFS, bed.buf_size()).rx_queue(rx(0, "mem").core(1).batch(1).timeout_us(100));
    if let Err(e) = bed.start(&config).expect("the engine starts").mac_address(0) {
        assert_eq!(e.status, Status::NotSupported, "{e}");
        assert!(e.message.contains("no Ethernet address of its own"), "{e}");
        assert_eq!(bed.headers(), 0, "only a port whose packets carry no Ethernet header of ours has no address");
        return Outcome::NotApplicable("the kernel frames what the port sends: it has no Ethernet address of its own");
    }
    let tx = config.model_mut().interfaces[0].tx.as_mut().expect("the bed's TX queue");
    tx.queues[0].offloads.push(TxOffload::TxEthSrc);
    let engine = bed.start(&config).expect("the engine starts with tx_eth_src");
    // Read from the port that sends: a device may take a new address each
    // time it is made (DPDK's net_tap does).
    let mac = engine.mac_address(0).expect("the port's address");
    assert_ne!(bed.tx_bytes(&payload(0, 64))[6..12], mac, "the frames are written with another source");
    let mut reader = bed.tx_reader();
    reader.attach(&engine);
    while engine.get_rx_burst(0, 0).unwrap().is_some() {}
    for seq in 0..COUNT {
        crate::beds::send_one(&engine, |burst| bed.write_tx(&mut burst.packet_mut(0), &payload(seq, 64)));
        let frame = reader.next(&engine, Duration::from_secs(10)).unwrap_or_else(|| panic!("frame {seq} arrives"));
        assert_eq!(frame[6..12], mac, "frame {seq}'s source is the port's address");
        assert_eq!(frame[12..], bed.tx_bytes(&payload(seq, 64))[12..], "frame {seq} is otherwise as written");
    }
    Outcome::Passed
}

/// What port 0 counted, for a failure's message: where the missing went.
fn counted(engine: &Engine) -> String {
    let port = &engine.stats().ports[0];
    format!("port 0 counted {:?}, its link {:?}", port.rx_total(), port.link)
}

/// Datagrams sent back to back past the first few thousand would outrun a
/// kernel queue on a busy 2-core machine; a short sleep now and then keeps
/// the test about the engine.
pub fn pace(i: usize) {
    if i % 64 == 63 {
        std::thread::sleep(Duration::from_millis(1));
    }
}
