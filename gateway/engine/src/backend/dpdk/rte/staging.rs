//! Plain DPDK mbuf pools for PMDs that receive only into mbufs of their own
//! layout: `net_af_xdp` builds its UMEM from the RX pool's memory, mbuf
//! headers and all, which a pool over our region's buffers cannot give.
//! Such a queue receives into a staging pool, and each packet is copied
//! into the queue's region (the receiver's path for mbufs of other pools).

use std::ffi::CString;
use std::ptr::NonNull;

use dpdk_sys::rte_mempool;

use crate::error::{Error, Result, Status};

/// PMDs whose RX queues need a pool of DPDK's own layout.
const OWN_LAYOUT_PMDS: &[&str] = &["net_af_xdp"];

/// DPDK's default mbuf data room (2 KiB after the 128-byte headroom), which
/// fits an AF_XDP frame in a 4 KiB page.
const DATA_ROOM: u16 = 2048 + dpdk_sys::RTE_PKTMBUF_HEADROOM as u16;

/// A DPDK-owned mbuf pool an RX queue lands in before packets are copied out.
#[derive(Debug)]
pub(crate) struct StagingPool {
    pool: NonNull<rte_mempool>,
}

// SAFETY: a DPDK mempool is multi-producer, multi-consumer.
unsafe impl Send for StagingPool {}
// SAFETY: as above.
unsafe impl Sync for StagingPool {}

impl StagingPool {
    /// Whether PMD `pmd` needs staging pools for its RX queues.
    pub(crate) fn needed_by(pmd: &str) -> bool {
        OWN_LAYOUT_PMDS.contains(&pmd)
    }

    /// A pool of `count` mbufs for RX queue `queue` of DPDK port `port`
    /// (`address`, for errors).
    pub(crate) fn new(port: u16, address: &str, queue: usize, count: u32) -> Result<Self> {
        let name = CString::new(format!("daqiri_stage_{port}_{queue}_{}", super::errors::unique_id()))
            .map_err(|_| Error::invalid("mempool name has a NUL"))?;
        // SAFETY: EAL is initialised; the name is a valid C string.
        let pool = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(name.as_ptr(), count, 256, 0, DATA_ROOM, dpdk_sys::rte_socket_id() as i32)
        };
        NonNull::new(pool).map(|pool| Self { pool }).ok_or_else(|| {
            Error::new(
                Status::GenericFailure,
                format!(
                    "DPDK port \"{}\": cannot create a staging pool of {count} mbufs for RX queue {queue}: {}",
                    address,
                    super::errors::last_error()
                ),
            )
        })
    }

    pub(super) fn raw(&self) -> *mut rte_mempool {
        self.pool.as_ptr()
    }
}

impl Drop for StagingPool {
    fn drop(&mut self) {
        // SAFETY: the port using the pool is closed and its mbufs are back.
        unsafe { dpdk_sys::rte_mempool_free(self.pool.as_ptr()) };
    }
}
