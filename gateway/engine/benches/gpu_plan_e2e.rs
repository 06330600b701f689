//! End to end on the GPU machine's cores: UDP datagrams over loopback into
//! the socket backend, landing in pinned memory and placed into GPU
//! aggregates by a GPU reorder plan, against the same traffic and path
//! without the GPU step (the same plan on the CPU into host memory) and
//! with no plan at all (plain bursts), in one run.
//!
//! Senders (`BENCH_SENDERS`, default 1) send each datagram on its own
//! (`sendmmsg` of separate datagrams, no segmentation offload) as fast as
//! they can, numbered from one shared counter, for `BENCH_SECONDS` (default
//! 5) per case; one more thread drains the queue.
//! Reported: datagrams the application received as aggregates or bursts
//! per second, and the share of those sent that were lost.
//! Built by `tests/gpu/build.sh`; run on the GPU machine: `./gpu_plan_e2e`.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::time::{Duration, Instant};

use daqiri::Engine;
use daqiri_config::model::{BitField, Endianness, InputType, MemoryKind, OutputType, ReorderType};
use daqiri_config::testing::{self, TestConfig, rx};

/// int16 samples per datagram, after a 4-byte sequence number.
const SAMPLE_BYTES: usize = 1024;
const PACKETS_PER_BATCH: u32 = 1024;
const SEND_BATCH: usize = 64;

/// A UDP server on `port`; with `plan` = (where the plan runs, its output
/// region's kind), its datagrams go through a reorder plan converting
/// int16 to fp32.
fn config(port: u16, plan: Option<(ReorderType, MemoryKind)>) -> String {
    // A GPU plan reads packets where they land: pinned memory. The plain
    // case lands there too; a CPU plan lands in ordinary memory.
    let rx_kind = match plan {
        Some((ReorderType::Cpu, _)) => MemoryKind::Host,
        _ => MemoryKind::HostPinned,
    };
    let output_kind = plan.map_or(MemoryKind::Host, |(_, kind)| kind);
    // The queue's timeout is far above a batch's fill time (2 ms at 500k
    // datagrams/s), so batches end complete and late packets measure loss.
    let mut config = TestConfig::udp_server(port)
        .region_of("rx", rx_kind, 32768, 2048)
        // Room for the largest payload a 2048-byte buffer holds, converted to fp32.
        .region_of("out", output_kind, 64, u64::from(PACKETS_PER_BATCH) * 2048 * 2)
        .rx_queue(rx(0, "rx").core(2).batch(PACKETS_PER_BATCH).timeout_us(100_000));
    if let Some((on, _)) = plan {
        let sequence = BitField { bit_offset: 0, bit_width: 32 };
        config = config.udp_flow(1, 0, port).reorder(
            testing::plan("samples", &[1], "out")
                .on(on)
                .payload_at(4)
                .converting(InputType::Int16, OutputType::Fp32, Endianness::Network)
                .packets_per_batch(sequence, PACKETS_PER_BATCH),
        );
    }
    config.yaml()
}

/// Sends numbered datagrams to `port` until `stop`, taking sequence
/// numbers from `next` (shared by every sender); returns how many.
fn send(port: u16, next: &AtomicU32, stop: &AtomicBool) -> u64 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("sender socket");
    socket.connect(("127.0.0.1", port)).expect("connect");
    let mut payloads = vec![[0u8; 4 + SAMPLE_BYTES]; SEND_BATCH];
    for (i, p) in payloads.iter_mut().enumerate() {
        for (j, b) in p[4..].iter_mut().enumerate() {
            *b = (i * 31 + j * 7) as u8;
        }
    }
    let mut sent = 0u64;
    while !stop.load(Relaxed) {
        let mut sequence = next.fetch_add(SEND_BATCH as u32, Relaxed);
        for p in &mut payloads {
            p[..4].copy_from_slice(&sequence.to_be_bytes());
            sequence = sequence.wrapping_add(1);
        }
        let mut iovecs: Vec<libc::iovec> =
            payloads.iter_mut().map(|p| libc::iovec { iov_base: p.as_mut_ptr().cast(), iov_len: p.len() }).collect();
        let mut headers: Vec<libc::mmsghdr> = iovecs
            .iter_mut()
            .map(|iov| {
                // SAFETY: an all-zero msghdr is valid; the fields set below make it one datagram.
                let mut header: libc::mmsghdr = unsafe { std::mem::zeroed() };
                header.msg_hdr.msg_iov = iov;
                header.msg_hdr.msg_iovlen = 1;
                header
            })
            .collect();
        // SAFETY: `headers` holds SEND_BATCH messages whose buffers live until the call returns.
        let n = unsafe { libc::sendmmsg(socket.as_raw_fd(), headers.as_mut_ptr(), SEND_BATCH as u32, 0) };
        sent += n.max(0) as u64;
    }
    sent
}

/// One case: datagrams received per second, and the share lost.
fn run(name: &str, yaml: &str, port: u16, (seconds, senders): (u64, usize)) -> f64 {
    let engine = Arc::new(Engine::from_yaml(yaml).expect("engine"));
    let stop = Arc::new(AtomicBool::new(false));
    let drain = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut packets = 0u64;
            while !stop.load(Relaxed) {
                match engine.get_rx_burst(0, 0) {
                    Ok(Some(burst)) => packets += u64::from(burst.source_packets()),
                    _ => std::hint::spin_loop(),
                }
            }
            packets
        })
    };
    let next = Arc::new(AtomicU32::new(0));
    let senders: Vec<_> = (0..senders)
        .map(|_| {
            let (next, stop) = (Arc::clone(&next), Arc::clone(&stop));
            std::thread::spawn(move || send(port, &next, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let stats = |e: &Engine| e.stats().ports[0].rx_queues[0].stats.packets;
    let (start, before) = (Instant::now(), stats(&engine));
    std::thread::sleep(Duration::from_secs(seconds));
    let (elapsed, after) = (start.elapsed().as_secs_f64(), stats(&engine));
    stop.store(true, Relaxed);
    let sent: u64 = senders.into_iter().map(|s| s.join().expect("sender")).sum();
    drain.join().expect("drain");
    let received = engine.stats().ports[0].rx_queues[0].stats.packets;
    let stats = engine.stats();
    let placed: u64 = stats.ports[0].reorder.iter().map(|p| p.packets_placed).sum();
    let port = &stats.ports[0];
    let drops: Vec<String> = port.rx_queues[0]
        .stats
        .drops_by_reason()
        .chain(port.rx_port_drops.drops_by_reason())
        .filter(|&(_, n)| n > 0)
        .map(|(reason, n)| format!("{}={n}", reason.as_str()))
        .collect();
    let plans: Vec<String> = port
        .reorder
        .iter()
        .map(|p| {
            format!(
                "late={} out_of_window={} rejected={} duplicate={} dropped={} timed_out={}",
                p.packets_late,
                p.packets_out_of_window,
                p.packets_rejected,
                p.packets_duplicate,
                p.batches_dropped,
                p.batches_timed_out
            )
        })
        .collect();
    eprintln!("{name}: drops [{}] plans [{}]", drops.join(" "), plans.join("; "));
    engine.shutdown();
    let rate = (after - before) as f64 / elapsed;
    let lost = 1.0 - received.min(sent) as f64 / sent.max(1) as f64;
    println!(
        "| {name} | {:.0} k | {:.1}% | {} |",
        rate / 1e3,
        lost * 100.0,
        if placed > 0 { format!("{placed} placed") } else { "bursts".into() }
    );
    rate
}

fn main() {
    let seconds = std::env::var("BENCH_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let senders = std::env::var("BENCH_SENDERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let port = 47_000;
    println!(
        "{SAMPLE_BYTES} B of int16 samples per datagram, {PACKETS_PER_BATCH} per batch, {senders} sender(s), {seconds} s per case\n"
    );
    let seconds = (seconds, senders);
    println!("| path | datagrams/s received | lost | |");
    println!("|---|---|---|---|");
    let gpu = run(
        "GPU plan: pinned -> kernel -> device aggregates",
        &config(port, Some((ReorderType::Gpu, MemoryKind::Device))),
        port,
        seconds,
    );
    let cpu = run(
        "CPU plan: host -> host aggregates",
        &config(port + 1, Some((ReorderType::Cpu, MemoryKind::Host))),
        port + 1,
        seconds,
    );
    let plain = run("no plan: pinned bursts", &config(port + 2, None), port + 2, seconds);
    println!("\nGPU plan / CPU plan: {:.2}x; GPU plan / no plan: {:.2}x", gpu / cpu, gpu / plain);
}
