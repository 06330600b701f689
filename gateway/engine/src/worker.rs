//! Worker threads: spawning on a configured core, and assembling packets into
//! bursts with DAQIRI's `batch_size` / `timeout_us` semantics.

use std::thread::JoinHandle;

use crossbeam_utils::Backoff;
use std::time::{Duration, Instant};

use crate::burst::{Burst, PacketSlot};
use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::queue::Queue;
use crate::stats::DropReason;

/// Spawns a named worker, pinned to `core` when this machine has it.
pub(crate) fn spawn(name: String, core: Option<u32>, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(core) = core
                && !core_affinity::set_for_current(core_affinity::CoreId { id: core as usize })
            {
                tracing::warn!(worker = %name, core, "cannot pin to core {core} (this machine has {}); running unpinned", crate::preflight::available_cores());
            }
            body();
        })
        .map_err(|e| Error::io(Status::InternalError, "cannot spawn worker thread", e))
}

/// How long a worker may block in the kernel before it must look at its
/// timeouts and the shutdown flag again.
pub(crate) fn poll_interval<'q>(queues: impl IntoIterator<Item = &'q Queue>) -> Duration {
    let shortest = queues.into_iter().filter_map(|q| q.timeout).min().unwrap_or(Duration::from_millis(10));
    shortest.clamp(Duration::from_micros(50), Duration::from_millis(10))
}

/// Collects packets for one RX queue into bursts of `batch_size`, delivering
/// a partial burst once `timeout_us` has passed since its first packet. It
/// holds no borrow of its queue, so a poller that outlives one call (direct
/// mode) can keep it.
#[derive(Debug)]
pub(crate) struct Assembler {
    pending: Option<Burst>,
    started: Instant,
}

impl Default for Assembler {
    fn default() -> Self {
        Self { pending: None, started: Instant::now() }
    }
}

impl Assembler {
    /// Adds a packet for `queue`; a full burst is delivered at once. Without
    /// a free metadata entry the packet is dropped and counted.
    pub(crate) fn push(&mut self, queue: &Queue, slot: PacketSlot, regions: &RegionTable) {
        if self.pending.is_none() {
            match queue.meta.take() {
                Some(burst) => {
                    self.pending = Some(burst);
                    self.started = Instant::now();
                }
                None => {
                    slot.release(regions, &queue.segment_regions);
                    queue.stats.dropped(DropReason::NoFreeBurstBuffers, 1);
                    return;
                }
            }
        }
        let burst = self.pending.as_mut().expect("set above");
        burst.push(slot);
        if burst.is_full() {
            queue.deliver(self.pending.take().expect("set above"));
        }
    }

    /// Waits for a metadata entry instead of dropping (byte streams).
    pub(crate) fn push_lossless(
        &mut self,
        queue: &Queue,
        slot: PacketSlot,
        regions: &RegionTable,
        stop: &dyn Fn() -> bool,
    ) {
        if self.pending.is_none() {
            loop {
                if let Some(burst) = queue.meta.take() {
                    self.pending = Some(burst);
                    self.started = Instant::now();
                    break;
                }
                if stop() {
                    return slot.release(regions, &queue.segment_regions);
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        let burst = self.pending.as_mut().expect("set above");
        burst.push(slot);
        if burst.is_full() {
            queue.deliver_lossless(self.pending.take().expect("set above"), stop);
        }
    }

    /// Delivers a partial burst whose timeout has passed.
    pub(crate) fn flush_if_due(&mut self, queue: &Queue, now: Instant) {
        if let (Some(timeout), Some(_)) = (queue.timeout, &self.pending)
            && now.duration_since(self.started) >= timeout
        {
            self.flush(queue);
        }
    }

    /// Delivers whatever is pending (direct mode after each poll).
    pub(crate) fn flush(&mut self, queue: &Queue) {
        if let Some(burst) = self.pending.take() {
            queue.deliver(burst);
        }
    }

    /// Delivers whatever is pending, waiting for ring space (end of a stream, shutdown).
    pub(crate) fn flush_lossless(&mut self, queue: &Queue, stop: &dyn Fn() -> bool) {
        if let Some(burst) = self.pending.take() {
            queue.deliver_lossless(burst, stop);
        }
    }

    /// Delivers a partial burst of a stream once its timeout has passed.
    pub(crate) fn flush_if_due_lossless(&mut self, queue: &Queue, now: Instant, stop: &dyn Fn() -> bool) {
        if let (Some(timeout), Some(_)) = (queue.timeout, &self.pending)
            && now.duration_since(self.started) >= timeout
        {
            self.flush_lossless(queue, stop);
        }
    }
}

/// Spins briefly, then sleeps, while a worker has nothing to do.
pub(crate) fn idle(backoff: &Backoff) {
    if backoff.is_completed() {
        std::thread::sleep(Duration::from_micros(50));
    } else {
        backoff.snooze();
    }
}
