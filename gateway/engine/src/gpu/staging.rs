//! Batched GPU landing without a GPUDirect NIC: a backend that writes with
//! the CPU lands a `device` region's packets in its pinned twin, and each
//! burst (under header-data split, only its device segments) is copied to
//! the device buffers by one launch when it is delivered. The burst carries
//! the copy's event and keeps its buffers until it completes.

use cudarc::driver::CudaEvent;

use super::GpuReorder;
use crate::burst::{Burst, Completion};
use crate::error::Result;
use crate::memory::DevicePtr;

/// The copier of one RX queue, used by the worker that delivers to it.
#[derive(Debug)]
pub(crate) struct Stager {
    kernels: GpuReorder,
    /// Reused for each burst's (source, destination, bytes) list.
    copies: Vec<(DevicePtr, DevicePtr, usize)>,
}

impl Stager {
    pub(crate) fn new(gpu: u32) -> Result<Self> {
        Ok(Self { kernels: GpuReorder::new(gpu)?, copies: Vec::new() })
    }

    /// Starts the copy of `burst`'s staged segments; the burst then carries
    /// its event. A burst with nothing staged, or already copied, is left as it is.
    pub(crate) fn copy(&mut self, burst: &mut Burst) -> Result<()> {
        if burst.has_completion() {
            return Ok(());
        }
        self.copies.clear();
        burst.staged_copies(&mut self.copies);
        if self.copies.is_empty() {
            return Ok(());
        }
        let event = self.kernels.gather(&self.copies)?;
        burst.set_completion(Box::new(Copied(event)));
        Ok(())
    }
}

/// The event of a burst's copy into device memory.
#[derive(Debug)]
struct Copied(CudaEvent);

impl Completion for Copied {
    fn wait(&self) {
        if let Err(e) = self.0.synchronize() {
            tracing::error!(error = ?e, "a burst's copy into GPU memory failed");
        }
    }

    fn cuda_event(&self) -> Option<&CudaEvent> {
        Some(&self.0)
    }
}
