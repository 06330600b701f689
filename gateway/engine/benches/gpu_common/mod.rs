//! What the GPU reorder benchmarks share: the arrival order of a batch, the
//! device copy they are measured against, and a timed series of launches.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaContext;
use daqiri::gpu::GpuReorder;

/// The slots `0..slots` in a shuffled arrival order, the same in every run.
pub fn arrival_order(slots: usize) -> Vec<usize> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut order: Vec<usize> = (0..slots).collect();
    for i in (1..slots).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

/// Bytes read + written per second by `cuMemcpyDtoD` of `bytes`.
pub fn copy_rate(ctx: &Arc<CudaContext>, bytes: usize, reps: usize) -> f64 {
    let stream = ctx.default_stream();
    let src = stream.alloc_zeros::<u8>(bytes).expect("source");
    let mut dst = stream.alloc_zeros::<u8>(bytes).expect("target");
    stream.memcpy_dtod(&src, &mut dst).expect("warm-up copy");
    stream.synchronize().expect("sync");
    let start = Instant::now();
    for _ in 0..reps {
        stream.memcpy_dtod(&src, &mut dst).expect("copy");
    }
    stream.synchronize().expect("sync");
    (2 * bytes * reps) as f64 / start.elapsed().as_secs_f64()
}

/// Launches per second of `launch` over `reps` back-to-back launches, after
/// a warm-up launch; the launches' tables are sized for `slots` first, as a
/// plan sizes them when it starts.
pub fn launch_rate(gpu: &mut GpuReorder, slots: usize, reps: usize, launch: impl Fn(&mut GpuReorder)) -> f64 {
    gpu.reserve(slots).expect("slot tables");
    launch(gpu);
    gpu.synchronize().expect("warm-up");
    let start = Instant::now();
    for _ in 0..reps {
        launch(gpu);
    }
    gpu.synchronize().expect("sync");
    reps as f64 / start.elapsed().as_secs_f64()
}
