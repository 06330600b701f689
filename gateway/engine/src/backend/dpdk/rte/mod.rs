//! The DPDK calls the backend makes, with their safety reasoning: EAL once
//! per process, Ethernet ports and their queues, mempools over our regions.
//! This is the backend's only `unsafe` code; nothing above it sees a raw
//! DPDK pointer.

#![allow(unsafe_code)]

mod eal;
mod ethdev;
mod flow;
mod mempool;
mod staging;
mod timestamp;

pub(crate) use eal::{Eal, EalArgs};
pub(crate) use ethdev::{EthPort, PortCounters, Received, RxMbufs, RxPools, TxMbufs};
pub(crate) use flow::{InstalledFlow, Traffic};
pub(crate) use mempool::Mempool;
use staging::StagingPool;
pub(crate) use timestamp::{TimestampField, TimestampSource};

/// Makes the calling worker thread an EAL thread, so mempool operations
/// use a per-lcore cache; without a free lcore id it works uncached.
pub(crate) fn register_thread() {
    // SAFETY: EAL is initialised (a port exists); registers only this thread.
    if unsafe { dpdk_sys::rte_thread_register() } != 0 {
        tracing::debug!("no EAL lcore left for this worker: its mempool access is uncached ({})", last_error());
    }
}

/// Mempool names must be unique in the process, across engines.
fn unique_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// DPDK's last error number (`rte_errno`) with its text.
fn last_error() -> String {
    errno_text(errno())
}

/// DPDK's last error number (`rte_errno`) of this thread.
fn errno() -> i32 {
    // SAFETY: reads EAL's per-thread error number.
    unsafe { dpdk_sys::daqiri_errno() }
}

/// The text of a DPDK error number (or negated errno return value).
fn errno_text(errno: i32) -> String {
    let errno = errno.abs();
    // SAFETY: rte_strerror returns a static or thread-local NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(dpdk_sys::rte_strerror(errno)) };
    format!("{} (errno {errno})", text.to_string_lossy())
}
