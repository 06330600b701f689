//! Anonymous memory mappings, plain or hugetlb-backed. The only place the
//! engine calls `mmap`; everything above works with [`Mapping`] slices.

use std::io;
use std::ptr::NonNull;

/// A private anonymous mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access to its bytes
// is coordinated by the buffer pool, which hands each buffer to one owner.
unsafe impl Send for Mapping {}
// SAFETY: as above; `Mapping` itself exposes only the base pointer.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of ordinary memory, faulted in now: a page fault per
    /// first-touched buffer on the data path costs more than the packet.
    pub(crate) fn host(len: usize) -> io::Result<Self> {
        Self::map(len, libc::MAP_POPULATE)
    }

    /// Maps `len` bytes backed by the default hugepage size and faults them in
    /// now, so a shortage shows at init rather than as SIGBUS on the data path.
    pub(crate) fn hugetlb(len: usize) -> io::Result<Self> {
        Self::map(len, libc::MAP_HUGETLB | libc::MAP_POPULATE)
    }

    fn map(len: usize, extra_flags: libc::c_int) -> io::Result<Self> {
        let len = len.max(1);
        // SAFETY: a fresh private anonymous mapping aliases no Rust object;
        // the arguments are valid for mmap and the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // Packet pools can be gigabytes: keep them out of core dumps. The
        // distinct flag also keeps the pool its own entry in /proc/PID/smaps.
        // SAFETY: advises on exactly the range just mapped; failure is harmless.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_DONTDUMP);
        }
        Ok(Self { base, len })
    }

    /// Start of the mapping.
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len describe exactly the mapping created in `map`, and
        // every buffer borrowed from it has been returned (pools outlive bursts
        // through `Arc`).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
