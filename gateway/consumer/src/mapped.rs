//! A shared mapping of a descriptor, unmapped on drop.

use std::os::fd::AsFd;
use std::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

/// `len` bytes of a descriptor, mapped shared.
#[derive(Debug)]
pub(crate) struct Mapped {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; who reads or writes which bytes is
// the ring protocol's (atomics for the counters, slots owned by one side).
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps `len` bytes of `fd`, writable where `writable`.
    pub(crate) fn new(fd: impl AsFd, len: usize, writable: bool) -> std::io::Result<Self> {
        let prot = if writable { ProtFlags::READ | ProtFlags::WRITE } else { ProtFlags::READ };
        // SAFETY: a fresh mapping at an address the kernel picks aliases no
        // Rust object; it lives until this value drops.
        let base = unsafe { rustix::mm::mmap(std::ptr::null_mut(), len.max(1), prot, MapFlags::SHARED, fd, 0)? };
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Self { base, len })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; nothing borrowed from it outlives
        // its owner (bursts borrow their subscription).
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len.max(1)) };
    }
}
