//! A queue's copier for a `device` region used through a backend that reads
//! and writes with the CPU: RX packets land in the region's pinned twin and
//! each burst is copied to the GPU as it is delivered; a TX burst is copied
//! from the GPU into the twin as it is sent (`gpu::Stager`).
//! `staging_absent.rs` is the build without CUDA, where no `device` region
//! exists and nothing is copied.

use std::sync::{Mutex, OnceLock};

use crate::burst::Burst;
use crate::direction::Direction;
use crate::error::Result;
use crate::gpu::Stager;

/// Started once the queue's first `device` region is staged.
#[derive(Debug)]
pub(crate) struct QueueCopier(OnceLock<Mutex<Stager>>);

impl QueueCopier {
    pub(crate) fn new() -> Self {
        Self(OnceLock::new())
    }

    /// Starts the copier of a `direction` queue on `gpu` (once).
    pub(crate) fn start(&self, gpu: u32, direction: Direction) -> Result<()> {
        if self.0.get().is_none() {
            let _ = self.0.set(Mutex::new(Stager::new(gpu, direction)?));
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
