//! What holds a region's bytes, and what each kind of memory offers: a host
//! address (CPU-readable), a device address (GPU-readable), or both, and the
//! range a NIC or RDMA device registers.

use std::ptr::NonNull;

use super::device::DevicePtr;
use super::mapping::Mapping;
#[cfg(feature = "cuda")]
use crate::gpu::{DeviceMemory, PinnedMemory};

/// The memory behind a region.
///
/// Pinned host memory and device memory come with the `cuda` feature, and
/// memory another library owns (a DPDK mempool) with its backend.
#[derive(Debug)]
#[non_exhaustive]
pub enum Backing {
    /// Ordinary pages, mapped by the engine.
    Host(Mapping),
    /// Hugetlb pages, mapped by the engine.
    Hugetlb(Mapping),
    /// GPU memory (`kind: device`): the CPU cannot read it.
    #[cfg(feature = "cuda")]
    Device(DeviceMemory),
    /// Page-locked host memory mapped for the GPU (`kind: host_pinned`).
    #[cfg(feature = "cuda")]
    HostPinned(PinnedMemory),
}

impl Backing {
    /// Where the CPU reads the first byte; `None` for device memory.
    pub fn host_base(&self) -> Option<NonNull<u8>> {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => Some(m.base()),
            #[cfg(feature = "cuda")]
            Backing::Device(_) => None,
            #[cfg(feature = "cuda")]
            Backing::HostPinned(p) => Some(p.host()),
        }
    }

    /// Where a device reads the first byte; `None` for memory no device maps.
    pub fn device_base(&self) -> Option<DevicePtr> {
        match self {
            Backing::Host(_) | Backing::Hugetlb(_) => None,
            #[cfg(feature = "cuda")]
            Backing::Device(d) => Some(d.ptr()),
            #[cfg(feature = "cuda")]
            Backing::HostPinned(p) => Some(p.device()),
        }
    }

    /// The GPU whose memory this is; `None` for host memory, pinned or not
    /// (pinned memory is mapped into every GPU alike).
    pub fn gpu(&self) -> Option<u32> {
        match self {
            Backing::Host(_) | Backing::Hugetlb(_) => None,
            #[cfg(feature = "cuda")]
            Backing::Device(d) => Some(d.gpu()),
            #[cfg(feature = "cuda")]
            Backing::HostPinned(_) => None,
        }
    }

    /// Bytes backed.
    pub fn len(&self) -> usize {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => m.len(),
            #[cfg(feature = "cuda")]
            Backing::Device(d) => d.len(),
            #[cfg(feature = "cuda")]
            Backing::HostPinned(p) => p.len(),
        }
    }

    /// Whether nothing is backed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The range a NIC or RDMA device registers: start address and length.
    pub fn registration_range(&self) -> (usize, usize) {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => (m.base().as_ptr() as usize, m.len()),
            #[cfg(feature = "cuda")]
            Backing::Device(d) => (d.ptr().address() as usize, d.len()),
            #[cfg(feature = "cuda")]
            Backing::HostPinned(p) => (p.host().as_ptr() as usize, p.len()),
        }
    }
}
