//! The GPU kinds of region memory in a build without the `cuda` feature:
//! allocating one is refused, so a [`GpuBacking`] has no value here and the
//! code that reads one is written once, for both builds.

use std::ptr::NonNull;

use daqiri_config::model::MemoryRegion;

use super::device::DevicePtr;
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

    pub(super) fn registration_range(&self) -> (usize, usize) {
        match *self {}
    }
}
