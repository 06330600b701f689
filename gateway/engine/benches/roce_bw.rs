//! Throughput of the RoCE backend as perftest measures its own: a SEND
//! stream between a client and a server port of one engine (against
//! `ib_send_bw`), or a stream of RDMA WRITEs from a client into a peer's
//! registered memory (against `ib_write_bw`). `tests/bench/roce_vm.sh`
//! runs both beside perftest on the same soft-RoCE link and prints the
//! ratios (software emulation measures the two against each other,
//! nothing absolute). Inside the VM test bed:
//!   roce_bw send ADDR PORT MESSAGES SIZE
//!   roce_bw write ADDR PORT MESSAGES SIZE SLOTS < peer's announcement
//! (write: into the peer listening on PORT, which announces on our input
//! `target BASE RKEY` once we asked to connect, at BASE + (k % SLOTS) x
//! SIZE under RKEY). Prints one JSON line: messages, bytes, seconds (send: first
//! to last message received; write: first posted to last completed), MB/s
//! (10^6 bytes a second, as perftest counts). The application's threads
//! sleep `IDLE` whenever they find nothing to do, as DAQIRI's
//! `daqiri_bench_rdma` does: soft-RoCE's work is the kernel's, on the same
//! CPUs, and an application spinning on an empty queue takes them from it.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use daqiri::Engine;
use daqiri_config::testing::{TestConfig, rx, tx};

/// Messages a TX burst carries.
const BURST: usize = 32;

/// The cores of each side, its queues and its application thread, as
/// DAQIRI's `daqiri_bench_rdma` example places them (client 1, server 0).
const CLIENT_CORE: u32 = 1;
const SERVER_CORE: u32 = 0;

/// Pins the calling thread to `core`, where this machine has it.
fn pin(core: u32) {
    core_affinity::set_for_current(core_affinity::CoreId { id: core as usize });
}

/// How long an application thread that found nothing to do waits.
const IDLE: Duration = Duration::from_micros(100);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let number = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| usage()) };
    let ip: IpAddr = args.get(1).and_then(|a| a.parse().ok()).unwrap_or_else(|| usage());
    let peer = SocketAddr::new(ip, number(2) as u16);
    let (messages, size) = (number(3), number(4) as usize);
    let (bytes, seconds) = match args.first().map(String::as_str) {
        Some("send") => send(ip, peer, messages, size),
        Some("write") => write(ip, peer, (messages, size), number(5)),
        _ => usage(),
    };
    println!(
        "{{\"messages\":{messages},\"bytes\":{bytes},\"seconds\":{seconds:.3},\"mb_per_s\":{:.2}}}",
        bytes as f64 / seconds / 1e6
    );
}

fn usage() -> ! {
    eprintln!("usage: roce_bw send ADDR PORT MESSAGES SIZE | roce_bw write ADDR PORT MESSAGES SIZE SLOTS");
    std::process::exit(2)
}

/// A client port on `ip` connecting to `peer`, sending from 512 buffers of `size`.
fn client(ip: IpAddr, peer: SocketAddr, size: usize) -> TestConfig {
    TestConfig::roce_client(ip, peer)
        .master_core(0)
        .region("client_rx", 8, size as u64)
        .region("client_tx", 512, size as u64)
        .rx_queue(rx(0, "client_rx").core(CLIENT_CORE))
        .tx_queue(tx(0, "client_tx").core(CLIENT_CORE).batch(BURST as u32))
}

/// Sends `messages` messages of `size` bytes from TX queue 0 of `port`, each
/// as its buffer stands (as perftest sends its buffer: the transport is
/// measured, not the application's writes), made a WRITE by `remote`.
fn stream(engine: &Engine, port: u16, (messages, size): (u64, usize), remote: impl Fn(u64) -> Option<(u64, u32)>) {
    let mut sent = 0u64;
    while sent < messages {
        let n = (messages - sent).min(BURST as u64) as usize;
        let Ok(mut burst) = engine.get_tx_packet_burst(port, 0, n) else {
            std::thread::sleep(IDLE);
            continue;
        };
        for i in 0..n {
            let mut packet = burst.packet_mut(i);
            packet.set_lengths(&[size]).expect("a buffer of the message's size");
            if let Some((addr, rkey)) = remote(sent + i as u64) {
                packet.set_rdma_write(addr, rkey).expect("a RoCE TX queue");
            }
        }
        let mut pending = burst;
        while let Err(refused) = engine.send_tx_burst(pending) {
            pending = refused.burst;
            std::thread::sleep(IDLE);
        }
        sent += n as u64;
    }
}

/// A SEND stream from a client to a server port of one engine: bytes received, seconds.
fn send(ip: IpAddr, server: SocketAddr, messages: u64, size: usize) -> (u64, f64) {
    let config = TestConfig::roce_server(server)
        .master_core(0)
        .region("server_rx", 512, size as u64)
        .rx_queue(rx(0, "server_rx").core(SERVER_CORE).batch(32).timeout_us(1000))
        .and(client(ip, server, size));
    let engine = Engine::new(config.validate().expect("a valid config")).expect("the engine starts");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            pin(CLIENT_CORE);
            stream(&engine, 1, (messages, size), |_| None)
        });
        pin(SERVER_CORE);
        let (mut received, mut bytes, mut first) = (0u64, 0u64, None);
        let deadline = Instant::now() + Duration::from_secs(600);
        while received < messages && Instant::now() < deadline {
            match engine.get_rx_burst(0, 0).expect("port 0 queue 0") {
                Some(burst) => {
                    first.get_or_insert_with(Instant::now);
                    received += burst.num_packets() as u64;
                    bytes += burst.total_bytes();
                }
                None => std::thread::sleep(IDLE),
            }
        }
        (bytes, first.map_or(0.0, |f| f.elapsed().as_secs_f64()))
    })
}

/// A stream of WRITEs into the peer's memory: bytes written, seconds until
/// every WRITE completed (every TX buffer back in its pool).
fn write(ip: IpAddr, peer: SocketAddr, (messages, size): (u64, usize), slots: u64) -> (u64, f64) {
    let engine = Engine::new(client(ip, peer, size).validate().expect("a valid config")).expect("the engine starts");
    // The peer registers its memory once we asked to connect, and says where.
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("the peer's announcement");
    let words: Vec<u64> = line.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect();
    let [base, rkey] = words[..] else { panic!("the peer said {line:?}, not `target BASE RKEY`") };
    let rkey = rkey as u32;
    let connected = Instant::now() + Duration::from_secs(60);
    while engine.stats().ports[0].link.connected != Some(true) {
        assert!(Instant::now() < connected, "the peer accepts");
        std::thread::sleep(Duration::from_millis(10));
    }
    let start = Instant::now();
    stream(&engine, 0, (messages, size), |k| Some((base + (k % slots) * size as u64, rkey)));
    let idle = || engine.stats().regions.iter().find(|r| r.name == "client_tx").is_some_and(|r| r.in_use == 0);
    let deadline = Instant::now() + Duration::from_secs(600);
    while !idle() {
        assert!(Instant::now() < deadline, "every WRITE completes");
        std::thread::sleep(Duration::from_micros(200));
    }
    (messages * size as u64, start.elapsed().as_secs_f64())
}
