//! The GPU kinds of region memory (`device`, `host_pinned`), allocated
//! through CUDA; a build without the `cuda` feature has the same shape in
//! `gpu_backing_absent.rs`, refusing them.

use std::ptr::NonNull;

use daqiri_config::model::{MemoryKind, MemoryRegion};

use super::device::DevicePtr;
use super::exported::Exported;
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
            MemoryKind::Device => DeviceMemory::for_region(config.affinity, len).map(GpuBacking::Device).map_err(named),
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

    #[cfg(feature = "rdma")]
    pub(super) fn dma_buf(&self) -> Option<Result<std::os::fd::OwnedFd, Error>> {
        match self {
            GpuBacking::Device(d) => Some(d.dma_buf()),
            GpuBacking::HostPinned(_) => None,
        }
    }

    pub(super) fn export(&self) -> Result<Exported, Error> {
        match self {
            GpuBacking::Device(d) => {
                let (fd, len) = d.export()?;
                Ok(Exported { fd, len, gpu: Some(d.gpu_uuid()?) })
            }
            // Host memory, mapped into the GPUs: another process reads it as host memory.
            GpuBacking::HostPinned(p) => Ok(Exported { fd: p.read_only_fd()?, len: p.len(), gpu: None }),
        }
    }

    pub(super) fn registration_range(&self) -> (usize, usize) {
        match self {
            GpuBacking::Device(d) => (d.ptr().address() as usize, d.len()),
            GpuBacking::HostPinned(p) => (p.host().as_ptr() as usize, p.len()),
        }
    }
}

/// A `device` region's pinned twin, where a backend that writes with the CPU
/// lands the bytes (see `Region::stage_on_host`); given once.
#[derive(Debug)]
pub(crate) struct StagingTwin(std::sync::OnceLock<crate::gpu::PinnedMemory>);

impl StagingTwin {
    pub(crate) fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    /// Where the CPU writes, once the twin exists.
    pub(super) fn host(&self) -> Option<NonNull<u8>> {
        self.0.get().map(crate::gpu::PinnedMemory::host)
    }

    pub(super) fn get(&self) -> Option<&crate::gpu::PinnedMemory> {
        self.0.get()
    }

    /// Allocates the twin of `len` bytes near `gpu`, unless it exists.
    pub(super) fn give(&self, gpu: u32, len: usize, region: &str) -> Result<(), Error> {
        if self.0.get().is_some() {
            return Ok(());
        }
        let twin = crate::gpu::PinnedMemory::near_gpu(gpu, len)
            .map_err(|e| Error::new(e.status, format!("staging memory for region \"{region}\": {}", e.message)))?;
        let _ = self.0.set(twin);
        Ok(())
    }
}

/// Free memory on `gpu`, as its driver reports it; `None` without a driver or that GPU.
pub(crate) fn free_device_memory(gpu: u32) -> Option<usize> {
    crate::gpu::memory_info(gpu).ok().map(|(free, _)| free)
}
