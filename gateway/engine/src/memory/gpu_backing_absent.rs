//! The GPU kinds of region memory in a build without the `cuda` feature:
//! allocating one is refused, so a [`GpuBacking`] has no value here and the
//! code that reads one is written once, for both builds.

use std::ptr::NonNull;

use daqiri_config::model::MemoryRegion;

use super::device::DevicePtr;
use super::exported::Exported;
use crate::error::{Error, Status};

/// Memory of a GPU kind: none in this build.
#[derive(Debug)]
pub enum GpuBacking {}

impl GpuBacking {
    /// Refuses: `device` and `host_pinned` need CUDA.
    pub(crate) fn allocate(config: &MemoryRegion, _len: usize) -> Result<Self, Error> {
        Err(Error::new(
            Status::NotSupported,
            format!(
                "memory region \"{}\" is kind {}, which needs CUDA; this build has no GPU support (use kind host or huge)",
                config.name,
                config.kind.as_str()
            ),
        ))
    }

    pub(super) fn host_base(&self) -> Option<NonNull<u8>> {
        match *self {}
    }

    pub(super) fn device_base(&self) -> DevicePtr {
        match *self {}
    }

    pub(super) fn gpu(&self) -> Option<u32> {
        match *self {}
    }

    pub(super) fn len(&self) -> usize {
        match *self {}
    }

    #[cfg(feature = "rdma")]
    pub(super) fn dma_buf(&self) -> Option<Result<std::os::fd::OwnedFd, Error>> {
        match *self {}
    }

    pub(super) fn export(&self) -> Result<Exported, Error> {
        match *self {}
    }

    pub(super) fn registration_range(&self) -> (usize, usize) {
        match *self {}
    }
}

/// A `device` region's pinned twin: none in this build.
#[derive(Debug)]
pub(crate) struct StagingTwin;

impl StagingTwin {
    pub(crate) fn new() -> Self {
        Self
    }

    pub(super) fn host(&self) -> Option<NonNull<u8>> {
        None
    }

    /// Unreachable: only a region on a GPU has a twin, and none exists here.
    pub(super) fn give(&self, _gpu: u32, _len: usize, _region: &str) -> Result<(), Error> {
        Ok(())
    }
}

/// Free memory on a GPU: none is known to this build.
pub(crate) fn free_device_memory(_gpu: u32) -> Option<usize> {
    None
}
