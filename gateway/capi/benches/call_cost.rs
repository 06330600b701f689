//! What a call through libdaqiri's C ABI costs, beside the same work
//! through the engine's Rust API in the same run (the reference: the C ABI
//! adds its handle checks and an engine lookup, nothing per packet).
//!
//! Both sides run a software-loopback engine (one TX and one RX queue,
//! bursts of 64 packets of 1024 bytes) and measure, in ns:
//! - reading a held RX burst: each packet's pointer and length;
//! - a TX burst's life without the wire: take 64 buffers, set every length, free;
//! - the handle alone: `create_tx_burst_params` + `free_tx_metadata`.
//!
//! `cargo bench -p daqiri-capi --bench call_cost`; `BENCH_SECONDS` (default 1) per figure.

use std::ffi::CString;
use std::hint::black_box;
use std::time::{Duration, Instant};

use daqiri_capi::{
    daqiri_gw_create_tx_burst_params, daqiri_gw_free_burst, daqiri_gw_get_packet_length, daqiri_gw_get_rx_burst,
    daqiri_gw_get_segment_packet_ptr, daqiri_gw_get_tx_packet_burst, daqiri_gw_init_from_yaml_string,
    daqiri_gw_send_tx_burst, daqiri_gw_set_header, daqiri_gw_set_packet_lengths, daqiri_gw_shutdown,
};

const PACKETS: usize = 64;
const LENGTH: usize = 1024;
const CONFIG: &str = r#"
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - { name: mem, kind: host, num_bufs: 1024, buf_size: 2048 }
    interfaces:
    - name: lo
      address: loopback
      tx: { queues: [{ name: t, id: 0, cpu_core: 0, batch_size: 64, memory_regions: [mem] }] }
      rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 64, memory_regions: [mem] }] }
"#;

/// ns per `per_round` operations of `round`, run for the configured time.
fn per_op(per_round: usize, mut round: impl FnMut()) -> f64 {
    let seconds: f64 = std::env::var("BENCH_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0);
    for _ in 0..1000 {
        round();
    }
    let (start, mut rounds) = (Instant::now(), 0u64);
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        for _ in 0..100 {
            round();
        }
        rounds += 100;
    }
    start.elapsed().as_nanos() as f64 / (rounds as f64 * per_round as f64)
}

fn main() {
    let engine = daqiri::Engine::from_yaml(CONFIG).expect("the Rust side's engine");
    let yaml = CString::new(CONFIG).expect("no NUL");
    // SAFETY: a NUL-terminated YAML string.
    assert_eq!(unsafe { daqiri_gw_init_from_yaml_string(yaml.as_ptr()) }, 0, "the C side's engine");

    // One RX burst each, held for the reads.
    let mut tx = engine.get_tx_packet_burst(0, 0, PACKETS).expect("TX burst");
    for i in 0..PACKETS {
        tx.packet_mut(i).write(&[7; LENGTH]).expect("fill");
    }
    engine.send_tx_burst(tx).map_err(|e| e.error).expect("send");
    let held = loop {
        if let Some(burst) = engine.get_rx_burst(0, 0).expect("receive") {
            break burst;
        }
    };
    let lengths = [LENGTH as i32];
    // SAFETY: handles from the library; one length and a writable out-pointer, as passed.
    let c_held = unsafe {
        let msg = daqiri_gw_create_tx_burst_params();
        daqiri_gw_set_header(msg, 0, 0, PACKETS as i32, 1);
        assert_eq!(daqiri_gw_get_tx_packet_burst(msg), 0);
        for i in 0..PACKETS as i32 {
            daqiri_gw_set_packet_lengths(msg, i, lengths.as_ptr(), 1);
        }
        assert_eq!(daqiri_gw_send_tx_burst(msg), 0);
        let mut burst = std::ptr::null_mut();
        while daqiri_gw_get_rx_burst(&mut burst, 0, 0) != 0 {}
        burst
    };

    println!("| call | Rust API (ns) | C ABI (ns) | C / Rust |");
    println!("|---|---|---|---|");
    let row = |name: &str, rust: f64, c: f64| println!("| {name} | {rust:.1} | {c:.1} | {:.2}x |", c / rust);

    let rust = per_op(PACKETS, || {
        for i in 0..PACKETS {
            let packet = held.packet(i);
            black_box((packet.data().as_ptr(), packet.len()));
        }
    });
    let c = per_op(PACKETS, || {
        for i in 0..PACKETS as i32 {
            black_box((daqiri_gw_get_segment_packet_ptr(c_held, 0, i), daqiri_gw_get_packet_length(c_held, i)));
        }
    });
    row("a packet's pointer and length (RX burst)", rust, c);

    let rust = per_op(1, || {
        let mut burst = engine.get_tx_packet_burst(0, 0, PACKETS).expect("TX burst");
        for i in 0..PACKETS {
            burst.packet_mut(i).set_lengths(&[LENGTH]).expect("length");
        }
        drop(black_box(burst));
    });
    let c = per_op(1, || {
        let msg = daqiri_gw_create_tx_burst_params();
        daqiri_gw_set_header(msg, 0, 0, PACKETS as i32, 1);
        daqiri_gw_get_tx_packet_burst(msg);
        for i in 0..PACKETS as i32 {
            // SAFETY: one length, as passed.
            unsafe { daqiri_gw_set_packet_lengths(msg, i, lengths.as_ptr(), 1) };
        }
        daqiri_gw_free_burst(black_box(msg), 1);
    });
    row("a TX burst of 64: take, set 64 lengths, free", rust, c);

    let c = per_op(1, || {
        daqiri_gw_free_burst(black_box(daqiri_gw_create_tx_burst_params()), 1);
    });
    println!("| a handle alone: create_tx_burst_params + free_tx_metadata | (none) | {c:.1} | |");

    daqiri_gw_free_burst(c_held, 0);
    daqiri_gw_shutdown();
    drop(held);
}
