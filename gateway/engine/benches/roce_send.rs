//! SEND throughput of the RoCE backend between a client and a server port
//! of one engine, as `ib_send_bw` measures a SEND stream between its own
//! client and server: `tests/bench/roce_vm.sh` runs both on the same
//! soft-RoCE link and prints their ratio (software emulation measures the
//! two against each other, nothing absolute). Run inside the VM test bed:
//!   roce_send ADDR PORT MESSAGES SIZE
//! prints one JSON line: messages, bytes, seconds (first to last message
//! received), MB/s (10^6 bytes a second, as perftest counts).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use daqiri::Engine;
use daqiri_config::testing::{TestConfig, rx, tx};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let [addr, port, messages, size] = &args[..] else {
        eprintln!("usage: roce_send ADDR PORT MESSAGES SIZE");
        std::process::exit(2);
    };
    let (ip, port): (IpAddr, u16) = (addr.parse().expect("an address"), port.parse().expect("a port"));
    let (messages, size): (u64, usize) = (messages.parse().expect("a count"), size.parse().expect("a size"));
    let server = SocketAddr::new(ip, port);
    let config = TestConfig::roce_server(server)
        .master_core(0)
        .region("server_rx", 512, size as u64)
        .rx_queue(rx(0, "server_rx").core(1).batch(32).timeout_us(1000))
        .and(
            TestConfig::roce_client(ip, server)
                .region("client_rx", 8, size as u64)
                .region("client_tx", 512, size as u64)
                .rx_queue(rx(0, "client_rx").core(1))
                .tx_queue(tx(0, "client_tx").core(0).batch(32)),
        );
    let engine = Engine::new(config.validate().expect("a valid config")).expect("the engine starts");
    let (sent, received) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let mut sent = 0u64;
            while sent < messages {
                let n = (messages - sent).min(32) as usize;
                let Ok(mut burst) = engine.get_tx_packet_burst(1, 0, n) else {
                    std::thread::yield_now();
                    continue;
                };
                // Sent as the buffer stands, as ib_send_bw sends its buffer:
                // the transport is measured, not the application's writes.
                for i in 0..n {
                    burst.packet_mut(i).set_lengths(&[size]).expect("a buffer of the message's size");
                }
                let mut pending = burst;
                while let Err(refused) = engine.send_tx_burst(pending) {
                    pending = refused.burst;
                    std::thread::yield_now();
                }
                sent += n as u64;
            }
            sent
        });
        let (mut received, mut bytes, mut first) = (0u64, 0u64, None);
        let deadline = Instant::now() + Duration::from_secs(600);
        while received < messages && Instant::now() < deadline {
            match engine.get_rx_burst(0, 0).expect("port 0 queue 0") {
                Some(burst) => {
                    first.get_or_insert_with(Instant::now);
                    received += burst.num_packets() as u64;
                    bytes += burst.total_bytes();
                }
                None => std::hint::spin_loop(),
            }
        }
        let seconds = first.map_or(0.0, |f| f.elapsed().as_secs_f64());
        (sender.join().expect("the sender"), (received, bytes, seconds))
    });
    let (received, bytes, seconds) = received;
    println!(
        "{{\"sent\":{sent},\"messages\":{received},\"bytes\":{bytes},\"seconds\":{seconds:.3},\"mb_per_s\":{:.2}}}",
        bytes as f64 / seconds / 1e6
    );
}
