//! What holds a region's bytes, and what each kind of memory offers: a host
//! address (CPU-readable), a device address (GPU-readable), or both, and the
//! range a NIC or RDMA device registers.

use std::ptr::NonNull;

use super::device::DevicePtr;
use super::mapping::Mapping;

/// The memory behind a region.
///
/// Pinned host memory and device memory come with the `cuda` feature, and
/// memory another library owns (a DPDK mempool) with its backend; this build
/// has the two kinds it can allocate itself.
#[derive(Debug)]
#[non_exhaustive]
pub enum Backing {
    /// Ordinary pages, mapped by the engine.
    Host(Mapping),
    /// Hugetlb pages, mapped by the engine.
    Hugetlb(Mapping),
}

impl Backing {
    /// Where the CPU reads the first byte; `None` for device memory.
    pub fn host_base(&self) -> Option<NonNull<u8>> {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => Some(m.base()),
        }
    }

    /// Where a device reads the first byte; `None` for memory no device maps.
    pub fn device_base(&self) -> Option<DevicePtr> {
        match self {
            Backing::Host(_) | Backing::Hugetlb(_) => None,
        }
    }

    /// Bytes backed.
    pub fn len(&self) -> usize {
        match self {
            Backing::Host(m) | Backing::Hugetlb(m) => m.len(),
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
        }
    }
}
