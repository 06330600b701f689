//! GPU reorder kernels against device-to-device copy, the limit they work
//! under, on one GPU in one run: effective bandwidth (bytes read + bytes
//! written per second) at aggregate sizes from 2 MB to 512 MB. Target:
//! ≥ 80% of copy bandwidth at 64 MB and above.
//!
//! Batches are 8 KiB payloads laid out in arrival order, each batch's slots
//! shuffled, as the engine's pinned staging holds them, here in device
//! memory. Built by `tests/gpu/build.sh`; run on the GPU machine:
//! `./gpu_reorder_bandwidth` (`BENCH_REPS`, default 20, launches per size).
//! With `BENCH_FLOOR=P` it exits 1 when a kernel falls below P% of copy at
//! 128 MB or more (tests/gpu/run.sh runs it so, to catch a drop).

mod gpu_common;

use cudarc::driver::CudaContext;
use daqiri::config::model::{DataTypes, Endianness, InputType, OutputType};
use daqiri::gpu::{DeviceBuffer, GpuReorder, Slots};
use daqiri::reorder::convert::output_len;
use gpu_common::{arrival_order, copy_rate, launch_rate};

const PAYLOAD: usize = 8192;
const SIZES_MB: [usize; 9] = [2, 4, 8, 16, 32, 64, 128, 256, 512];
/// Where `BENCH_FLOOR` applies: below it, launch and table latency rule.
const FLOOR_FROM_MB: usize = 128;

fn main() {
    let reps: usize = std::env::var("BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let ctx = CudaContext::new(0).expect("GPU 0");
    println!("GPU 0: {}, {PAYLOAD} B payloads per slot, {reps} launches per size\n", ctx.name().unwrap_or_default());
    let cases: [(&str, Option<DataTypes>); 4] = [
        ("plain copy", None),
        ("int4 -> fp16", Some(types(InputType::Int4, OutputType::Fp16))),
        ("int8 -> bf16", Some(types(InputType::Int8, OutputType::Bf16))),
        ("int16 -> fp32", Some(types(InputType::Int16, OutputType::Fp32))),
    ];
    println!(
        "| aggregate | memcpy DtoD (GB/s) | {} |",
        cases.iter().map(|(name, _)| format!("{name} (GB/s, of copy)")).collect::<Vec<_>>().join(" | ")
    );
    println!("|---|---|{}", "---|".repeat(cases.len()));
    let floor: Option<f64> = std::env::var("BENCH_FLOOR").ok().map(|v| v.parse().expect("BENCH_FLOOR: a percentage"));
    let mut below = Vec::new();
    let mut gpu = GpuReorder::new(0).expect("reorder kernels");
    for mb in SIZES_MB {
        let aggregate = mb << 20;
        let copy = copy_rate(&ctx, aggregate, reps);
        let mut row = format!("| {mb} MB | {:.0} |", copy / 1e9);
        for (name, types) in &cases {
            let rate = reorder_rate(&mut gpu, types.as_ref(), aggregate, reps);
            let share = 100.0 * rate / copy;
            row += &format!(" {:.0} ({share:.0}%) |", rate / 1e9);
            if floor.is_some_and(|floor| mb >= FLOOR_FROM_MB && share < floor) {
                below.push(format!("{name} at {mb} MB: {share:.0}% of copy"));
            }
        }
        println!("{row}");
    }
    if let Some(floor) = floor.filter(|_| !below.is_empty()) {
        eprintln!("below {floor}% of copy: {}", below.join("; "));
        std::process::exit(1);
    }
}

fn types(input: InputType, output: OutputType) -> DataTypes {
    DataTypes { input_type: input, output_type: output, endianness: Endianness::Host }
}

/// Bytes read + written per second by the reorder kernel filling an aggregate of `aggregate` output bytes.
fn reorder_rate(gpu: &mut GpuReorder, types: Option<&DataTypes>, aggregate: usize, reps: usize) -> f64 {
    let out_slot = types.map_or(PAYLOAD, |t| output_len(t, PAYLOAD).expect("whole samples"));
    let slots = aggregate / out_slot;
    let input = DeviceBuffer::zeroed(0, slots * PAYLOAD).expect("input");
    let output = DeviceBuffer::zeroed(0, slots * out_slot).expect("output");
    let mut sources = vec![None; slots];
    for (arrival, &slot) in arrival_order(slots).iter().enumerate() {
        sources[slot] = Some(input.slice(arrival * PAYLOAD, PAYLOAD));
    }
    let launches = launch_rate(gpu, slots, reps, |gpu| {
        gpu.launch(types, Slots { sources: &sources, in_len: PAYLOAD }, output.slice(0, output.len()), out_slot)
            .expect("launch");
    });
    (slots * (PAYLOAD + out_slot)) as f64 * launches
}
