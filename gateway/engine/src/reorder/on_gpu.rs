//! GPU plans (`reorder_type: gpu`). A batch holds its packets' buffers
//! where they landed, in memory the GPU maps, and one kernel launch places
//! and converts the whole batch when it is emitted. The buffers go back to
//! their pool once the launch's event completes.
//!
//! A `device` output is delivered at once, carrying the event: only GPU
//! code reads it, and it orders itself after the event. A `host_pinned`
//! output is held back until the kernel is done, since host code may read
//! it as soon as it has the burst.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaEvent;

use super::Plan;
use super::gpu_plan::GpuPlan;
use super::held::HeldBatch;
use crate::burst::{Burst, Completion, PacketSlot};
use crate::gpu::Slots;
use crate::memory::{BufToken, RegionTable};
use crate::queue::Queue;

/// One launched batch: its event, and the packet buffers its kernel reads.
#[derive(Debug)]
struct Launch {
    event: CudaEvent,
    held: Mutex<Vec<BufToken>>,
    source_region: u16,
    regions: Arc<RegionTable>,
}

impl Launch {
    fn is_done(&self) -> bool {
        // An error here is a failed kernel or a lost context: no work can
        // still be reading the buffers, so they may go back.
        self.event.try_is_complete().unwrap_or(true)
    }

    /// Waits for the kernel, then gives the packet buffers back (once).
    fn finish(&self) {
        if let Err(e) = self.event.synchronize() {
            tracing::error!(error = ?e, "a reorder kernel failed");
        }
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        self.regions.get(self.source_region).release_all(held.into_iter());
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The aggregate's view of its launch: dropping the burst waits for it.
#[derive(Debug)]
struct Written(Arc<Launch>);

impl Completion for Written {
    fn wait(&self) {
        self.0.finish();
    }

    fn cuda_event(&self) -> Option<&CudaEvent> {
        Some(&self.0.event)
    }
}

/// A plan's launches not yet seen to finish, oldest first, with the
/// aggregates held back for them (host-readable outputs).
#[derive(Debug, Default)]
pub(super) struct InFlight {
    launches: VecDeque<(Arc<Launch>, Option<Burst>)>,
}

impl InFlight {
    /// Launches `batch`'s kernel and hands `burst` (the aggregate, marked,
    /// empty) over with it; whether the batch was launched. On failure the
    /// buffers go back and the caller counts the batch as dropped.
    pub(super) fn launch(
        &mut self,
        plan: &Plan,
        gpu: &GpuPlan,
        batch: HeldBatch,
        mut burst: Burst,
        queue: &Queue,
    ) -> bool {
        let regions = &*gpu.regions;
        let source_region = queue.segment_regions[0];
        let (source, output) = (regions.get(source_region), regions.get(plan.output_region));
        let in_len = batch.payload_len;
        let sources: Vec<_> = batch
            .held
            .iter()
            .map(|held| {
                held.as_ref().map(|packet| {
                    let payload = usize::from(packet.offset) + plan.payload_offset;
                    source.device_segment(&packet.token, payload, in_len).expect("validated: GPU-addressable")
                })
            })
            .collect();
        let bytes = sources.len() * batch.slot_len;
        let out = output.device_segment(&batch.output, 0, bytes).expect("validated: GPU-addressable");
        let launched =
            gpu.kernels().launch(plan.data_types.as_ref(), Slots { sources: &sources, in_len }, out, batch.slot_len);
        let held = batch.held.into_iter().flatten().map(|packet| packet.token).collect::<Vec<_>>();
        let event = match launched {
            Ok(event) => event,
            Err(e) => {
                tracing::error!(plan = %plan.name, error = %e, "reorder kernel launch failed; the batch is dropped");
                source.release_all(held.into_iter());
                output.release(batch.output);
                return false;
            }
        };
        burst.push(PacketSlot::single(batch.output, bytes as u32, None));
        let launch =
            Arc::new(Launch { event, held: Mutex::new(held), source_region, regions: Arc::clone(&gpu.regions) });
        plan.counters.batches_in_flight.fetch_add(1, Relaxed);
        if gpu.host_output {
            self.launches.push_back((launch, Some(burst)));
        } else {
            burst.set_completion(Box::new(Written(Arc::clone(&launch))));
            self.launches.push_back((launch, None));
            if !queue.deliver(burst) {
                super::bump(&plan.counters.batches_dropped);
            }
        }
        true
    }

    /// Gives back the buffers of the launches that finished, oldest first,
    /// and delivers the aggregates held for them. With `wait`, waits for all.
    pub(super) fn reap(&mut self, plan: &Plan, queue: &Queue, wait: bool) {
        while let Some((launch, _)) = self.launches.front() {
            if !wait && !launch.is_done() {
                break;
            }
            let (launch, held_back) = self.launches.pop_front().expect("front exists");
            launch.finish();
            plan.counters.batches_in_flight.fetch_sub(1, Relaxed);
            if let Some(burst) = held_back
                && !queue.deliver(burst)
            {
                super::bump(&plan.counters.batches_dropped);
            }
        }
    }
}
