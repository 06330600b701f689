//! A queue's copier for RX into a `device` region through a backend that
//! writes with the CPU: packets land in the region's pinned twin, and each
//! burst is copied to the GPU as it is delivered (`gpu::Stager`).
//! `staging_absent.rs` is the build without CUDA, where no `device` region
//! exists and nothing is copied.

use std::sync::{Mutex, OnceLock};

use crate::burst::Burst;
use crate::error::Result;
use crate::gpu::Stager;

/// Started once the queue's first `device` region is staged.
#[derive(Debug)]
pub(crate) struct QueueCopier(OnceLock<Mutex<Stager>>);

impl QueueCopier {
    pub(crate) fn new() -> Self {
        Self(OnceLock::new())
    }

    /// Starts the copier on `gpu` (once).
    pub(crate) fn start(&self, gpu: u32) -> Result<()> {
        if self.0.get().is_none() {
            let _ = self.0.set(Mutex::new(Stager::new(gpu)?));
        }
        Ok(())
    }

    /// Starts the copy of `burst`'s staged segments, if the queue stages any.
    pub(crate) fn copy(&self, burst: &mut Burst) -> Result<()> {
        match self.0.get() {
            Some(stager) => stager.lock().unwrap_or_else(|e| e.into_inner()).copy(burst),
            None => Ok(()),
        }
    }
}
