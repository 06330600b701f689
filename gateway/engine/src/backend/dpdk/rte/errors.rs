//! DPDK's error numbers as text, and names unique in the process.

/// Mempool names must be unique in the process, across engines.
pub(super) fn unique_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// DPDK's last error number (`rte_errno`) with its text.
pub(super) fn last_error() -> String {
    errno_text(errno())
}

/// DPDK's last error number (`rte_errno`) of this thread.
pub(super) fn errno() -> i32 {
    // SAFETY: reads EAL's per-thread error number.
    unsafe { dpdk_sys::daqiri_errno() }
}

/// The text of a DPDK error number (or negated errno return value).
pub(super) fn errno_text(errno: i32) -> String {
    let errno = errno.abs();
    // SAFETY: rte_strerror returns a static or thread-local NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(dpdk_sys::rte_strerror(errno)) };
    format!("{} (errno {errno})", text.to_string_lossy())
}
