//! Socket backend over loopback: UDP steering and a lossless TCP stream.

use std::time::{Duration, Instant};

use daqiri::Engine;
use sha2::{Digest, Sha256};

mod common;
use common::{free_tcp_port, free_udp_port};
use daqiri_config::testing::{TestConfig, rx, tx};

#[test]
fn udp_flows_steer_by_source_port_with_their_flow_id() {
    let (server, a, b, c) = (free_udp_port(), free_udp_port(), free_udp_port(), free_udp_port());
    let yaml = TestConfig::udp_server(server)
        .region("mem", 4096, 2048)
        .rx_queue(rx(0, "mem").batch(16).timeout_us(1000))
        .rx_queue(rx(1, "mem").batch(16).timeout_us(1000))
        .isolated()
        .udp_src_flow(100, 0, a)
        .udp_src_flow(101, 1, b)
        .yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    let send_from = |port: u16, count: usize| {
        let sock = std::net::UdpSocket::bind(("127.0.0.1", port)).unwrap();
        for i in 0..count {
            sock.send_to(&(i as u32).to_be_bytes(), ("127.0.0.1", server)).unwrap();
        }
    };
    send_from(a, 100);
    send_from(b, 50);
    send_from(c, 7);
    let mut seen = [Vec::new(), Vec::new()];
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen[0].len() + seen[1].len() < 150 && Instant::now() < deadline {
        for queue in 0..2u16 {
            if let Some(burst) = engine.get_rx_burst(0, queue).unwrap() {
                for p in burst.packets() {
                    seen[queue as usize].push((p.flow_id(), u32::from_be_bytes(p.data().try_into().unwrap())));
                }
            }
        }
    }
    assert_eq!(seen[0], (0..100).map(|i| (Some(100), i)).collect::<Vec<_>>(), "queue 0: flow 100, in order");
    assert_eq!(seen[1], (0..50).map(|i| (Some(101), i)).collect::<Vec<_>>(), "queue 1: flow 101, in order");
    // The unmatched datagrams may sit in another queue's socket than the
    // last matched ones: their count arrives when that worker reads them.
    let unmatched = || engine.stats().ports[0].rx_port_drops.drops(daqiri::DropReason::UnmatchedFlow);
    while unmatched() < 7 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(unmatched(), 7, "isolation drops the unmatched sender");
}

#[test]
fn udp_client_tx_reaches_server_rx_through_gso_and_gro() {
    // The client sends runs of equal-size datagrams as GSO messages; the
    // server's GRO socket gets them coalesced and must hand out each datagram
    // in its own buffer, whatever the sizes, in order and intact.
    let server = free_udp_port();
    let yaml = TestConfig::udp_server(server)
        .rx_meta_buffers(4096)
        .region("mem", 16384, 20000)
        .rx_queue(rx(0, "mem").batch(16).timeout_us(500))
        .and(TestConfig::udp_client(([127, 0, 0, 1], server).into()).tx_queue(tx(0, "mem").batch(64)))
        .yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    let client = engine.get_port_id("client").unwrap();
    let shapes: &[&[usize]] = &[&[8000; 4], &[100; 10], &[1500, 1500, 1500, 700], &[20000], &[64; 64], &[0, 5]];
    // Many runs back to back, each shape three times, so the receiver also
    // gets several coalesced messages in one call right after a size change.
    let runs: Vec<&[usize]> = (0..300).map(|i| shapes[i / 3 % shapes.len()]).collect();
    let mut expected = Vec::new();
    for run in runs {
        let mut burst = loop {
            match engine.get_tx_packet_burst(client, 0, run.len()) {
                Ok(b) => break b,
                Err(_) => std::thread::yield_now(),
            }
        };
        for (i, &len) in run.iter().enumerate() {
            let n = expected.len() as u32;
            let body: Vec<u8> = (0..len).map(|b| (b as u32).wrapping_mul(31).wrapping_add(n) as u8).collect();
            burst.packet_mut(i).write(&body).unwrap();
            expected.push(body);
        }
        let mut pending = burst;
        while let Err(refused) = engine.send_tx_burst(pending) {
            pending = refused.burst;
            std::thread::yield_now();
        }
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < expected.len() && Instant::now() < deadline {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            got.extend(b.packets().map(|p| p.data().to_vec()));
        }
    }
    let stats = engine.stats();
    assert_eq!(
        got.len(),
        expected.len(),
        "rx port drops {:?}, queue {:?}",
        stats.ports[0].rx_port_drops,
        stats.ports[0].rx_queues[0].stats
    );
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert!(g == e, "datagram {i}: {} bytes received, {} sent, or contents differ", g.len(), e.len());
    }
    assert_eq!(engine.stats().ports[1].tx_queues[0].stats.packets, expected.len() as u64);
    assert_eq!(engine.stats().ports[0].rx_total().total_drops(), 0);
    // Both queues name core 0: one worker polls the client's TX and the server's RX.
    assert_eq!(worker_threads(), ["core-0"]);
    let link = &engine.stats().ports[0].link;
    assert_eq!(link.peer, engine.local_addr(client).unwrap(), "the server's peer is the client");
    assert!(link.kernel_rx_buffer_bytes.is_some_and(|b| b > 0), "{link:?}");
}

/// Names of this process's engine worker threads, sorted.
fn worker_threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| ["core-", "rx-", "tx-", "loop-"].iter().any(|p| name.starts_with(p)))
        .collect();
    names.sort();
    names
}

#[test]
fn tcp_streams_one_gib_without_losing_or_reordering_a_byte() {
    let engine = stream_tcp(1 << 30, 0, 1);
    assert_eq!(worker_threads(), ["rx-server", "tx-client-0"]);
    let link = &engine.stats().ports[0].link;
    assert_eq!(link.connected, Some(true), "{link:?}");
    assert!(link.peer.is_some(), "{link:?}");
}

#[test]
fn tcp_queues_sharing_a_core_stream_on_one_worker_without_stalling() {
    // The sender and the receiver of one connection on one thread: neither
    // may block it, or a full socket buffer on one side would stall both.
    let _engine = stream_tcp(256 << 20, 0, 0);
    assert_eq!(worker_threads(), ["core-0"]);
}

#[test]
fn an_idle_worker_sharing_a_core_sleeps_in_the_kernel_and_wakes_for_a_burst() {
    // One thread runs the server's RX and the client's TX. Idle, it sleeps
    // in ppoll on the connection and the TX doorbell, waking for the RX
    // queue's 1 ms timeout: about 300 times in 300 ms, where napping in
    // 50 µs steps took thousands.
    let engine = stream_tcp(1 << 20, 0, 0);
    let tid = engine.stats().ports[0].rx_queues[0].worker.clone().expect("a worker").tid;
    let switches = || {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
            .sum::<u64>()
    };
    std::thread::sleep(Duration::from_millis(50));
    let before = switches();
    std::thread::sleep(Duration::from_millis(300));
    let woke = switches() - before;
    assert!(woke < 900, "the idle worker woke {woke} times in 300 ms");
    // Woken by the doorbell, it sends what comes next.
    let mut burst = engine.get_tx_packet_burst(1, 0, 1).unwrap();
    burst.packet_mut(0).write(b"after the sleep").unwrap();
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let burst = loop {
        assert!(Instant::now() < deadline, "the burst sent after the sleep never arrived");
        match engine.get_rx_burst(0, 0).unwrap() {
            Some(burst) => break burst,
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    // (Idle, it once handed over an empty burst at every RX timeout.)
    assert_eq!(burst.num_packets(), 1, "a burst of {} bytes", burst.total_bytes());
    assert_eq!(burst.packet(0).data(), b"after the sleep");
}

#[test]
fn tcp_sends_every_segment_of_long_bursts_in_order() {
    // Bursts of 200 two-segment packets (header and payload regions), some
    // payloads empty: more segments than one sendmsg takes, so each burst
    // goes out in several writes, and the stream is every byte in order.
    const PACKETS: usize = 200;
    let port = free_tcp_port();
    let yaml = TestConfig::tcp_server(port)
        .region("rx_mem", 1024, 8192)
        .region("tx_hdr", 1024, 256)
        .region("tx_data", 1024, 4096)
        .rx_queue(rx(0, "rx_mem").core(0).batch(64).timeout_us(1000))
        .and(
            TestConfig::tcp_client(([127, 0, 0, 1], port).into())
                .tx_queue(tx(0, "tx_hdr").split_into("tx_data").core(1).batch(PACKETS as u32)),
        )
        .yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    let mut sent = Vec::new();
    for round in 0..4 {
        let mut burst = loop {
            match engine.get_tx_packet_burst(1, 0, PACKETS) {
                Ok(burst) => break burst,
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        };
        for i in 0..PACKETS {
            let k = round * PACKETS + i;
            let lengths = [1 + k % 97, if k.is_multiple_of(5) { 0 } else { (k * 37) % 4096 }];
            let mut packet = burst.packet_mut(i);
            for (segment, &len) in lengths.iter().enumerate() {
                let bytes = &mut packet.segment_buffer(segment).expect("a host segment")[..len];
                for (j, byte) in bytes.iter_mut().enumerate() {
                    *byte = (k * 31 + j * 7 + segment) as u8;
                }
                sent.extend_from_slice(bytes);
            }
            packet.set_lengths(&lengths).unwrap();
        }
        engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    }
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while received.len() < sent.len() {
        assert!(Instant::now() < deadline, "only {} of {} bytes arrived", received.len(), sent.len());
        match engine.get_rx_burst(0, 0).unwrap() {
            Some(burst) => burst.packets().for_each(|p| received.extend_from_slice(p.data())),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    assert!(received == sent, "the stream differs from the segments sent ({} bytes)", sent.len());
    let tx = &engine.stats().ports[1].tx_queues[0].stats;
    assert_eq!((tx.packets, tx.bytes), (4 * PACKETS as u64, sent.len() as u64), "every packet counted as sent");
}

/// Streams `total` bytes from a TCP client's TX queue (on `tx_core`) to a
/// server's RX queue (on `rx_core`) and checks every byte arrived in order.
fn stream_tcp(total: u64, rx_core: u32, tx_core: u32) -> Engine {
    const CHUNK: usize = 64 * 1024;
    let port = free_tcp_port();
    let yaml = TestConfig::tcp_server(port)
        .rx_meta_buffers(64)
        .tx_meta_buffers(64)
        .region("rx_mem", 512, 65536)
        .region("tx_mem", 512, 65536)
        .rx_queue(rx(0, "rx_mem").core(rx_core).batch(16).timeout_us(1000))
        .and(TestConfig::tcp_client(([127, 0, 0, 1], port).into()).tx_queue(tx(0, "tx_mem").core(tx_core).batch(16)))
        .yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            // A deterministic, non-repeating byte stream: a counter per 8 bytes.
            let mut hash = Sha256::new();
            let mut word = 0u64;
            let mut sent = 0u64;
            while sent < total {
                let mut burst = match engine.get_tx_packet_burst(1, 0, 16) {
                    Ok(b) => b,
                    Err(_) => {
                        std::thread::yield_now();
                        continue;
                    }
                };
                for i in 0..16 {
                    let mut chunk = [0u8; CHUNK];
                    for piece in chunk.chunks_exact_mut(8) {
                        piece.copy_from_slice(&word.to_le_bytes());
                        word += 1;
                    }
                    hash.update(chunk);
                    burst.packet_mut(i).write(&chunk).unwrap();
                }
                sent += 16 * CHUNK as u64;
                let mut pending = burst;
                loop {
                    match engine.send_tx_burst(pending) {
                        Ok(()) => break,
                        Err(e) => {
                            pending = e.burst;
                            std::thread::yield_now();
                        }
                    }
                }
            }
            hash.finalize()
        });
        let mut hash = Sha256::new();
        let mut received = 0u64;
        let deadline = Instant::now() + Duration::from_secs(240);
        while received < total {
            assert!(Instant::now() < deadline, "only {received} of {total} bytes arrived");
            match engine.get_rx_burst(0, 0).unwrap() {
                Some(burst) => {
                    for p in burst.packets() {
                        hash.update(p.data());
                        received += p.len() as u64;
                    }
                }
                None => std::thread::yield_now(),
            }
        }
        assert_eq!(received, total);
        assert_eq!(hash.finalize(), sender.join().unwrap(), "received bytes differ from sent bytes");
    });
    assert_eq!(engine.stats().ports[0].rx_total().total_drops(), 0);
    engine
}

/// Under UDP GRO the kernel drops a coalesced run of datagrams as one
/// buffer: `socket_overflow` counts each dropped run's first datagram (never
/// more than was lost) and `socket_overflow_estimated` the estimated rest.
/// The sender sends GSO runs of 32, the receiver is a direct queue nobody
/// polls until the sending is done, so its socket buffer overflows.
#[test]
fn socket_overflow_counts_datagrams_of_coalesced_runs() {
    const SENT: u64 = 320_000;
    let server = free_udp_port();
    let yaml = TestConfig::udp_server(server)
        .region("rx", 8192, 2048)
        .region("tx", 4096, 2048)
        .rx_queue(rx(0, "rx").direct())
        .and(TestConfig::udp_client(([127, 0, 0, 1], server).into()).tx_queue(tx(0, "tx").batch(32)))
        .yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    let mut offered = 0;
    while offered < SENT {
        let Ok(mut burst) = engine.get_tx_packet_burst(1, 0, 32) else {
            std::thread::sleep(Duration::from_micros(100));
            continue;
        };
        for i in 0..32 {
            burst.packet_mut(i).write(&[0x5a; 1400]).unwrap();
        }
        if engine.send_tx_burst(burst).is_ok() {
            offered += 32;
        }
    }
    let sent = || engine.stats().ports[1].tx_queues[0].stats.packets;
    let deadline = Instant::now() + Duration::from_secs(20);
    while sent() < SENT {
        assert!(Instant::now() < deadline, "the sender sent {} of {SENT}", sent());
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut received = 0u64;
    let mut idle = Instant::now();
    while idle.elapsed() < Duration::from_millis(300) {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            received += burst.num_packets() as u64;
            idle = Instant::now();
        }
    }
    engine.shutdown();
    let drops = &engine.stats().ports[0].rx_port_drops;
    let exact = drops.drops(daqiri::DropReason::SocketOverflow);
    let overflow = exact + drops.drops(daqiri::DropReason::SocketOverflowEstimated);
    assert!(overflow > SENT / 4, "the socket buffer overflowed: {received} received, {overflow} counted dropped");
    assert_eq!(drops.total_drops(), overflow, "{drops:?}");
    assert!(received + exact <= SENT, "the exact count is a lower bound: {received} received + {exact} of {SENT}");
    let accounted = received + overflow;
    // Exact when every run has the same length; allow 1% for runs the kernel cut.
    assert!(
        accounted.abs_diff(SENT) <= SENT / 100,
        "{received} received + {overflow} dropped = {accounted} of {SENT} sent"
    );
}

/// What a UDP socket had queued when its engine stops is delivered, not
/// lost with the socket: a direct queue nobody polled still hands over every
/// datagram sent before the stop, and nothing is counted dropped.
#[test]
fn a_stop_delivers_what_the_socket_had_queued() {
    const SENT: usize = 300;
    let server = free_udp_port();
    let config = TestConfig::udp_server(server).region("rx", 1024, 2048).rx_queue(rx(0, "rx").batch(16).direct());
    let engine = Engine::from_yaml(&config.yaml()).unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for seq in 0..SENT as u32 {
        sender.send_to(&seq.to_be_bytes(), ("127.0.0.1", server)).unwrap();
    }
    engine.shutdown();
    let mut received = Vec::new();
    // Drained, a stopped engine says NOT_READY.
    while let Ok(Some(burst)) = engine.get_rx_burst(0, 0) {
        received.extend(burst.packets().map(|p| u32::from_be_bytes(p.data().try_into().unwrap())));
    }
    assert_eq!(received, (0..SENT as u32).collect::<Vec<_>>(), "every datagram, in order");
    assert_eq!(engine.stats().ports[0].rx_total().total_drops(), 0);
}

/// A TCP server on a free port with one queue of 64 buffers.
fn one_tcp_server() -> (u16, Engine) {
    let port = free_tcp_port();
    let config = TestConfig::tcp_server(port).region("rx_mem", 64, 2048).rx_queue(rx(0, "rx_mem").timeout_us(1000));
    (port, Engine::from_yaml(&config.yaml()).unwrap())
}

/// A TCP client that connects and sends nothing cannot lock others out: once
/// a 5 s window passed without 5 KiB from it while another waits, it is
/// closed and the waiting one served. Alone, a quiet connection is kept
/// however long it pauses.
#[test]
fn a_silent_tcp_connection_gives_way_to_a_waiting_one_but_is_kept_alone() {
    use std::io::{Read, Write};
    let (port, engine) = one_tcp_server();
    let received = |within: Duration| -> Vec<u8> {
        let deadline = Instant::now() + within;
        let mut bytes = Vec::new();
        while Instant::now() < deadline && bytes.is_empty() {
            if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
                burst.packets().for_each(|p| bytes.extend_from_slice(p.data()));
            }
        }
        bytes
    };
    let mut quiet = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(5500));
    quiet.write_all(b"still here").unwrap();
    assert_eq!(received(Duration::from_secs(2)), b"still here", "alone, a pause does not cost the connection");
    let mut waiting = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    waiting.write_all(b"let me in").unwrap();
    let started = Instant::now();
    assert_eq!(received(Duration::from_secs(8)), b"let me in", "the waiting client is served");
    assert!(started.elapsed() > Duration::from_secs(4), "after the silent one's 5 s: {:?}", started.elapsed());
    quiet.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    assert_eq!(quiet.read(&mut [0u8; 16]).unwrap(), 0, "the silent connection was closed");
}

/// A client that keeps its connection alive with a byte now and then (the
/// attack a silence timer misses) delivers less than 1 KiB/s: while another
/// client waits, it is closed at the end of its 5 s window.
#[test]
fn a_trickling_tcp_connection_gives_way_to_a_waiting_one() {
    use std::io::{Read, Write};
    let (port, engine) = one_tcp_server();
    let mut trickle = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dripping = {
        let (mut trickle, stop) = (trickle.try_clone().unwrap(), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && trickle.write_all(b".").is_ok() {
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let mut waiting = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    waiting.write_all(b"let me in").unwrap();
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut bytes = Vec::new();
    while Instant::now() < deadline && !bytes.ends_with(b"let me in") {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            burst.packets().for_each(|p| bytes.extend_from_slice(p.data()));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    dripping.join().unwrap();
    assert!(bytes.ends_with(b"let me in"), "the waiting client is served within 8 s: {bytes:?}");
    assert!(
        bytes[..bytes.len() - 9].iter().all(|&b| b == b'.'),
        "first the trickle's bytes, then the waiting client's"
    );
    trickle.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    assert_eq!(trickle.read(&mut [0u8; 16]).unwrap_or(0), 0, "the trickling connection was closed");
}

/// A UDP server's RX queues form a reuseport group: each queue's socket
/// lands its flow's datagrams in the queue's own region, on its own core.
#[test]
fn a_udp_servers_queues_receive_in_their_own_regions_on_their_own_cores() {
    let server = free_udp_port();
    let (a, b) = (std::net::UdpSocket::bind("127.0.0.1:0").unwrap(), std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    let config = TestConfig::udp_server(server)
        .region("first", 256, 2048)
        .region("second", 256, 2048)
        .rx_queue(rx(0, "first").core(0).batch(10).timeout_us(200))
        .rx_queue(rx(1, "second").core(1).batch(10).timeout_us(200))
        .udp_src_flow(1, 0, a.local_addr().unwrap().port())
        .udp_src_flow(2, 1, b.local_addr().unwrap().port());
    let engine = Engine::from_yaml(&config.yaml()).expect("a server with two regions and two cores starts");
    for i in 0..10u8 {
        a.send_to(&[b'a', i], ("127.0.0.1", server)).unwrap();
        b.send_to(&[b'b', i], ("127.0.0.1", server)).unwrap();
    }
    for (queue, tag, region) in [(0u16, b'a', "first"), (1, b'b', "second")] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut bursts = Vec::new();
        while bursts.iter().map(|b: &daqiri::Burst| b.num_packets()).sum::<usize>() < 10 {
            assert!(Instant::now() < deadline, "queue {queue} gets its flow's 10 datagrams");
            bursts.extend(engine.get_rx_burst(0, queue).unwrap());
        }
        assert!(
            bursts.iter().flat_map(|b| b.packets()).all(|p| p.data()[0] == tag),
            "queue {queue} holds its flow only"
        );
        let regions = engine.stats().regions;
        let held = regions.iter().find(|r| r.name == region).unwrap().in_use;
        assert!(held >= 10, "queue {queue}'s packets sit in region {region} ({held} buffers in use)");
    }
    let workers: Vec<_> = engine.stats().ports[0].rx_queues.iter().map(|q| q.worker.clone().unwrap()).collect();
    assert_eq!((workers[0].core, workers[1].core), (Some(0), Some(1)));
}

/// Upstream's `cpu_core: -1`: the queue's worker is a thread the kernel
/// schedules anywhere (no pinned core in the stats), and receives as any.
#[test]
fn a_udp_queue_on_cpu_core_minus_one_receives_on_an_unpinned_worker() {
    let server = free_udp_port();
    let config = TestConfig::udp_server(server).region("mem", 256, 2048).rx_queue(rx(0, "mem").unpinned().batch(10));
    assert!(config.yaml().contains("cpu_core: -1"), "{}", config.yaml());
    let engine = Engine::from_yaml(&config.yaml()).expect("an unpinned UDP queue starts");
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..10u8 {
        sender.send_to(&[i], ("127.0.0.1", server)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < 10 {
        assert!(Instant::now() < deadline, "10 datagrams arrive: {got:?}");
        got.extend(engine.get_rx_burst(0, 0).unwrap().iter().flat_map(|b| b.packets()).map(|p| p.data()[0]));
    }
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
    let worker = engine.stats().ports[0].rx_queues[0].worker.clone().expect("a worker reads the queue");
    assert_eq!(worker.core, None, "not pinned: {worker:?}");
}

/// A datagram lands whole in one buffer: `max_payload_size` above the
/// smallest landing buffer is refused by path; at it, datagrams of that size
/// arrive whole and a longer one is counted as truncated.
#[test]
fn udp_max_payload_size_is_the_landing_buffer_at_most() {
    use daqiri_config::testing::{TestConfig, rx};
    let port = free_udp_port();
    let config = |max: u32| {
        let mut config = TestConfig::udp_server(port).region("mem", 256, 2048).rx_queue(rx(0, "mem").core(0));
        config.model_mut().interfaces[0].socket_config.as_mut().unwrap().max_payload_size = Some(max);
        config.yaml()
    };
    let error = Engine::from_yaml(&config(2049)).expect_err("above the buffer");
    assert_eq!(error.status, daqiri::Status::NotSupported, "{error}");
    assert!(error.message.contains("daqiri.cfg.interfaces[0].socket_config.max_payload_size"), "{error}");
    assert!(error.message.contains("region \"mem\" of 2048-byte buffers"), "names the region: {error}");
    let engine = Engine::from_yaml(&config(2048)).unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for len in [2048, 2049, 2048] {
        sender.send_to(&vec![7u8; len], ("127.0.0.1", port)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lens = Vec::new();
    while lens.len() < 2 {
        assert!(Instant::now() < deadline, "two datagrams of 2048 bytes arrive: {lens:?}");
        lens.extend(engine.get_rx_burst(0, 0).unwrap().iter().flat_map(|b| b.packets()).map(|p| p.data().len()));
    }
    assert_eq!(lens, [2048, 2048]);
    let truncated = engine.stats().ports[0].rx_port_drops.drops(daqiri::DropReason::Truncated);
    assert_eq!(truncated, 1, "the 2049-byte datagram is counted");
}

/// A UDP client has one socket: RX queues on another core are refused by path.
#[test]
fn a_udp_clients_second_rx_core_is_refused_by_path() {
    use daqiri_config::testing::{TestConfig, rx};
    let mut config = TestConfig::udp_server(free_udp_port())
        .region("mem", 256, 2048)
        .rx_queue(rx(0, "mem").core(0))
        .rx_queue(rx(1, "mem").core(1));
    let socket = config.model_mut().interfaces[0].socket_config.as_mut().unwrap();
    socket.mode = daqiri_config::model::SocketMode::Client;
    socket.remote_addr = socket.local_addr.take();
    let error = Engine::from_yaml(&config.yaml()).expect_err("one socket, two cores");
    assert_eq!(error.status, daqiri::Status::NotSupported, "{error}");
    assert!(error.message.contains("rx.queues[1].cpu_core"), "{error}");
}

/// A socket bound to every address is not told a datagram's destination:
/// `match.ipv4_dst` there is refused by path; bound to one address it is
/// that address, and a flow on it takes every datagram.
#[test]
fn ipv4_dst_needs_a_socket_bound_to_one_address() {
    let flow = |m: daqiri_config::model::FlowMatch| {
        move |config: TestConfig| {
            config.region("mem", 256, 2048).rx_queue(rx(0, "mem").core(0)).flow(9, &[0], m.clone())
        }
    };
    let to = |octets: [u8; 4]| daqiri_config::model::FlowMatch {
        ipv4_dst: Some(octets.into()),
        ..daqiri_config::model::FlowMatch::default()
    };
    let port = free_udp_port();
    let wildcard = flow(to([127, 0, 0, 1]))(TestConfig::udp_server_on(([0, 0, 0, 0], port).into()));
    let error = Engine::from_yaml(&wildcard.yaml()).expect_err("no destination to match");
    assert_eq!(error.status, daqiri::Status::NotSupported, "{error}");
    assert!(error.message.contains("daqiri.cfg.interfaces[0].rx.flows[0].match.ipv4_dst"), "{error}");
    let bound = flow(to([127, 0, 0, 1]))(TestConfig::udp_server(port)).isolated();
    let engine = Engine::from_yaml(&bound.yaml()).unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sender.send_to(b"to 127.0.0.1", ("127.0.0.1", port)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let burst = loop {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            break burst;
        }
        assert!(Instant::now() < deadline, "the datagram arrives through the flow");
    };
    assert_eq!(burst.packets().next().unwrap().flow_id(), Some(9));
}

#[test]
fn socket_options_reach_the_sockets_and_the_connections_made_later() {
    let int = |v: i32| v.to_ne_bytes();
    let read = |engine: &Engine, port: u16, name: i32| -> i32 {
        let bytes = engine.socket_option(port, libc::SOL_SOCKET, name).unwrap();
        i32::from_ne_bytes(bytes[..4].try_into().unwrap())
    };
    // UDP: the interface socket, at once (the kernel doubles SO_RCVBUF for its bookkeeping).
    let server = free_udp_port();
    let udp =
        Engine::from_yaml(&TestConfig::udp_server(server).region("rx", 64, 2048).rx_queue(rx(0, "rx").batch(1)).yaml())
            .unwrap();
    udp.set_socket_option(0, libc::SOL_SOCKET, libc::SO_RCVBUF, &int(65536)).unwrap();
    assert_eq!(read(&udp, 0, libc::SO_RCVBUF), 2 * 65536);
    let refused = udp.set_socket_option(0, libc::SOL_SOCKET, 9999, &int(1)).unwrap_err();
    assert_eq!(refused.status, daqiri::Status::GenericFailure, "{refused}");
    assert!(refused.message.contains("port 0") && refused.message.contains("option 9999"), "{refused}");
    assert!(refused.io_error().is_some(), "the kernel's reason is kept: {refused}");

    // TCP: set before any connection, it reaches the connection once made.
    let (port, tcp) = one_tcp_server();
    assert_eq!(tcp.socket_option(0, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_err().status, daqiri::Status::NotReady);
    tcp.set_socket_option(0, libc::SOL_SOCKET, libc::SO_RCVBUF, &int(98304)).unwrap();
    let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tcp.socket_option(0, libc::SOL_SOCKET, libc::SO_RCVBUF).is_err() {
        assert!(Instant::now() < deadline, "the server never accepted the connection");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(read(&tcp, 0, libc::SO_RCVBUF), 2 * 98304);
}

#[test]
fn a_port_without_sockets_has_no_socket_options() {
    let engine = Engine::from_yaml(&TestConfig::loopback().region("m", 64, 2048).rx_queue(rx(0, "m")).yaml()).unwrap();
    let err = engine.set_socket_option(0, libc::SOL_SOCKET, libc::SO_RCVBUF, &1i32.to_ne_bytes()).unwrap_err();
    assert_eq!(err.status, daqiri::Status::NotSupported, "{err}");
    assert!(err.message.contains("no socket"), "{err}");
}
