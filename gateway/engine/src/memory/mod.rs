//! Memory regions: DAQIRI's named pools of fixed-size packet buffers.
//!
//! A region is one block of memory ([`Backing`]) cut into `num_bufs`
//! buffers of `buf_size` bytes, with a [`pool`] of the free ones. Taking a
//! buffer yields a [`BufToken`], the proof of ownership that the burst types
//! keep; the token goes back to the pool when the burst drops. Device memory
//! is reached only through [`DeviceSlice`], which host code cannot read.

mod backing;
mod device;
mod exported;
// Device and pinned memory; a build without CUDA has the same shape, refusing them.
#[cfg_attr(not(feature = "cuda"), path = "gpu_backing_absent.rs")]
mod gpu_backing;
mod heap;
mod host_memory;
mod hugepages;
// The table kernel-bypass backends (AF_XDP rings, RDMA work requests) park
// lent buffers in; only the AF_XDP backend uses it so far.
#[cfg_attr(not(any(test, feature = "af_xdp", feature = "rdma")), allow(dead_code))]
mod lent;
mod mapping;
mod pool;
mod region;

pub use backing::Backing;
pub use device::{DevicePtr, DeviceSlice, SegmentMemory};
pub use gpu_backing::GpuBacking;
pub(crate) use gpu_backing::free_device_memory;
pub use heap::give_back_freed_heap;
pub use host_memory::HostMemory;
pub use hugepages::HugepageInfo;
#[cfg(any(feature = "af_xdp", feature = "rdma"))]
pub(crate) use lent::LentBuffers;
pub use mapping::Mapping;
pub(crate) use mapping::numa_nodes;
#[cfg(feature = "dpdk")]
pub(crate) use pool::BufferPool;
pub(crate) use pool::PoolCache;
pub use region::Region;
pub(crate) use region::{BufToken, RegionTable};
