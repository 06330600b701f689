//! Gives the heap a peak left behind back to the kernel.
//!
//! A gateway's captures copy packets into the heap (up to its capture
//! memory), and a restart frees an engine's burst metadata. glibc's
//! allocator keeps what was freed in its arenas for reuse, where it counts
//! against a pod's memory limit for good: a probe saw 550 MB stay after its
//! captures ended. `malloc_trim(0)` returns every whole free page of every
//! arena; callers use it after such peaks, never on the data path. (No
//! allocator crate does this for the system allocator.)
#![allow(unsafe_code)]

/// Returns the heap's free pages to the kernel (glibc; elsewhere nothing).
pub fn give_back_freed_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists, under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
