//! What holds a region's bytes, and what each kind of memory offers: a host
//! address (CPU-readable), a device address (GPU-readable), or both, and the
//! range a NIC or RDMA device registers.

use std::ptr::NonNull;

use super::device::DevicePtr;
use super::exported::Exported;
use super::gpu_backing::GpuBacking;
use super::mapping::Mapping;

/// The memory behind a region.
///
/// Pinned host memory and device memory come with the `cuda` feature (a
/// build without it has no [`GpuBacking`] value), and memory another
/// library owns (a DPDK mempool) with its backend.
#[derive(Debug)]
#[non_exhaustive]
pub enum Backing {
    /// Ordinary pages, mapped by the engine.
    Host(Mapping),
    /// Hugetlb pages, mapped by the engine.
    Hugetlb(Mapping),
    /// GPU memory (`kind: device`) or page-locked host memory mapped for the
    /// GPU (`kind: host_pinned`).
    Gpu(GpuBacking),
}

impl Backing {
    /// Where the CPU reads the first byte; `None` for device memory.
    pub fn host_base(&self) -> Option<NonNull<u8>> {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => Some(m.base()),
            Backing::Gpu(g) => g.host_base(),
        }
    }

    /// Where a device reads the first byte; `None` for memory no device maps.
    pub fn device_base(&self) -> Option<DevicePtr> {
        match self {
            Backing::Host(_) | Backing::Hugetlb(_) => None,
            Backing::Gpu(g) => Some(g.device_base()),
        }
    }

    /// The GPU whose memory this is; `None` for host memory, pinned or not
    /// (pinned memory is mapped into every GPU alike).
    pub fn gpu(&self) -> Option<u32> {
        match self {
            Backing::Host(_) | Backing::Hugetlb(_) => None,
            Backing::Gpu(g) => g.gpu(),
        }
    }

    /// Bytes backed.
    pub fn len(&self) -> usize {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => m.len(),
            Backing::Gpu(g) => g.len(),
        }
    }

    /// Whether nothing is backed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Device memory as a dma-buf, for an RDMA device to register; `None`
    /// for memory the CPU addresses (registered by its host address).
    #[cfg(feature = "rdma")]
    pub(crate) fn dma_buf(&self) -> Option<Result<std::os::fd::OwnedFd, crate::error::Error>> {
        match self {
            Backing::Host(_) | Backing::Hugetlb(_) => None,
            Backing::Gpu(g) => g.dma_buf(),
        }
    }

    /// The memory for another process to map (a consumer): `NOT_SUPPORTED`
    /// where it cannot be handed over.
    pub(crate) fn export(&self) -> Result<Exported, crate::error::Error> {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => {
                Ok(Exported { fd: m.read_only_fd_named()?, len: m.len(), gpu: None })
            }
            Backing::Gpu(g) => g.export(),
        }
    }

    /// The range a NIC or RDMA device registers: start address and length.
    pub fn registration_range(&self) -> (usize, usize) {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => (m.base().as_ptr() as usize, m.len()),
            Backing::Gpu(g) => g.registration_range(),
        }
    }
}
