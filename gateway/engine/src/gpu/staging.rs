//! Batched GPU landing and sending without a GPUDirect NIC: a backend that
//! writes with the CPU lands a `device` region's packets in its pinned twin,
//! and each burst (under header-data split, only its device segments) is
//! copied to the device buffers by one launch when it is delivered; a burst
//! to send is copied from its device buffers into the twin by one launch
//! when the application sends it, and its sender reads the twin once the
//! copy is done. The burst carries the copy's event and keeps its buffers
//! until it completes.

use cudarc::driver::CudaEvent;

use super::GpuReorder;
use crate::burst::{Burst, Completion};
use crate::direction::Direction;
use crate::error::Result;
use crate::memory::DevicePtr;

/// The copier of one queue: for RX, used by the worker that delivers to it;
/// for TX, by the application threads that send on it.
#[derive(Debug)]
pub(crate) struct Stager {
    kernels: GpuReorder,
    direction: Direction,
    /// Reused for each burst's (source, destination, bytes) list.
    copies: Vec<(DevicePtr, DevicePtr, usize)>,
}

impl Stager {
    pub(crate) fn new(gpu: u32, direction: Direction) -> Result<Self> {
        Ok(Self { kernels: GpuReorder::new(gpu)?, direction, copies: Vec::new() })
    }

    /// Starts the copy of `burst`'s staged segments; the burst then carries
    /// its event. A burst with nothing staged is left as it is; so is a
    /// received one already copied (an aggregate carries its kernel's event).
    /// A burst to send is copied each time, so a send retried after
    /// `NO_SPACE_AVAILABLE` sends what its device buffers hold then.
    pub(crate) fn copy(&mut self, burst: &mut Burst) -> Result<()> {
        if self.direction == Direction::Rx && burst.has_completion() {
            return Ok(());
        }
        self.copies.clear();
        burst.staged_copies(self.direction, &mut self.copies);
        if self.copies.is_empty() {
            return Ok(());
        }
        let event = self.kernels.gather(&self.copies)?;
        burst.set_completion(Box::new(Copied(event)));
        Ok(())
    }
}

/// The event of a burst's copy between device memory and its twin.
#[derive(Debug)]
struct Copied(CudaEvent);

impl Completion for Copied {
    fn wait(&self) {
        if let Err(e) = self.0.synchronize() {
            tracing::error!(error = ?e, "a burst's copy between GPU memory and its pinned twin failed");
        }
    }

    fn cuda_event(&self) -> Option<&CudaEvent> {
        Some(&self.0)
    }
}
