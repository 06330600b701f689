//! `on_gpu` in a build without CUDA: with no GPU plan, nothing is ever in
//! flight.

use super::Plan;
use super::gpu_plan::GpuPlan;
use super::held::HeldBatch;
use crate::burst::Burst;
use crate::queue::Queue;

/// Always empty.
#[derive(Debug, Default)]
pub(super) struct InFlight;

impl InFlight {
    pub(super) fn launch(&mut self, _: &Plan, gpu: &GpuPlan, _: HeldBatch, _: Burst, _: &Queue) -> bool {
        match *gpu {}
    }

    pub(super) fn reap(&mut self, _: &Plan, _: &Queue, _: bool) {}
}
