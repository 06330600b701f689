//! The RoCE backend against soft-RoCE in the VM test bed (tests/vm/run.sh
//! runs these; tests/vm/soft_roce.sh left `rxe0` on 10.77.0.1), with
//! rdma-core's pyverbs as the independent peer (tests/vm/rdma_send.py);
//! and, on any host, what the backend refuses and how it fails.
#![cfg(feature = "rdma")]

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use daqiri::{DropReason, Engine, Status};
use daqiri_config::model::{MemoryAccess, TransportMode};
use daqiri_config::testing::{TestConfig, rx, tx};

/// The soft-RoCE device's address in the VM.
const RXE_ADDR: [u8; 4] = [10, 77, 0, 1];

/// Bytes per message slot in tests/vm/rdma_target.py's memory (its `LARGEST`).
const SLOT: u64 = 4096;

/// Message `k` as tests/vm/rdma_send.py sends it.
fn message(k: u32) -> Vec<u8> {
    let length = 1 + (k as usize * 997) % 4096;
    let mut body = k.to_be_bytes().to_vec();
    body.extend((0..length.saturating_sub(4)).map(|i| (k as usize + i) as u8));
    body.truncate(length);
    body
}

/// A RoCE server on `addr` receiving into one 64-buffer region.
fn server(addr: SocketAddr) -> TestConfig {
    TestConfig::roce_server(addr).master_core(0).region("rx", 64, 4096).rx_queue(rx(0, "rx").core(1))
}

#[test]
fn what_the_roce_backend_does_not_do_yet_is_refused_by_path() {
    // A second TX queue has no connection to send on: there is one RX queue.
    let config =
        server(SocketAddr::from((RXE_ADDR, 18_611))).tx_queue(tx(0, "rx").core(1)).tx_queue(tx(1, "rx").core(1));
    let mut client = TestConfig::roce_client(RXE_ADDR.into(), SocketAddr::from((RXE_ADDR, 18_611)))
        .region("c", 8, 4096)
        .tx_queue(tx(0, "c").core(1));
    client.model_mut().interfaces[0].socket_config.as_mut().unwrap().remote_addr = None;
    // A third port receives into GPU memory, which a build without cuda cannot register.
    let mut gpu = TestConfig::roce_server(SocketAddr::from((RXE_ADDR, 18_614)))
        .region("gpu", 8, 4096)
        .rx_queue(rx(0, "gpu").core(1));
    gpu.model_mut().memory_regions[0].kind = daqiri_config::model::MemoryKind::Device;
    // A fourth asks for messages longer than the buffers they land in.
    let mut big = TestConfig::roce_server(SocketAddr::from((RXE_ADDR, 18_615)))
        .region("small", 8, 4096)
        .rx_queue(rx(0, "small").core(1));
    big.model_mut().interfaces[0].socket_config.as_mut().unwrap().max_payload_size = Some(8192);
    let all =
        config.and(client.interface_named("client")).and(gpu.interface_named("gpu")).and(big.interface_named("big"));
    let err = Engine::from_yaml(&all.yaml()).expect_err("refused");
    assert_eq!(err.status, Status::NotSupported, "{err}");
    for path in [
        "daqiri.cfg.interfaces[0].tx.queues[1]",
        "daqiri.cfg.interfaces[1].socket_config.remote_addr",
        "daqiri.cfg.interfaces[1].tx",
        "daqiri.cfg.interfaces[3].socket_config.max_payload_size",
    ] {
        assert!(err.message.contains(path), "names {path}: {err}");
    }
    // A cuda build registers GPU memory (as a dma-buf) once the port opens.
    let gpu_path = "daqiri.cfg.interfaces[2].rx.queues[0].memory_regions";
    assert_eq!(err.message.contains(gpu_path), !cfg!(feature = "cuda"), "{err}");
}

#[test]
fn a_roce_server_fails_to_start_with_the_reason_where_no_rdma_device_has_its_address() {
    let err = Engine::new(server(SocketAddr::from(([127, 0, 0, 1], 18_612))).validate().unwrap())
        .expect_err("no RDMA device here");
    assert_eq!(err.status, Status::InvalidParameter, "{err}");
    assert!(err.message.contains("RoCE interface \"server\""), "names the interface: {err}");
}

/// An engine with a RoCE server on `server_addr` (port 0) and its client
/// (port 1), each with an RX queue of the given buffers (server's, client's;
/// bursts of 8, a partial one delivered after 1 ms) and a TX queue of 64,
/// every queue on core 1.
fn server_and_client(server_addr: SocketAddr, sizes: (u32, u32)) -> daqiri::Result<Engine> {
    Engine::new(server_and_client_config(server_addr, sizes).validate().unwrap())
}

/// An engine of `config`'s RoCE interfaces, each over UC.
fn over_uc(mut config: TestConfig) -> Engine {
    for interface in &mut config.model_mut().interfaces {
        interface.roce_config.as_mut().unwrap().transport_mode = TransportMode::Uc;
    }
    Engine::new(config.validate().unwrap()).unwrap()
}

/// A RoCE server and a client of it on the soft-RoCE address.
fn server_and_client_config(server_addr: SocketAddr, (server_rx, client_rx): (u32, u32)) -> TestConfig {
    TestConfig::roce_server(server_addr)
        .master_core(0)
        .region("server_rx", server_rx, 4096)
        .region("server_tx", 64, 4096)
        .rx_queue(rx(0, "server_rx").core(1).batch(8).timeout_us(1000))
        .tx_queue(tx(0, "server_tx").core(1).batch(8))
        .and(
            TestConfig::roce_client(RXE_ADDR.into(), server_addr)
                .region("client_rx", client_rx, 4096)
                .region("client_tx", 64, 4096)
                .rx_queue(rx(0, "client_rx").core(1).batch(8).timeout_us(1000))
                .tx_queue(tx(0, "client_tx").core(1).batch(8)),
        )
}

/// The immediate message `k` goes with when our engine sends it: every
/// third message has one (0xDA00_0000 + k), the rest none (as
/// tests/vm/rdma_send.py's `immediate` says, which the pyverbs server checks).
fn immediate_of(k: u32) -> Option<u32> {
    (k % 3 == 1).then_some(0xDA00_0000 + k)
}

/// Sends message 0..count from TX queue 0 of `port`, each packet its own
/// message, retrying while the ring is full (it waits for a connection).
fn send_messages(engine: &Engine, port: u16, count: u32) {
    send_messages_to(engine, port, count, None);
}

/// What a test's TX packets do with the peer's memory at an address
/// (slot `k` for message `k`) under a remote key.
#[derive(Clone, Copy)]
enum Remote {
    /// Write message `k` there.
    Write(u64, u32),
    /// Read message `k`'s length from there.
    Read(u64, u32),
}

/// [`send_messages`], each message written to or read from slot `k` of
/// the peer's memory where `remote` says.
fn send_messages_to(engine: &Engine, port: u16, count: u32, remote: Option<Remote>) {
    send_range(engine, (port, 0), 0..count, remote);
}

/// Sends messages `ks` from TX queue `queue` of `port`, as [`send_messages_to`].
fn send_range(engine: &Engine, (port, queue): (u16, u16), ks: std::ops::Range<u32>, remote: Option<Remote>) {
    let (mut k, deadline) = (ks.start, Instant::now() + Duration::from_secs(60));
    let count = ks.end;
    while k < count {
        assert!(
            Instant::now() < deadline,
            "sent up to {k} of {ks:?} in a minute: {:?}",
            engine.stats().ports[port as usize]
        );
        let n = (count - k).min(8) as usize;
        let Ok(mut burst) = engine.get_tx_packet_burst(port, queue, n) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        for i in 0..n {
            let mut packet = burst.packet_mut(i);
            let k = k + i as u32;
            let slot = |base| base + u64::from(k) * SLOT;
            if let Some(Remote::Read(base, rkey)) = remote {
                packet.set_rdma_read(slot(base), rkey, message(k).len()).unwrap();
                continue;
            }
            packet.write(&message(k)).unwrap();
            if let Some(immediate) = immediate_of(k) {
                packet.set_immediate(immediate).unwrap();
            }
            if let Some(Remote::Write(base, rkey)) = remote {
                packet.set_rdma_write(slot(base), rkey).unwrap();
            }
        }
        let mut pending = burst;
        while let Err(refused) = engine.send_tx_burst(pending) {
            pending = refused.burst;
            std::thread::sleep(Duration::from_millis(1));
        }
        k += n as u32;
    }
}

/// Every packet RX queue 0 of `port` delivers until `count` or a minute
/// passed: its bytes and its immediate.
fn receive_messages(engine: &Engine, port: u16, count: u32) -> Vec<(Vec<u8>, Option<u32>)> {
    receive_on(engine, (port, 0), count)
}

/// [`receive_messages`] of RX queue `queue`.
fn receive_on(engine: &Engine, (port, queue): (u16, u16), count: u32) -> Vec<(Vec<u8>, Option<u32>)> {
    let (mut seen, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
    while seen.len() < count as usize && Instant::now() < deadline {
        match engine.get_rx_burst(port, queue).unwrap() {
            Some(burst) => seen.extend(burst.packets().map(|p| (p.data().to_vec(), p.immediate()))),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    seen
}

/// Messages 0..count arrived whole, in order, each of its own length and
/// with the immediate it was sent with (`immediates` says how it was sent).
fn assert_messages(seen: &[(Vec<u8>, Option<u32>)], count: u32, immediates: fn(u32) -> Option<u32>) {
    assert_eq!(seen.len(), count as usize, "every message arrives");
    for (k, (data, immediate)) in seen.iter().enumerate() {
        let k = k as u32;
        assert_eq!(data, &message(k), "message {k} arrives whole, in order, of its own length");
        assert_eq!(*immediate, immediates(k), "message {k}'s immediate");
    }
}

/// How the pyverbs peer sends: no immediates.
fn none(_: u32) -> Option<u32> {
    None
}

/// A pyverbs peer: `/usr/bin/python3` (Debian's, which has pyverbs) on
/// one of tests/vm's scripts, from the repository root.
fn python(args: &[&str]) -> Command {
    let mut command = Command::new("/usr/bin/python3");
    command.args(args).current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    command
}

/// A pyverbs peer that says a first line (what it listens on, or what
/// it is), then works; the rest of what it says is read aside, so a
/// peer that hangs cannot hang the test.
struct Peer {
    child: std::process::Child,
    rest: Option<std::thread::JoinHandle<String>>,
}

impl Peer {
    /// Starts `args` with a pipe to write to; returns it and its first line.
    fn start(args: &[&str]) -> (Self, String) {
        let mut child =
            python(args).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().unwrap();
        let mut said = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut said, &mut first).unwrap();
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut said, &mut rest);
            rest
        });
        (Self { child, rest: Some(rest) }, first)
    }

    fn say(&mut self, line: &str) {
        std::io::Write::write_all(self.child.stdin.as_mut().unwrap(), line.as_bytes()).unwrap();
    }

    /// Whether it exited with a failure already.
    fn failed(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some_and(|status| !status.success())
    }

    /// Waits until it exits (killed if not by `deadline`); asserts it
    /// succeeded, and returns what it said after its first line.
    fn finish(mut self, deadline: Instant) -> String {
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let hung = self.child.try_wait().unwrap().is_none();
        if hung {
            self.child.kill().unwrap();
        }
        let rest = self.rest.take().unwrap().join().unwrap();
        assert!(!hung, "the peer did not finish in time; it said: {rest}");
        assert!(self.child.wait().unwrap().success(), "the peer failed: {rest}");
        rest
    }
}

/// Checks the test runs in the VM, and shows the engine's log (the
/// connection's events) in the test's output.
fn in_the_vm() {
    assert_eq!(std::env::var("DAQIRI_VM").as_deref(), Ok("1"), "run inside tests/vm/run.sh");
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_rc_server_receives_every_send_of_a_pyverbs_peer_byte_exact() {
    in_the_vm();
    let local = SocketAddr::from((RXE_ADDR, 18_610));
    let config = TestConfig::roce_server(local)
        .master_core(0)
        .region("rx", 512, 4096)
        .rx_queue(rx(0, "rx").core(1).batch(16).timeout_us(2000))
        .validate()
        .unwrap();
    let engine = Engine::new(config).unwrap();
    let count = 300u32;
    let peer = python(&["tests/vm/rdma_send.py", "10.77.0.1", "18610", &count.to_string()]).spawn().unwrap();
    let seen = receive_messages(&engine, 0, count);
    let sent = peer.wait_with_output().unwrap();
    assert!(sent.status.success(), "the pyverbs peer failed: {sent:?}");
    assert_messages(&seen, count, none);
    let closed = Instant::now() + Duration::from_secs(10);
    while engine.stats().ports[0].link.connected != Some(false) && Instant::now() < closed {
        std::thread::sleep(Duration::from_millis(20));
    }
    let link = &engine.stats().ports[0].link;
    assert_eq!(link.connected, Some(false), "the peer disconnected and the server saw it: {link:?}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_rc_client_sends_every_tx_packet_to_a_pyverbs_server_byte_exact() {
    in_the_vm();
    let count = 300u32;
    let mut peer = python(&["tests/vm/rdma_recv.py", "10.77.0.1", "18620", &count.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut listening = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(peer.stdout.as_mut().unwrap()), &mut listening).unwrap();
    assert_eq!(listening.trim(), "listening");
    let config = TestConfig::roce_client(RXE_ADDR.into(), SocketAddr::from((RXE_ADDR, 18_620)))
        .master_core(0)
        .region("rx", 64, 4096)
        .region("tx", 64, 4096)
        .rx_queue(rx(0, "rx").core(1))
        .tx_queue(tx(0, "tx").core(1).batch(8))
        .validate()
        .unwrap();
    let engine = Engine::new(config).unwrap();
    send_messages(&engine, 0, count);
    let received = peer.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&received.stdout);
    assert!(received.status.success(), "the pyverbs server: {said} {received:?}");
    assert!(said.contains(&format!("received {count} messages")), "{said}");
    let port = &engine.stats().ports[0];
    assert_eq!(port.tx_queues[0].stats.packets, u64::from(count), "{port:?}");
}

/// tests/vm/rdma_target.py on `port` with `count` slots in `mode`, once
/// a client asked to connect: the peer, and where its memory is (address,
/// remote key).
fn rdma_target(port: u16, count: u32, mode: &str) -> (Peer, (u64, u32)) {
    let (port, count) = (port.to_string(), count.to_string());
    let (peer, line) = Peer::start(&["tests/vm/rdma_target.py", "10.77.0.1", &port, &count, mode]);
    let words: Vec<u64> = line.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect();
    let [base, rkey] = words[..] else { panic!("the peer said {line:?}") };
    (peer, (base, rkey as u32))
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_rc_client_writes_every_tx_packet_into_a_pyverbs_peers_memory_byte_exact() {
    in_the_vm();
    // Every third message carries an immediate (a WRITE with immediate); the last one does.
    let count = 302u32;
    // The client first: the peer registers its memory, and says where, once a connection asks.
    let config = TestConfig::roce_client(RXE_ADDR.into(), SocketAddr::from((RXE_ADDR, 18_621)))
        .master_core(0)
        .region("rx", 64, 4096)
        .region("tx", 64, 4096)
        .rx_queue(rx(0, "rx").core(1))
        .tx_queue(tx(0, "tx").core(1).batch(8));
    let engine = Engine::new(config.validate().unwrap()).unwrap();
    let (peer, (base, rkey)) = rdma_target(18_621, count, "write");
    send_messages_to(&engine, 0, count, Some(Remote::Write(base, rkey)));
    let rest = peer.finish(Instant::now() + Duration::from_secs(30));
    let port = &engine.stats().ports[0];
    assert!(rest.contains(&format!("checked {count} writes")), "{rest} {port:?}");
    assert_eq!(port.tx_queues[0].stats.packets, u64::from(count), "{port:?}");
    assert_eq!(port.tx_queues[0].stats.drops(DropReason::SendFailed), 0, "{port:?}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_rc_client_reads_a_pyverbs_peers_memory_onto_its_rx_queue_byte_exact() {
    in_the_vm();
    let count = 200u32;
    // One region for both queues: a READ's bytes arrive on RX queue 0 in the buffer they landed in.
    let config = TestConfig::roce_client(RXE_ADDR.into(), SocketAddr::from((RXE_ADDR, 18_622)))
        .master_core(0)
        .region("mem", 128, 4096)
        .rx_queue(rx(0, "mem").core(1).batch(8).timeout_us(1000))
        .tx_queue(tx(0, "mem").core(1).batch(8));
    let engine = Engine::new(config.validate().unwrap()).unwrap();
    let (mut peer, (base, rkey)) = rdma_target(18_622, count, "read");
    let (mut seen, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
    std::thread::scope(|scope| {
        scope.spawn(|| send_messages_to(&engine, 0, count, Some(Remote::Read(base, rkey))));
        while seen.len() < count as usize && Instant::now() < deadline {
            match engine.get_rx_burst(0, 0).unwrap() {
                Some(burst) => seen.extend(burst.packets().map(|p| (p.data().to_vec(), p.rdma_read_from()))),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    });
    assert_eq!(seen.len(), count as usize, "every READ's bytes arrive");
    for (k, (data, from)) in seen.iter().enumerate() {
        assert_eq!(*from, Some(base + k as u64 * SLOT), "READ {k} says where it read, in order");
        assert!(*data == message(k as u32), "READ {k} brought slot {k} byte-exact");
    }
    peer.say("done\n");
    assert!(peer.finish(Instant::now() + Duration::from_secs(10)).contains("served"));
    let port = &engine.stats().ports[0];
    assert_eq!(port.tx_queues[0].stats.drops(DropReason::SendFailed), 0, "{port:?}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_an_rdma_read_from_a_tx_queue_without_its_rx_queues_region_is_refused() {
    in_the_vm();
    // TX queue 0's region is not RX queue 0's; TX queue 1's is RX queue 1's.
    let config = TestConfig::roce_client(RXE_ADDR.into(), SocketAddr::from((RXE_ADDR, 18_623)))
        .region("rx", 8, 4096)
        .region("tx", 8, 4096)
        .rx_queue(rx(0, "rx").core(1))
        .rx_queue(rx(1, "tx").core(1))
        .tx_queue(tx(0, "tx").core(1))
        .tx_queue(tx(1, "tx").core(1));
    let engine = Engine::new(config.validate().unwrap()).unwrap();
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    let err = burst.packet_mut(0).set_rdma_read(0, 1, 64).expect_err("refused");
    assert_eq!(err.status, Status::NotSupported, "{err}");
    assert!(err.message.contains("that RX queue's region"), "{err}");
    let mut burst = engine.get_tx_packet_burst(0, 1, 1).unwrap();
    burst.packet_mut(0).set_rdma_read(0, 1, 64).expect("a READ from the TX queue sharing its RX queue's region");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_a_write_the_peer_refuses_is_counted_and_the_client_connects_again() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_633));
    let engine = server_and_client(server_addr, (64, 8)).unwrap();
    // The server registered nothing for remote write: the device refuses
    // the WRITE, and the client's queue pair goes to the error state.
    let mut burst = loop {
        if let Ok(burst) = engine.get_tx_packet_burst(1, 0, 1) {
            break burst;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut packet = burst.packet_mut(0);
    packet.write(b"refused").unwrap();
    packet.set_rdma_write(0x1000, 0xdead_beef).unwrap();
    engine.send_tx_burst(burst).map_err(|r| r.error).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let failed = || engine.stats().ports[1].tx_queues[0].stats.drops(DropReason::SendFailed);
    while failed() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(failed(), 1, "the refused WRITE is counted: {:?}", engine.stats().ports[1]);
    // The client connects again, and SENDs flow as before.
    let count = 50u32;
    let seen = std::thread::scope(|scope| {
        scope.spawn(|| send_messages(&engine, 1, count));
        receive_messages(&engine, 0, count)
    });
    assert_messages(&seen, count, immediate_of);
    assert_eq!(failed(), 1, "nothing else failed: {:?}", engine.stats().ports[1]);
    // What a program waiting on its requests reads (libdaqiri's rdma_*
    // calls): every work request finished, the one refused among them
    // failed, on a second connection.
    let deadline = Instant::now() + Duration::from_secs(30);
    let connection = || engine.rdma_connection(1, 0).unwrap();
    while connection().finished < u64::from(count) + 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let now = connection();
    assert_eq!((now.finished, now.failed), (u64::from(count) + 1, 1), "{now:?}");
    assert!(now.connected && now.established >= 2, "connected again: {now:?}");
    assert_eq!(engine.rdma_connection(1, 1).unwrap_err().status, Status::InvalidParameter);
}

/// The client (port 1) sends `count` messages to the server (port 0),
/// then the server as many back: each side gets all, byte-exact, in
/// order, and both stay connected.
fn exchange_both_ways(engine: &Engine, count: u32) {
    for (from, to) in [(1, 0), (0, 1)] {
        let seen = std::thread::scope(|scope| {
            scope.spawn(|| send_messages(engine, from, count));
            receive_messages(engine, to, count)
        });
        assert_messages(&seen, count, immediate_of);
    }
    for port in &engine.stats().ports {
        assert_eq!(port.link.connected, Some(true), "{port:?}");
    }
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_client_and_server_in_one_engine_exchange_messages_both_ways() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_630));
    let engine = server_and_client(server_addr, (128, 128)).unwrap();
    // More messages than either receiver has buffers: a receiver short of
    // buffers holds its sender back (RNR), so each side reads as the other
    // sends. The client's first bursts wait in its ring for the connection.
    let count = 500u32;
    exchange_both_ways(&engine, count);
}

/// Which of the runs of `count` messages starting at `firsts` `seen` is:
/// asserts it is one of them whole, byte-exact and in order.
fn run_of(seen: &[(Vec<u8>, Option<u32>)], count: u32, firsts: &[u32]) -> u32 {
    let first = *firsts
        .iter()
        .find(|&&first| seen.first().is_some_and(|(data, _)| data == &message(first)))
        .unwrap_or_else(|| panic!("{} messages, none a run's first", seen.len()));
    assert_eq!(seen.len(), count as usize, "every message of run {first} arrives");
    for (k, (data, _)) in (first..).zip(seen) {
        assert_eq!(data, &message(k), "message {k} arrives whole, in order, on its peer's queue");
    }
    first
}

/// [`receive_on`] of RX queues 0 and 1 of `port` at once.
fn receive_on_both(engine: &Engine, port: u16, count: u32) -> Vec<Vec<(Vec<u8>, Option<u32>)>> {
    std::thread::scope(|scope| {
        let queues: Vec<_> = (0..2).map(|q| scope.spawn(move || receive_on(engine, (port, q), count))).collect();
        queues.into_iter().map(|queue| queue.join().unwrap()).collect()
    })
}

/// Each RX queue of port 0's worker: on the core its queue names, a
/// thread of its own.
fn assert_a_worker_per_queue(engine: &Engine, cores: &[u32]) {
    let workers: Vec<_> =
        engine.stats().ports[0].rx_queues.iter().map(|q| q.worker.clone().expect("a worker per queue")).collect();
    assert_ne!(workers[0].tid, workers[1].tid, "a thread per queue: {workers:?}");
    for (worker, core) in workers.iter().zip(cores) {
        assert_eq!(worker.core, Some(*core), "{worker:?}");
    }
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_a_server_gives_each_pyverbs_peer_a_queue_of_its_own_on_its_core() {
    in_the_vm();
    let local = SocketAddr::from((RXE_ADDR, 18_640));
    let config = TestConfig::roce_server(local)
        .master_core(0)
        .region("rx", 512, 4096)
        .rx_queue(rx(0, "rx").core(1).batch(16).timeout_us(2000))
        .rx_queue(rx(1, "rx").core(0).batch(16).timeout_us(2000))
        .validate()
        .unwrap();
    let engine = Engine::new(config).unwrap();
    assert_a_worker_per_queue(&engine, &[1, 0]);
    let (count, firsts) = (200u32, [0u32, 1000]);
    // Both peers connect, then send: each holds a queue meanwhile.
    let mut peers: Vec<Peer> = firsts
        .iter()
        .map(|first| {
            let args =
                ["tests/vm/rdma_send.py", "--hold", "10.77.0.1", "18640", &count.to_string(), &first.to_string()];
            let (peer, said) = Peer::start(&args);
            assert_eq!(said.trim(), "connected");
            peer
        })
        .collect();
    let both = Instant::now() + Duration::from_secs(10);
    let connected = || engine.stats().ports[0].link.connections.iter().filter(|c| c.connected).count();
    while connected() < 2 && Instant::now() < both {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(connected(), 2, "a connection per queue: {:?}", engine.stats().ports[0].link);
    for peer in &mut peers {
        peer.say("go\n");
    }
    let runs: Vec<u32> = receive_on_both(&engine, 0, count).iter().map(|seen| run_of(seen, count, &firsts)).collect();
    for peer in peers {
        peer.finish(Instant::now() + Duration::from_secs(30));
    }
    assert_ne!(runs[0], runs[1], "each peer had a queue of its own: {runs:?}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_a_client_connects_each_queue_and_each_tx_queue_sends_on_its_rx_queues_connection() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_641));
    let two_queues = |config: TestConfig, name: &str| {
        let (rx_region, tx_region) = (format!("{name}_rx"), format!("{name}_tx"));
        config
            .region(&rx_region, 128, 4096)
            .region(&tx_region, 64, 4096)
            .rx_queue(rx(0, &rx_region).core(1).batch(8).timeout_us(1000))
            .rx_queue(rx(1, &rx_region).core(0).batch(8).timeout_us(1000))
            .tx_queue(tx(0, &tx_region).core(1).batch(8))
            .tx_queue(tx(1, &tx_region).core(0).batch(8))
    };
    let config = two_queues(TestConfig::roce_server(server_addr).master_core(0), "server")
        .and(two_queues(TestConfig::roce_client(RXE_ADDR.into(), server_addr), "client"));
    let engine = Engine::new(config.validate().unwrap()).unwrap();
    assert_a_worker_per_queue(&engine, &[1, 0]);
    let (count, firsts) = (150u32, [0u32, 1000]);
    // Client TX queue j sends run j; each server queue receives one run.
    let server_runs: Vec<u32> = std::thread::scope(|scope| {
        for (queue, first) in [(0, firsts[0]), (1, firsts[1])] {
            let engine = &engine;
            scope.spawn(move || send_range(engine, (1, queue), first..first + count, None));
        }
        receive_on_both(&engine, 0, count).iter().map(|seen| run_of(seen, count, &firsts)).collect()
    });
    assert_ne!(server_runs[0], server_runs[1], "each client queue has a server queue of its own: {server_runs:?}");
    // Server TX queue j answers on its RX queue's connection: the reply
    // reaches the client queue whose run server queue j received.
    let replies = [5000u32, 6000];
    let client_runs: Vec<u32> = std::thread::scope(|scope| {
        for (queue, first) in [(0, replies[0]), (1, replies[1])] {
            let engine = &engine;
            scope.spawn(move || send_range(engine, (0, queue), first..first + count, None));
        }
        receive_on_both(&engine, 1, count).iter().map(|seen| run_of(seen, count, &replies)).collect()
    });
    for (server_queue, run) in server_runs.iter().enumerate() {
        let client_queue = firsts.iter().position(|f| f == run).unwrap();
        assert_eq!(
            client_runs[client_queue], replies[server_queue],
            "server queue {server_queue} answered its own peer"
        );
    }
    let link = &engine.stats().ports[0].link;
    assert_eq!(link.connections.iter().filter(|c| c.connected).count(), 2, "{link:?}");
    // Every server queue has its peer: a third connection is refused, and
    // the two carry on.
    let third = TestConfig::roce_client(RXE_ADDR.into(), server_addr)
        .master_core(0)
        .region("third", 8, 4096)
        .rx_queue(rx(0, "third").core(1));
    let third = Engine::new(third.validate().unwrap()).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(third.stats().ports[0].link.connected, Some(false), "no queue was free for it");
    let peer_of_client_queue_0 = server_runs.iter().position(|r| *r == firsts[0]).unwrap() as u16;
    let again = std::thread::scope(|scope| {
        scope.spawn(|| send_range(&engine, (1, 0), 0..count, None));
        receive_on(&engine, (0, peer_of_client_queue_0), count)
    });
    run_of(&again, count, &[0]);
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_uc_client_and_server_connect_through_rdma_cm_and_exchange_messages_both_ways() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_631));
    // UC has no RNR: a message that finds no receive posted is lost, so
    // each receiver has a buffer posted for every message.
    let count = 500u32;
    let engine = over_uc(server_and_client_config(server_addr, (count + 12, count + 12)));
    exchange_both_ways(&engine, count);
    for port in &engine.stats().ports {
        assert!(port.rx_queues[0].stats.drops.iter().all(|&d| d == 0), "nothing dropped: {port:?}");
    }
    // The queue pairs rdma_cm connected are UC ones.
    let shown = Command::new("rdma").args(["resource", "show", "qp"]).output().unwrap();
    let qps = String::from_utf8_lossy(&shown.stdout);
    // `pid` there is the creating thread's; the kernel's own (GSI) has none.
    let ours: Vec<&str> = qps.lines().filter(|l| l.contains(" pid ") && !l.contains("type GSI")).collect();
    assert!(ours.len() >= 2 && ours.iter().all(|l| l.contains("type UC")), "{qps}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_a_uc_receiver_whose_reader_stops_drops_at_its_ring_and_counts_it() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_632));
    // Rings of 8 bursts; nobody reads while 200 messages come.
    let engine = over_uc(server_and_client_config(server_addr, (256, 8)).rx_meta_buffers(8));
    let count = 200u32;
    send_messages(&engine, 1, count);
    let accounted = || {
        let server = engine.stats().ports[0].clone();
        let queue = &server.rx_queues[0].stats;
        let full = queue.drops(DropReason::RingFull) + queue.drops(DropReason::NoFreeBurstBuffers);
        (queue.packets, full, server)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while accounted().0 + accounted().1 < u64::from(count) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (delivered, full, server) = accounted();
    assert!(full > 0, "a full ring drops, counted: {server:?}");
    assert_eq!(delivered + full, u64::from(count), "every message delivered or counted dropped: {server:?}");
}

/// Bench message `k` of `length` bytes.
fn bench_message(k: u32, length: usize) -> Vec<u8> {
    (0..length).map(|i| ((k as usize * 7 + i) % 253) as u8).collect()
}

/// Sends `count` bench messages of `length` bytes from TX queue 0 of `port`,
/// one per burst as the bench's `batch_size: 1` says.
fn send_bench_messages(engine: &Engine, port: u16, count: u32, length: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    for k in 0..count {
        let mut burst = loop {
            assert!(Instant::now() < deadline, "message {k} not sent in two minutes");
            match engine.get_tx_packet_burst(port, 0, 1) {
                Ok(burst) => break burst,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        burst.packet_mut(0).write(&bench_message(k, length)).unwrap();
        while let Err(refused) = engine.send_tx_burst(burst) {
            burst = refused.burst;
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// DAQIRI's own `daqiri_bench_rdma_tx_rx.yaml`, as published but for what
/// this VM lacks: its addresses (the bench sections' too) become the
/// soft-RoCE device's, `host_pinned` (which needs a GPU driver) becomes
/// `host`, and each region holds 2 buffers rather than 20 (the VM has 4 GiB;
/// the client's are 90 MB each). Its queues name no regions and its client
/// no server: both come from the bench's naming and `rdma_bench_client`.
/// The bench's 8,000,000-byte messages go both ways byte-exact.
#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_daqiri_rdma_bench_config_runs_with_its_addresses_changed() {
    in_the_vm();
    let published = include_str!("../../config/tests/data/upstream/daqiri_bench_rdma_tx_rx.yaml");
    let text = published.replace("10.100.1.1", "10.77.0.1").replace("10.100.3.1", "10.77.0.1");
    let mut doc = daqiri_config::Document::parse(&text).unwrap();
    for region in &mut doc.config.memory_regions {
        region.kind = daqiri_config::model::MemoryKind::Host;
        region.num_bufs = 2;
    }
    let length = doc.sections["rdma_bench_client"]["message_size"].as_u64().unwrap() as usize;
    // Written for a host with cores 3 to 10.
    daqiri::preflight::allow_unpinned_cores(true);
    let engine = Engine::new(doc.validate().unwrap()).unwrap();
    let (client, server) = (engine.get_port_id("my_client").unwrap(), engine.get_port_id("my_server").unwrap());
    let count = 3;
    for (from, to) in [(client, server), (server, client)] {
        let seen = std::thread::scope(|scope| {
            scope.spawn(|| send_bench_messages(&engine, from, count, length));
            let (mut seen, deadline) = (0, Instant::now() + Duration::from_secs(120));
            while seen < count && Instant::now() < deadline {
                let Some(burst) = engine.get_rx_burst(to, 0).unwrap() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                for packet in burst.packets() {
                    assert!(packet.data() == bench_message(seen, length), "message {seen} from port {from} byte-exact");
                    seen += 1;
                }
            }
            seen
        });
        assert_eq!(seen, count, "every message from port {from}: {:?}", engine.stats().ports);
    }
}

/// This process's threads' ids: the kernel files an RDMA object under the
/// thread that made it (a worker's, here).
fn our_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|t| t.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Each kind of RDMA object `rdma resource show` lists, and the key of its
/// number in a line.
const RDMA_OBJECTS: [(&str, &str); 5] =
    [("qp", "lqpn"), ("cq", "cqn"), ("mr", "mrn"), ("pd", "pdn"), ("cm_id", "cm-idn")];

/// Every line of `rdma resource show` for queue pairs, completion queues,
/// memory registrations, protection domains and CM ids, whoever made them,
/// each led by its kind and its number ("qp lqpn 17").
fn rdma_resources() -> Vec<(String, String)> {
    RDMA_OBJECTS
        .into_iter()
        .flat_map(|(kind, key)| {
            let shown = Command::new("rdma").args(["resource", "show", kind]).output().unwrap();
            assert!(shown.status.success(), "rdma resource show {kind}: {shown:?}");
            String::from_utf8_lossy(&shown.stdout)
                .lines()
                .filter_map(|line| {
                    let words: Vec<&str> = line.split_whitespace().collect();
                    let number = words.windows(2).find(|w| w[0] == key)?[1];
                    // The device too: numbers are per device.
                    let device = words.windows(2).find(|w| w[0] == "dev" || w[0] == "link")?[1];
                    Some((format!("{kind} {device} {key} {number}"), line.to_owned()))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// [`rdma_resources`] made by `threads` (a thread's objects carry its id
/// while it lives; once it exits they show none, so a leak is found by
/// number, not by thread).
fn rdma_resources_of(threads: &[String]) -> Vec<(String, String)> {
    let pids: Vec<String> = threads.iter().map(|tid| format!("pid {tid} ")).collect();
    rdma_resources().into_iter().filter(|(_, line)| pids.iter().any(|pid| line.contains(pid.as_str()))).collect()
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_shutdown_leaves_no_queue_pair_registration_or_cm_id_behind() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_640));
    // Beside the server and its client, an ingest port (its queue pair set
    // up by hand, not through rdma_cm), whose sender never comes.
    let config = server_and_client_config(server_addr, (64, 64)).and(ingest(1, TransportMode::Uc, (16, 4096)));
    let engine = Engine::new(config.validate().unwrap()).unwrap();
    assert_eq!(engine.stats().ports.len(), 3, "server, client and ingest ports run");
    let count = 40;
    std::thread::scope(|scope| {
        scope.spawn(|| send_messages(&engine, 1, count));
        assert_messages(&receive_messages(&engine, 0, count), count, immediate_of);
    });
    let held = rdma_resources_of(&our_threads());
    for (kind, _) in RDMA_OBJECTS {
        assert!(
            held.iter().any(|(id, _)| id.starts_with(&format!("{kind} "))),
            "a running port holds a {kind} {held:#?}"
        );
    }
    let queue_pairs = held.iter().filter(|(id, _)| id.starts_with("qp ")).count();
    assert!(queue_pairs >= 3, "the server's connection, the client and the ingest port each hold one: {held:#?}");
    drop(engine);
    // By number, whoever the kernel now says holds it: the worker threads
    // that made them are gone.
    let now = rdma_resources();
    let left: Vec<_> = now.iter().filter(|(id, _)| held.iter().any(|(h, _)| h == id)).collect();
    assert!(left.is_empty(), "left behind after shutdown: {left:#?}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_a_client_whose_server_is_away_keeps_trying_and_the_other_ports_keep_serving() {
    in_the_vm();
    // Port 0 receives from a pyverbs peer; port 1 is a client of a port nobody listens on.
    let config = TestConfig::roce_server(SocketAddr::from((RXE_ADDR, 18_650)))
        .master_core(0)
        .region("rx", 64, 4096)
        .rx_queue(rx(0, "rx").core(1))
        .and(
            TestConfig::roce_client(RXE_ADDR.into(), SocketAddr::from((RXE_ADDR, 18_659)))
                .region("client_rx", 8, 4096)
                .rx_queue(rx(0, "client_rx").core(1)),
        )
        .validate()
        .unwrap();
    let engine = Engine::new(config).unwrap();
    let count = 100u32;
    let peer = python(&["tests/vm/rdma_send.py", "10.77.0.1", "18650", &count.to_string()]).spawn().unwrap();
    let seen = receive_messages(&engine, 0, count);
    assert!(peer.wait_with_output().unwrap().status.success());
    assert_messages(&seen, count, none);
    let client = &engine.stats().ports[1];
    assert_eq!(client.link.connected, Some(false), "nobody listens there: {client:?}");
    assert_eq!(client.rx_port_drops.packets, 0);
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_a_reader_that_stops_holds_the_sender_back_and_loses_nothing() {
    in_the_vm();
    let server_addr = SocketAddr::from((RXE_ADDR, 18_660));
    // The server's whole region is 32 buffers: far fewer than the messages.
    let engine = server_and_client(server_addr, (32, 8)).unwrap();
    let count = 200u32;
    let seen = std::thread::scope(|scope| {
        scope.spawn(|| send_messages(&engine, 1, count));
        // Nobody reads for two seconds: the server's buffers all wait in its ring.
        std::thread::sleep(Duration::from_secs(2));
        receive_messages(&engine, 0, count)
    });
    assert_messages(&seen, count, immediate_of);
    let server = &engine.stats().ports[0];
    assert!(server.rx_queues[0].stats.drops.iter().all(|&d| d == 0), "nothing dropped: {server:?}");
}

/// Bytes of frame `n`'s metadata record and data, as
/// tests/vm/sensor_emulator.py writes them.
const METADATA: usize = 128;

fn sensor_frame(n: u32, length: usize) -> Vec<u8> {
    (0..length).map(|i| ((n as usize * 31 + i) % 251) as u8).collect()
}

fn sensor_metadata(n: u32, length: usize) -> Vec<u8> {
    let mut record = n.to_be_bytes().to_vec();
    record.extend((length as u32).to_be_bytes());
    record.extend(b"daqiri-sensor-emulator");
    record.resize(METADATA, 0);
    record
}

/// An ingest port on the soft-RoCE address whose ring (`pages` pages of
/// `page_size`) the queue pair `peer_qpn` there writes over `transport`.
fn ingest(peer_qpn: u32, transport: TransportMode, (pages, page_size): (u32, u64)) -> TestConfig {
    let mut config = TestConfig::roce_ingest(RXE_ADDR.into(), (RXE_ADDR.into(), peer_qpn), transport)
        .master_core(0)
        .region("ring", pages, page_size)
        .rx_queue(rx(0, "ring").core(1).batch(4).timeout_us(2000));
    config.model_mut().memory_regions[0].access = vec![MemoryAccess::Local, MemoryAccess::RdmaWrite];
    config
}

/// What the emulated sensor leaves out or gets wrong (the options of
/// tests/vm/sensor_emulator.py).
#[derive(Default)]
struct Faults {
    /// Frames never sent, as if lost on the wire.
    withheld: &'static [u32],
    /// Frames written just past the ring's end.
    outside: &'static [u32],
    /// The first frames, sent to a queue pair nobody has.
    misaddressed: u32,
    /// The first frames, sent from a PSN the receiver does not expect.
    wrong_psn: u32,
}

impl Faults {
    fn args(&self) -> Vec<String> {
        let list = |frames: &[u32]| frames.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let mut args = vec![if self.withheld.is_empty() { "-".into() } else { list(self.withheld) }];
        if !self.outside.is_empty() {
            args.extend(["--outside".into(), list(self.outside)]);
        }
        args.extend(["--misaddressed".into(), self.misaddressed.to_string()]);
        args.extend(["--wrong-psn".into(), self.wrong_psn.to_string()]);
        args
    }

    /// The frames of `0..frames` that reach the ring.
    fn arriving(&self, frames: u32) -> Vec<u32> {
        let first = self.misaddressed.max(self.wrong_psn);
        (first..frames).filter(|n| !self.withheld.contains(n) && !self.outside.contains(n)).collect()
    }
}

/// What an ingest port took from the emulated sensor.
struct Ingested {
    engine: Engine,
    /// The frames delivered, in order (each checked byte-exact).
    seen: Vec<u32>,
    /// What the sensor printed after its queue pair number.
    said: String,
}

/// The emulated sensor sends `frames` frames over `transport` with
/// `faults`; the ingest port delivers each that reached the ring as its
/// page, byte-exact, in order, with its immediate.
fn ingest_from_an_emulated_sensor(transport: TransportMode, frames: u32, faults: &Faults) -> Ingested {
    in_the_vm();
    let kind = if transport == TransportMode::Uc { "UC" } else { "RC" };
    let mut args = vec!["tests/vm/sensor_emulator.py".to_owned(), "rxe0".into(), "10.77.0.1".into(), kind.into()];
    args.push(frames.to_string());
    args.extend(faults.args());
    let (mut sensor, line) = Peer::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let peer_qpn: u32 = line.trim().strip_prefix("qpn ").and_then(|n| n.parse().ok()).expect(&line);
    let page_size = 8192u64;
    let engine = Engine::new(ingest(peer_qpn, transport, (64, page_size)).validate().unwrap()).unwrap();
    // What a control plane programs the sensor with, from the status.
    let link = engine.stats().ports[0].link.clone();
    let roce = link.roce.as_ref().expect("a RoCE link");
    let ring = roce.ingest.as_ref().expect("an ingest ring");
    assert_eq!((roce.device.as_str(), ring.base, ring.page_size, ring.pages), ("rxe0", 0, page_size, 64), "{roce:?}");
    assert_eq!(ring.transport, kind);
    let programme = format!("qpn {} rkey {} page_size {} pages {}\n", ring.qpn, ring.rkey, ring.page_size, ring.pages);
    sensor.say(&programme);

    let expected = faults.arriving(frames);
    let (mut seen, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
    let data = page_size as usize - METADATA;
    while seen.len() < expected.len() && Instant::now() < deadline {
        let Some(burst) = engine.get_rx_burst(0, 0).unwrap() else {
            if sensor.failed() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        for packet in burst.packets() {
            let n = packet.immediate().expect("every frame carries its sequence number");
            let page = packet.data();
            assert_eq!(page.len(), page_size as usize, "frame {n} is its whole page");
            assert!(page[..data] == sensor_frame(n, data)[..], "frame {n}'s data arrives byte exact");
            assert_eq!(page[data..], sensor_metadata(n, data)[..], "frame {n}'s metadata");
            seen.push(n);
        }
    }
    let rest = sensor.finish(deadline);
    assert!(rest.contains(&format!("sent {} frames", expected.len())), "{rest}");
    assert_eq!(seen, expected, "every frame that reached the ring arrives, in order");
    let port = &engine.stats().ports[0];
    assert_eq!(port.rx_port_drops.drops(DropReason::NoFreePacketBuffers), 0, "no page overwritten while held");
    Ingested { engine, seen, said: rest }
}

/// The ingest port's counters after `ingested`: frames counted lost, and
/// how often its queue pair was brought back.
fn lost_and_recoveries(ingested: &Ingested) -> (u64, Option<u64>) {
    let port = &ingested.engine.stats().ports[0];
    (port.rx_port_drops.drops(DropReason::SequenceGap), port.link.recoveries)
}

fn withheld_frames_are_counted_lost(transport: TransportMode) {
    let faults = Faults { withheld: &[7, 8, 50], ..Faults::default() };
    let ingested = ingest_from_an_emulated_sensor(transport, 120, &faults);
    assert_eq!(lost_and_recoveries(&ingested), (3, Some(0)), "the withheld frames are counted lost");
    let port = &ingested.engine.stats().ports[0];
    let counters: Vec<&str> = port.link.nic_counters.iter().map(|(name, _)| name.as_str()).collect();
    assert!(counters.contains(&"rcvd_pkts"), "the device's hw_counters are shown: {counters:?}");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_ingest_delivers_an_emulated_uc_sensors_frames_byte_exact_and_counts_the_withheld() {
    withheld_frames_are_counted_lost(TransportMode::Uc);
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_ingest_delivers_an_emulated_rc_senders_frames_byte_exact_and_counts_the_withheld() {
    withheld_frames_are_counted_lost(TransportMode::Rc);
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_ingest_over_rc_brings_its_queue_pair_back_after_a_write_outside_the_ring() {
    let ingested =
        ingest_from_an_emulated_sensor(TransportMode::Rc, 40, &Faults { outside: &[10], ..Faults::default() });
    assert!(ingested.said.contains("error frame 10:"), "the device refused the sender's write: {}", ingested.said);
    assert_eq!(lost_and_recoveries(&ingested), (1, Some(1)), "frame 10 lost and counted, the queue pair back once");
    let link = &ingested.engine.stats().ports[0].link;
    let why = link.last_error.as_deref().unwrap_or_default();
    assert!(why.contains("error state"), "the status says why: {link:?}");
    assert_eq!(link.down, None, "the port is up: {link:?}");
    assert!(ingested.seen.ends_with(&[39]), "frames after the error arrive");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_ingest_over_uc_loses_only_the_frame_written_outside_the_ring() {
    let ingested =
        ingest_from_an_emulated_sensor(TransportMode::Uc, 40, &Faults { outside: &[10], ..Faults::default() });
    assert_eq!(lost_and_recoveries(&ingested), (1, Some(0)), "frame 10 lost and counted; UC drops only the message");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_ingest_takes_nothing_from_a_misaddressed_sender_and_serves_it_once_programmed_right() {
    let ingested =
        ingest_from_an_emulated_sensor(TransportMode::Uc, 40, &Faults { misaddressed: 3, ..Faults::default() });
    assert_eq!(lost_and_recoveries(&ingested), (0, Some(0)), "nothing of the misaddressed frames, nothing broken");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_ingest_over_rc_counts_a_sender_with_the_wrong_psn_and_serves_it_once_programmed_right() {
    let ingested = ingest_from_an_emulated_sensor(TransportMode::Rc, 40, &Faults { wrong_psn: 2, ..Faults::default() });
    assert!(ingested.said.contains("error frame 0:"), "the sender gave up on its frames: {}", ingested.said);
    assert_eq!(lost_and_recoveries(&ingested), (0, Some(0)), "the receiver's queue pair stayed up");
    let port = &ingested.engine.stats().ports[0];
    let out_of_sequence = port.link.nic_counters.iter().find(|(name, _)| name == "out_of_seq_request");
    assert!(out_of_sequence.is_some_and(|(_, n)| *n > 0), "the device counted them out of sequence: {:?}", port.link);
}

#[test]
fn an_ingest_ring_shared_with_another_queue_or_closed_to_writes_is_refused_by_path() {
    let mut config = ingest(1, TransportMode::Uc, (64, 8192)).and(
        TestConfig::roce_server(SocketAddr::from((RXE_ADDR, 18_613)))
            .rx_queue(rx(0, "ring").core(1))
            .interface_named("server"),
    );
    config.model_mut().memory_regions[0].access = vec![MemoryAccess::Local];
    let err = Engine::from_yaml(&config.yaml()).expect_err("refused");
    assert_eq!(err.status, Status::NotSupported, "{err}");
    for path in ["daqiri.cfg.interfaces[0].rx.queues[0].memory_regions", "daqiri.cfg.memory_regions[0].access"] {
        assert!(err.message.contains(path), "names {path}: {err}");
    }
    assert!(err.message.contains("rx queue \"q0\" of \"server\""), "names the other queue: {err}");
}
