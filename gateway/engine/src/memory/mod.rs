//! Memory regions: DAQIRI's named pools of fixed-size packet buffers.
//!
//! A region is one mapping cut into `num_bufs` buffers of `buf_size` bytes,
//! with a lock-free free list. Taking a buffer yields a [`BufToken`], the
//! proof of ownership that the burst types keep; the token is the only key to
//! the buffer's bytes and goes back to the free list when the burst drops.

mod free_list;
mod hugepages;
mod mapping;
mod region;

pub use hugepages::HugepageInfo;
pub use region::Region;
pub(crate) use region::{BufToken, RegionTable};
