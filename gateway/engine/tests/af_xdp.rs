//! The AF_XDP backend over a veth pair with native XDP on the receiving
//! end and an independent raw-socket sender in another namespace: frames
//! arrive unchanged in their flow's queue with its flow id, RSS spreads a
//! flow list by 5-tuple, isolation leaves unmatched frames to the kernel, a
//! flow reload loses nothing, and the program is gone after a shutdown and
//! after a SIGKILL. Built with `--features af_xdp`; needs root.
#![cfg(feature = "af_xdp")]

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use daqiri::{DropReason, Engine, Status};

mod common;
use common::veth::{RawSocket, Veth, mac_of, udp_frame_to};
use daqiri_config::model::{FlowMatch, PortMatch};
use daqiri_config::testing::{TestConfig, rx, tx};

const ROOT: &str = "needs root for veth pairs and XDP; tests/run.sh runs it";

/// Our AF_XDP backend on `netdev`, `rx_queues` RX queues on core 1 over
/// one region, steered by `flows`.
fn config(netdev: &str, rx_queues: u16, isolation: bool, flows: fn(TestConfig) -> TestConfig) -> TestConfig {
    let mut config = (0..rx_queues)
        .fold(TestConfig::af_xdp(netdev).master_core(0).region("rx_mem", 16384, 2048), |config, i| {
            config.rx_queue(rx(i, "rx_mem").core(1).batch(64).timeout_us(500))
        });
    if isolation {
        config = config.isolated();
    }
    flows(config)
}

fn start(config: &TestConfig) -> daqiri::Result<Engine> {
    Engine::from_yaml(&config.yaml())
}

fn no_flows(config: TestConfig) -> TestConfig {
    config
}

/// Flow 11 alone: UDP destination 5000 to queue 0.
fn flow_a(config: TestConfig) -> TestConfig {
    config.udp_flow(11, 0, 5000)
}

/// Flow 11 to queue 0, 22 (ports 6000-6009) to queue 1, 33 (port 7000)
/// spread over both.
fn three_flows(config: TestConfig) -> TestConfig {
    config.udp_flow(11, 0, 5000).flow(22, &[1], ports(6000, 6009)).flow(33, &[0, 1], ports(7000, 7000))
}

fn ports(first: u16, last: u16) -> FlowMatch {
    FlowMatch { udp_dst: Some(PortMatch { first, last }), ..FlowMatch::default() }
}

fn frame(veth: &Veth, src_port: u16, dst_port: u16, seq: u32) -> Vec<u8> {
    udp_frame_to(veth.receive_mac(), [10, 203, 0, 1], [10, 203, 0, 2], src_port, dst_port, seq)
}

/// Everything each queue received within `within`, until `want` frames in all.
fn drain(engine: &Engine, queues: u16, want: usize, within: Duration) -> Vec<Vec<(Option<u32>, Vec<u8>)>> {
    let mut got: Vec<Vec<(Option<u32>, Vec<u8>)>> = vec![Vec::new(); queues as usize];
    let deadline = Instant::now() + within;
    while got.iter().map(Vec::len).sum::<usize>() < want && Instant::now() < deadline {
        for q in 0..queues {
            if let Some(burst) = engine.get_rx_burst(0, q).unwrap() {
                got[q as usize].extend(burst.packets().map(|p| (p.flow_id(), p.data().to_vec())));
            }
        }
    }
    got
}

fn seq_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes(frame[42..46].try_into().unwrap())
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn frames_reach_their_flows_queues_unchanged_and_rss_spreads_by_five_tuple() {
    let _ = ROOT;
    let veth = Veth::with_queues("xa", 2, true);
    let engine = start(&config(&veth.receive, 2, false, three_flows)).expect("the AF_XDP engine starts");
    let link = engine.stats().ports[0].link.af_xdp.clone().expect("an AF_XDP port reports its link");
    assert_eq!(link.xdp_mode, "native", "veth runs XDP in its driver");
    assert_eq!(link.sockets.len(), 2);
    assert!(link.sockets.iter().all(|s| s.mode == "copy"), "veth has no zero-copy: {link:?}");
    assert!(veth.link_state().contains("prog/xdp"), "the program is attached: {}", veth.link_state());

    let sender = veth.sender();
    let mut sent = Vec::new();
    for seq in 0..400u32 {
        // Flow a, flow b, the spread flow from 40 source ports, and unmatched.
        for (src, dst) in
            [(1000, 5000), (1000, 6000 + (seq % 10) as u16), (2000 + (seq % 40) as u16, 7000), (1000, 8000)]
        {
            let f = frame(&veth, src, dst, seq);
            sender.send(&f);
            sent.push(f);
        }
        if seq % 32 == 31 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = drain(&engine, 2, sent.len(), Duration::from_secs(10));
    let mut expected: HashMap<Vec<u8>, ()> = sent.iter().map(|f| (f.clone(), ())).collect();
    let mut spread_queue: HashMap<u16, usize> = HashMap::new();
    let mut spread_per_queue = [0usize; 2];
    for (queue, frames) in got.iter().enumerate() {
        for (flow, data) in frames {
            assert!(
                expected.remove(data).is_some(),
                "queue {queue}: a frame {} ({} bytes, seq {}, ports {:?})",
                if sent.contains(data) { "twice" } else { "changed or never sent" },
                data.len(),
                seq_of(data),
                &data[34..38]
            );
            let dst = u16::from_be_bytes([data[36], data[37]]);
            let src = u16::from_be_bytes([data[34], data[35]]);
            match dst {
                5000 => assert_eq!((queue, *flow), (0, Some(11)), "flow a, seq {}", seq_of(data)),
                6000..=6009 => assert_eq!((queue, *flow), (1, Some(22)), "flow b, seq {}", seq_of(data)),
                7000 => {
                    assert_eq!(*flow, Some(33));
                    spread_per_queue[queue] += 1;
                    let first = *spread_queue.entry(src).or_insert(queue);
                    assert_eq!(first, queue, "source port {src} stays on one queue");
                }
                _ => assert_eq!((queue, *flow), (0, None), "unmatched goes to the first queue without a flow id"),
            }
        }
    }
    assert!(expected.is_empty(), "{} of {} frames never arrived", expected.len(), sent.len());
    assert!(
        spread_per_queue.iter().all(|&n| n > 40),
        "RSS spreads 40 source ports over both queues: {spread_per_queue:?}"
    );
    let stats = engine.stats();
    let flows: Vec<(u32, u64)> = stats.ports[0].flows.iter().map(|f| (f.id, f.packets)).collect();
    assert_eq!(flows, vec![(11, 400), (22, 400), (33, 400)]);
    let counter = |name: &str| stats.ports[0].link.nic_counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    assert_eq!(counter("xdp_passed_no_socket"), Some(0), "{:?}", stats.ports[0].link.nic_counters);
    let delivered: u64 = stats.ports[0].rx_queues.iter().map(|q| q.stats.packets).sum();
    assert_eq!(delivered, 1600);

    engine.shutdown();
    assert!(!veth.link_state().contains("prog/xdp"), "shutdown detaches the program: {}", veth.link_state());
    drop(engine);
    // A second engine on the same netdev starts: nothing was left attached or bound.
    let again = start(&config(&veth.receive, 2, false, three_flows)).expect("the netdev is free again");
    drop(again);
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn under_isolation_unmatched_frames_reach_a_kernel_socket_on_the_same_interface() {
    let veth = Veth::with_queues("xi", 1, true);
    let engine = start(&config(&veth.receive, 1, true, flow_a)).expect("the AF_XDP engine starts");
    let kernel = std::net::UdpSocket::bind((Veth::RECEIVE_IP, 9000)).expect("a kernel socket on the veth's address");
    kernel.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let sender = veth.sender();
    for seq in 0..50 {
        sender.send(&frame(&veth, 1000, 5000, seq));
        sender.send(&frame(&veth, 1000, 9000, seq));
    }
    let got = drain(&engine, 1, 50, Duration::from_secs(5));
    assert_eq!(got[0].len(), 50, "the matched flow reaches the engine");
    assert!(got[0].iter().all(|(flow, _)| *flow == Some(11)));
    let mut buffer = [0u8; 128];
    for seq in 0..50 {
        let (n, _) = kernel.recv_from(&mut buffer).expect("unmatched frames reach the kernel's socket");
        assert_eq!(n, 64);
        assert_eq!(u32::from_be_bytes(buffer[..4].try_into().unwrap()), seq);
    }
    let stats = engine.stats();
    let passed = stats.ports[0].link.nic_counters.iter().find(|(n, _)| n == "xdp_passed_unmatched").map(|(_, v)| *v);
    assert_eq!(passed, Some(50));
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn a_flow_reload_during_traffic_rewrites_the_maps_and_loses_nothing() {
    let veth = Veth::with_queues("xr", 2, true);
    let after: fn(TestConfig) -> TestConfig = |config| config.udp_flow(11, 1, 5000).udp_flow(44, 0, 5001);
    let engine = start(&config(&veth.receive, 2, true, flow_a)).expect("the AF_XDP engine starts");
    let program_id = |state: &str| state.split_whitespace().skip_while(|w| *w != "id").nth(1).map(str::to_owned);
    let attached = program_id(&veth.link_state());
    const FRAMES: u32 = 20_000;
    let sending = std::thread::scope(|scope| {
        let sender = veth.sender();
        let veth = &veth;
        let handle = scope.spawn(move || {
            for seq in 0..FRAMES {
                sender.send(&frame(veth, 1000, 5000, seq));
                if seq % 64 == 63 {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        });
        let mut received: Vec<(u16, Option<u32>, u32)> = Vec::new();
        let mut reloaded = false;
        let deadline = Instant::now() + Duration::from_secs(20);
        while received.len() < FRAMES as usize && Instant::now() < deadline {
            if !reloaded && received.len() > FRAMES as usize / 3 {
                let new = config(&veth.receive, 2, true, after).validate().unwrap();
                engine.reload_flows(new).expect("a flow reload");
                reloaded = true;
            }
            for q in 0..2 {
                if let Some(burst) = engine.get_rx_burst(0, q).unwrap() {
                    received.extend(burst.packets().map(|p| (q, p.flow_id(), seq_of(p.data()))));
                }
            }
        }
        handle.join().unwrap();
        received
    });
    let seqs: HashSet<u32> = sending.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(seqs.len(), FRAMES as usize, "every frame arrives once across the reload");
    assert_eq!(sending.len(), FRAMES as usize);
    assert!(sending.iter().all(|(_, flow, _)| *flow == Some(11)));
    let on_new_queue = sending.iter().filter(|(q, _, _)| *q == 1).count();
    assert!(on_new_queue > 0 && on_new_queue < FRAMES as usize, "the reload moved the flow: {on_new_queue}");
    // One flow from one sender arrives in order: every frame before the
    // switch on the old queue, every frame after it on the new one.
    let last_on_old = sending.iter().filter(|(q, _, _)| *q == 0).map(|(_, _, s)| *s).max();
    let first_on_new = sending.iter().filter(|(q, _, _)| *q == 1).map(|(_, _, s)| *s).min();
    assert!(
        last_on_old < first_on_new,
        "the flow moved once: last on queue 0 {last_on_old:?}, first on queue 1 {first_on_new:?}"
    );
    assert_eq!(program_id(&veth.link_state()), attached, "the same program runs: only its maps changed");
    let drops = engine.stats().ports[0].rx_port_drops.drops(DropReason::UnmatchedFlow);
    assert_eq!(drops, 0);
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn tx_frames_leave_through_the_ring_and_their_buffers_come_back() {
    let veth = Veth::with_queues("xt", 1, false);
    let tx_port =
        TestConfig::af_xdp(&veth.receive).region("tx_mem", 1024, 2048).tx_queue(tx(0, "tx_mem").core(1).batch(32));
    let engine = start(&tx_port).expect("an AF_XDP TX port starts");
    let peer = RawSocket::on(&veth.send);
    let frames: Vec<Vec<u8>> =
        (0..200).map(|seq| udp_frame_to([2, 0, 0, 0, 0, 9], [10, 0, 0, 1], [10, 0, 0, 2], 1, 5000, seq)).collect();
    for chunk in frames.chunks(32) {
        let mut burst = engine.get_tx_packet_burst(0, 0, chunk.len()).unwrap();
        for (i, f) in chunk.iter().enumerate() {
            burst.packet_mut(i).write(f).unwrap();
        }
        engine.send_tx_burst(burst).unwrap();
    }
    let mut arrived = Vec::new();
    while arrived.len() < frames.len() {
        match peer.receive(Duration::from_secs(5)) {
            Some(f) if f.len() >= 46 && f[12..14] == [8, 0] => arrived.push(f),
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(arrived, frames, "every frame leaves once, unchanged and in order");
    let deadline = Instant::now() + Duration::from_secs(5);
    while engine.stats().regions[0].in_use > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(engine.stats().regions[0].in_use, 0, "completions give every buffer back");
    assert_eq!(engine.queue_stats(0, daqiri::Direction::Tx, 0).unwrap().packets, 200);
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn a_sigkilled_engine_leaves_no_program_and_the_next_start_succeeds() {
    if let Ok(netdev) = std::env::var("DAQIRI_AF_XDP_CHILD") {
        // The child: start, say so, and wait to be killed.
        let _engine = start(&config(&netdev, 1, false, no_flows)).expect("the child's engine starts");
        println!("child-started");
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let veth = Veth::with_queues("xk", 1, false);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_sigkilled_engine_leaves_no_program_and_the_next_start_succeeds",
            "--ignored",
            "--nocapture",
        ])
        .env("DAQIRI_AF_XDP_CHILD", &veth.receive)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !veth.link_state().contains("prog/xdp") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(veth.link_state().contains("prog/xdp"), "the child attached its program");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while veth.link_state().contains("prog/xdp") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !veth.link_state().contains("prog/xdp"),
        "the kernel detached the killed process's link: {}",
        veth.link_state()
    );
    let engine = start(&config(&veth.receive, 1, false, no_flows)).expect("the next start succeeds");
    assert!(veth.link_state().contains("prog/xdp"));
    drop(engine);
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn what_the_netdev_or_the_kernel_cannot_take_is_refused_by_name() {
    let veth = Veth::with_queues("xe", 1, false);
    let err = start(&config(&veth.receive, 2, false, no_flows)).unwrap_err();
    assert_eq!(err.status, Status::InvalidParameter);
    assert!(err.message.contains("ethtool -L") && err.message.contains(&veth.receive), "{}", err.message);

    let mut odd_frames = config(&veth.receive, 1, false, no_flows);
    odd_frames.model_mut().memory_regions[0].buf_size = 3000;
    let err = start(&odd_frames).unwrap_err();
    assert_eq!(err.status, Status::NotSupported);
    assert!(
        err.message.contains("memory_regions[0].buf_size") && err.message.contains("2048 or 4096"),
        "{}",
        err.message
    );

    let err = start(&config("dq_no_such_dev", 1, false, no_flows)).unwrap_err();
    assert!(err.message.contains("dq_no_such_dev") && err.message.contains("not found"), "{}", err.message);
    assert!(!veth.link_state().contains("prog/xdp"), "a refused start attaches nothing");

    // More NIC queues than RX queues: frames the NIC spreads to the others
    // would reach no socket, so it is refused, not half received.
    let wide = Veth::with_queues("xw", 2, false);
    let err = start(&config(&wide.receive, 1, false, no_flows)).unwrap_err();
    assert_eq!(err.status, Status::NotSupported);
    assert!(
        err.message.contains("interfaces[0].rx.queues")
            && err.message.contains(&format!("ethtool -L {}", wide.receive)),
        "{}",
        err.message
    );
    wide.use_queues(1);
    drop(start(&config(&wide.receive, 1, false, no_flows)).expect("one NIC queue for one RX queue"));
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn a_small_region_keeps_its_fill_ring_fed_for_many_times_its_buffers() {
    // 128 buffers, so a ring of 64: thousands of frames cycle every buffer
    // through the fill ring many times, and one lost on the way starves it.
    let veth = Veth::with_queues("xf", 1, true);
    let mut small = config(&veth.receive, 1, true, flow_a);
    small.model_mut().memory_regions[0].num_bufs = 128;
    let engine = start(&small).expect("the AF_XDP engine starts");
    let sender = veth.sender();
    const FRAMES: u32 = 6_000;
    const ROUND: u32 = 16;
    let mut received = 0;
    // In lock step, so a slow worker on a busy machine drops nothing: each
    // round waits for its frames, which a starved fill ring never delivers.
    for round in 0..FRAMES / ROUND {
        for seq in round * ROUND..(round + 1) * ROUND {
            sender.send(&frame(&veth, 1000, 5000, seq));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while received < ((round + 1) * ROUND) as usize && Instant::now() < deadline {
            if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
                received += burst.num_packets();
            }
        }
        if received < ((round + 1) * ROUND) as usize {
            break;
        }
    }
    let stats = engine.stats();
    assert_eq!(received, FRAMES as usize, "kernel counters: {:?}", stats.ports[0].link.nic_counters);
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn a_flow_added_at_runtime_steers_in_the_program_until_it_is_deleted() {
    let veth = Veth::with_queues("xd", 2, true);
    let mut dynamic = config(&veth.receive, 2, true, no_flows);
    dynamic.model_mut().interfaces[0].rx.as_mut().unwrap().dynamic_flow_capacity = 4;
    let engine = start(&dynamic).expect("the AF_XDP engine starts");
    let late: daqiri_config::model::Flow =
        serde_yaml::from_str("{ name: late, id: 55, action: { type: queue, id: 1 }, match: { udp_dst: 5005 } }")
            .unwrap();
    engine.add_flow(0, late).expect("a runtime flow");
    let sender = veth.sender();
    for seq in 0..100 {
        sender.send(&frame(&veth, 1000, 5005, seq));
    }
    let got = drain(&engine, 2, 100, Duration::from_secs(5));
    assert!(got[0].is_empty(), "nothing on queue 0");
    assert_eq!(got[1].len(), 100, "the runtime flow's frames reach queue 1");
    assert!(got[1].iter().all(|(flow, _)| *flow == Some(55)));

    engine.delete_flow(0, 55).expect("the runtime flow goes");
    for seq in 100..150 {
        sender.send(&frame(&veth, 1000, 5005, seq));
    }
    let passed = |engine: &Engine| {
        let stats = engine.stats();
        stats.ports[0].link.nic_counters.iter().find(|(n, _)| n == "xdp_passed_unmatched").map_or(0, |(_, v)| *v)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while passed(&engine) < 50 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // At least: the kernel's ICMP answers make the sender's ARP replies pass too.
    assert!(passed(&engine) >= 50, "without the flow, isolation leaves its frames to the kernel");
    assert!(drain(&engine, 2, 1, Duration::from_millis(200)).iter().all(Vec::is_empty));
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn a_busy_polling_queue_sets_its_socket_and_receives() {
    let veth = Veth::with_queues("xb", 1, true);
    let mut busy = config(&veth.receive, 1, true, flow_a);
    busy.model_mut().interfaces[0].rx.as_mut().unwrap().queues[0].busy_poll_us = Some(50);
    let engine = start(&busy).expect("the AF_XDP engine starts");
    let link = engine.stats().ports[0].link.af_xdp.clone().unwrap();
    assert_eq!(link.sockets[0].busy_poll_us, Some(50), "SO_BUSY_POLL is set: {link:?}");
    let sender = veth.sender();
    for seq in 0..200 {
        sender.send(&frame(&veth, 1000, 5000, seq));
    }
    let got = drain(&engine, 1, 200, Duration::from_secs(5));
    let seqs: Vec<u32> = got[0].iter().map(|(_, data)| seq_of(data)).collect();
    assert_eq!(seqs, (0..200).collect::<Vec<_>>(), "every frame, in order, through the busy-polled socket");
}

#[test]
#[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]
fn a_netdev_without_native_xdp_runs_the_program_generic_and_delivers_each_flow() {
    // A macvlan has no XDP of its own: the program runs in generic mode,
    // where a frame may have no room for metadata and the receiver matches
    // the flows itself.
    let veth = Veth::with_queues("xg", 1, true);
    let macvlan = format!("{}m", veth.receive);
    let ip =
        |args: &[&str]| assert!(std::process::Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}");
    ip(&["link", "add", "link", &veth.receive, "name", &macvlan, "type", "macvlan", "mode", "bridge"]);
    ip(&["link", "set", &macvlan, "up"]);
    let one_queue: fn(TestConfig) -> TestConfig =
        |config| config.udp_flow(11, 0, 5000).flow(22, &[0], ports(6000, 6009)).flow(33, &[0], ports(7000, 7000));
    let engine = start(&config(&macvlan, 1, true, one_queue)).expect("the AF_XDP engine starts on a macvlan");
    assert_eq!(engine.stats().ports[0].link.af_xdp.clone().unwrap().xdp_mode, "generic");
    let mac = mac_of(&macvlan);
    let sender = veth.sender();
    for seq in 0..100 {
        for dst in [5000, 6003, 7000, 9999] {
            sender.send(&udp_frame_to(mac, [10, 203, 0, 1], [10, 203, 0, 2], 1000, dst, seq));
        }
    }
    let got = drain(&engine, 1, 300, Duration::from_secs(5));
    let mut flows: HashMap<Option<u32>, usize> = HashMap::new();
    for (flow, _) in &got[0] {
        *flows.entry(*flow).or_default() += 1;
    }
    assert_eq!(
        flows,
        HashMap::from([(Some(11), 100), (Some(22), 100), (Some(33), 100)]),
        "isolation passed 9999's frames"
    );
    let stats = engine.stats();
    let passed = stats.ports[0].link.nic_counters.iter().find(|(n, _)| n == "xdp_passed_unmatched").map(|(_, v)| *v);
    assert!(passed >= Some(100), "{passed:?}");
    drop(engine);
    let _ = std::process::Command::new("ip").args(["link", "del", &macvlan]).status();
}
