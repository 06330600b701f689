//! The GPU kinds of region memory (`device`, `host_pinned`), allocated
//! through CUDA; a build without the `cuda` feature has the same shape in
//! `gpu_backing_absent.rs`, refusing them.

use std::ptr::NonNull;

use daqiri_config::model::{MemoryKind, MemoryRegion};

use super::device::DevicePtr;
use crate::error::Error;
use crate::gpu::{DeviceMemory, PinnedMemory};

/// Memory of a GPU kind.
#[derive(Debug)]
pub enum GpuBacking {
    /// GPU memory (`kind: device`): the CPU cannot read it.
    Device(DeviceMemory),
    /// Page-locked host memory mapped for the GPU (`kind: host_pinned`).
    HostPinned(PinnedMemory),
}

impl GpuBacking {
    /// `len` bytes of `config`'s kind (`device` or `host_pinned`), on its `affinity`.
    pub(crate) fn allocate(config: &MemoryRegion, len: usize) -> Result<Self, Error> {
        let named = |e: Error| {
            Error::new(
                e.status,
                format!("memory region \"{}\" (kind {}): {}", config.name, config.kind.as_str(), e.message),
            )
        };
        match config.kind {
            MemoryKind::Device => DeviceMemory::new(config.affinity, len).map(GpuBacking::Device).map_err(named),
            MemoryKind::HostPinned => {
                PinnedMemory::on_node(config.affinity, len).map(GpuBacking::HostPinned).map_err(named)
            }
            kind => unreachable!("kind {} is not a GPU kind", kind.as_str()),
        }
    }

    pub(super) fn host_base(&self) -> Option<NonNull<u8>> {
        match self {
            GpuBacking::Device(_) => None,
            GpuBacking::HostPinned(p) => Some(p.host()),
        }
    }

    pub(super) fn device_base(&self) -> DevicePtr {
        match self {
            GpuBacking::Device(d) => d.ptr(),
            GpuBacking::HostPinned(p) => p.device(),
        }
    }

    pub(super) fn gpu(&self) -> Option<u32> {
        match self {
            GpuBacking::Device(d) => Some(d.gpu()),
            GpuBacking::HostPinned(_) => None,
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            GpuBacking::Device(d) => d.len(),
            GpuBacking::HostPinned(p) => p.len(),
        }
    }

    pub(super) fn registration_range(&self) -> (usize, usize) {
        match self {
            GpuBacking::Device(d) => (d.ptr().address() as usize, d.len()),
            GpuBacking::HostPinned(p) => (p.host().as_ptr() as usize, p.len()),
        }
    }
}
