//! Reorder + convert throughput on one core, against `memcpy` of the same
//! output in the same run (issue: "plain reorder ≥ 0.8x memcpy, conversions
//! ≥ 0.5x").
//!
//! Packets are built in memory, shuffled within each batch, and pushed
//! through a CPU plan with [`daqiri::reorder::Replay`]: the same windows,
//! conversion and output region as a running engine's queue worker, with
//! no socket or loop copy in front. The baseline copies each batch's output
//! size with one `copy_from_slice`, from as many distinct source buffers as
//! the input set has batches into as many targets as the plan's region has.
//! A second baseline copies each packet to its slot with no plan (the floor
//! of any reorder that copies per packet). All in GB/s of output.
//!
//! `cargo bench -p daqiri --bench reorder`; `BENCH_SECONDS` (default 2)
//! sets each measurement, `SAMPLE_BYTES` (default 1024) the input bytes per
//! packet, `PACKETS_PER_BATCH` (default 64), `INPUT_BATCHES` (default 64,
//! 4 MiB: cache-resident; 1024 streams from memory) the input set, and
//! `BENCH_CASE` a part of the case names to run only those.

use std::hint::black_box;
use std::time::{Duration, Instant};

use daqiri::reorder::Replay;
use daqiri_config::model::{BitField, Endianness, InputType, OutputType};
use daqiri_config::testing::{TestConfig, plan, rx};

/// Sequence number (the low bits of a u32, network order) and 4 spare bytes before the samples.
const HEADER: usize = 8;
/// Output buffers: room for the open window and the batch being read.
const OUTPUT_BUFS: usize = 16;

struct Case {
    name: &'static str,
    data_types: Option<(InputType, OutputType, Endianness)>,
    /// Output bytes per input byte.
    growth: usize,
}

const CASES: [Case; 4] = [
    Case { name: "plain copy", data_types: None, growth: 1 },
    Case { name: "int8 -> fp32", data_types: Some((InputType::Int8, OutputType::Fp32, Endianness::Host)), growth: 4 },
    Case {
        name: "int16 (network) -> fp32",
        data_types: Some((InputType::Int16, OutputType::Fp32, Endianness::Network)),
        growth: 2,
    },
    Case { name: "int4 -> fp16", data_types: Some((InputType::Int4, OutputType::Fp16, Endianness::Host)), growth: 4 },
];

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config(case: &Case, shape: Shape) -> TestConfig {
    let Shape { batches, sample_bytes, per_batch } = shape;
    let out_buf = sample_bytes * case.growth * per_batch;
    let sequence_bits = (batches * per_batch).trailing_zeros();
    let sequence = BitField { bit_offset: 32 - sequence_bits, bit_width: sequence_bits };
    let mut plan = plan("plan", &[1], "out").payload_at(HEADER as u32).packets_per_batch(sequence, per_batch as u32);
    if let Some((input, output, order)) = case.data_types {
        plan = plan.converting(input, output, order);
    }
    TestConfig::loopback()
        .region("rx", 64, (HEADER + sample_bytes) as u64)
        .region("out", OUTPUT_BUFS as u32, out_buf as u64)
        .rx_queue(rx(0, "rx").batch(per_batch as u32))
        .udp_flow(1, 0, 5000)
        .reorder(plan)
}

/// `batches` batches of packets, each batch's order shuffled (xorshift, fixed
/// seed), laid out one after another in arrival order as a receive region's
/// buffers hold them: the shuffle is in where they go, not where they are.
fn packets(batches: usize, sample_bytes: usize, per_batch: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let stride = stride(sample_bytes);
    let mut all = vec![0u8; batches * per_batch * stride];
    let mut packets = all.chunks_exact_mut(stride);
    for batch in 0..batches {
        let mut order: Vec<usize> = (0..per_batch).collect();
        for i in (1..per_batch).rev() {
            order.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        for slot in order {
            let packet = packets.next().expect("sized for every packet");
            packet.iter_mut().for_each(|b| *b = next() as u8);
            packet[..4].copy_from_slice(&((batch * per_batch + slot) as u32).to_be_bytes());
        }
    }
    all
}

/// Bytes between packets in the input set: a cache-line-aligned buffer each.
fn stride(sample_bytes: usize) -> usize {
    (HEADER + sample_bytes).next_multiple_of(64)
}

/// Output bytes per second of reorder (+ convert) through a plan.
fn reorder_rate(case: &Case, shape: Shape, for_how_long: Duration) -> f64 {
    let Shape { batches, sample_bytes, per_batch } = shape;
    let config = config(case, shape).validate().unwrap_or_else(|e| panic!("bench config: {e}"));
    let mut replay = Replay::new(&config, "loop").expect("replay");
    let input = packets(batches, sample_bytes, per_batch);
    let (mut bytes, mut emitted, mut pushed) = (0u64, 0u64, 0usize);
    let start = Instant::now();
    while start.elapsed() < for_how_long {
        // The sequence field is as wide as one pass, so each pass wraps it
        // around and its batches are new ones, without writing the input.
        for buffer in input.chunks_exact(stride(sample_bytes)) {
            replay.push(1, &buffer[..HEADER + sample_bytes]);
            // Read as an application would: a burst at a time, not a poll per packet.
            pushed += 1;
            if pushed % per_batch == 0 {
                while let Some(batch) = replay.next_batch() {
                    bytes += black_box(batch.total_bytes());
                    emitted += 1;
                }
            }
        }
    }
    let rate = bytes as f64 / start.elapsed().as_secs_f64();
    let stats = &replay.stats()[0];
    assert_eq!(
        (stats.packets_placed, stats.packets_missing, stats.batches_complete),
        (pushed as u64, 0, emitted),
        "every packet placed, every batch complete: {stats:?}"
    );
    rate
}

/// Bytes per second of `copy_from_slice`, `batch_bytes` at a time, from as
/// many sources as the input set has batches into as many targets as the
/// output region has buffers.
fn memcpy_rate(batches: usize, batch_bytes: usize, for_how_long: Duration) -> f64 {
    let sources: Vec<Vec<u8>> = (0..batches).map(|i| vec![i as u8; batch_bytes]).collect();
    let mut targets: Vec<Vec<u8>> = (0..OUTPUT_BUFS).map(|_| vec![0u8; batch_bytes]).collect();
    let (mut bytes, mut i) = (0u64, 0usize);
    let start = Instant::now();
    while start.elapsed() < for_how_long {
        for _ in 0..batches {
            targets[i % OUTPUT_BUFS].copy_from_slice(&sources[i % batches]);
            black_box(&mut targets[i % OUTPUT_BUFS]);
            bytes += batch_bytes as u64;
            i += 1;
        }
    }
    bytes as f64 / start.elapsed().as_secs_f64()
}

/// Bytes per second of copying each packet's samples to its slot, in the
/// same shuffled order and into as many targets as the plan's region has,
/// with no plan: the floor of a reorder that copies.
fn packet_copy_rate(shape: Shape, for_how_long: Duration) -> f64 {
    let Shape { batches, sample_bytes, per_batch } = shape;
    let input = packets(batches, sample_bytes, per_batch);
    let mut targets: Vec<Vec<u8>> = (0..OUTPUT_BUFS).map(|_| vec![0u8; sample_bytes * per_batch]).collect();
    let (mut bytes, mut i) = (0u64, 0usize);
    let start = Instant::now();
    while start.elapsed() < for_how_long {
        for batch in input.chunks_exact(stride(sample_bytes) * per_batch) {
            let target = &mut targets[i % OUTPUT_BUFS];
            for buffer in batch.chunks_exact(stride(sample_bytes)) {
                let slot = u32::from_be_bytes(buffer[..4].try_into().unwrap()) as usize % per_batch;
                target[slot * sample_bytes..][..sample_bytes].copy_from_slice(&buffer[HEADER..][..sample_bytes]);
            }
            black_box(target);
            bytes += (sample_bytes * per_batch) as u64;
            i += 1;
        }
    }
    bytes as f64 / start.elapsed().as_secs_f64()
}

/// The input set: how many batches, of how many packets, of how many sample bytes.
#[derive(Debug, Clone, Copy)]
struct Shape {
    batches: usize,
    sample_bytes: usize,
    per_batch: usize,
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let seconds = env_or("BENCH_SECONDS", 2) as u64;
    let for_how_long = Duration::from_secs(seconds);
    let shape = Shape {
        batches: env_or("INPUT_BATCHES", 64),
        sample_bytes: env_or("SAMPLE_BYTES", 1024),
        per_batch: env_or("PACKETS_PER_BATCH", 64),
    };
    let Shape { batches, sample_bytes, per_batch } = shape;
    assert!((batches * per_batch).is_power_of_two(), "INPUT_BATCHES x PACKETS_PER_BATCH must be a power of two");
    println!(
        "reorder + convert on one core: {batches} batches of {per_batch} packets of {sample_bytes} sample bytes \
         ({} MiB), shuffled within each batch, {seconds} s per measurement\n",
        (batches * per_batch * stride(sample_bytes)) >> 20
    );
    println!("| case | output per batch | reorder (GB/s) | memcpy (GB/s) | ratio |");
    println!("|---|---|---|---|---|");
    let only = std::env::var("BENCH_CASE").unwrap_or_default();
    if "per-packet copy, no plan".contains(&only) {
        let memcpy = memcpy_rate(batches, sample_bytes * per_batch, for_how_long);
        let copy = packet_copy_rate(shape, for_how_long);
        row("per-packet copy, no plan", sample_bytes * per_batch, copy, memcpy);
    }
    for case in CASES.iter().filter(|c| c.name.contains(&only)) {
        let batch_bytes = sample_bytes * case.growth * per_batch;
        let memcpy = memcpy_rate(batches, batch_bytes, for_how_long);
        let reorder = reorder_rate(case, shape, for_how_long);
        row(case.name, batch_bytes, reorder, memcpy);
    }
}

fn row(name: &str, batch_bytes: usize, rate: f64, memcpy: f64) {
    println!(
        "| {name} | {} KiB | {:.2} | {:.2} | **{:.2}x** |",
        batch_bytes / 1024,
        rate / 1e9,
        memcpy / 1e9,
        rate / memcpy
    );
}
