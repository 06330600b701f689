//! Region memory mappings, plain or hugetlb-backed: a shared mapping of a
//! memory file (`memfd_create`) of the process's own, so that consumers in
//! other processes can map the very pages, read-only, from a descriptor
//! handed to them (see [`Mapping::read_only_fd`]). The only place the
//! engine calls `mmap`; everything above works with [`Mapping`] slices.
//!
//! A read-only descriptor alone guards nothing: whoever holds it can reopen
//! the file read-write through `/proc/self/fd` (or, as root, map it through
//! `/proc/PID/map_files`). So once the engine's own mapping is made, the file
//! is sealed ([`SEALS`]): no new writable mapping, no `write`, no resize or
//! hole by any descriptor of it, however opened; only the mapping made
//! before the seal writes.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// Bytes faulted in, or unmapped, per call on ordinary pages: tens of
/// milliseconds of work under the process's mmap lock (hugetlb takes a
/// multiple of its page size).
const LOCKED_CHUNK: usize = 64 << 20;

/// A shared mapping of a memory file of its own, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
    /// Bytes per populating or unmapping call (see [`LOCKED_CHUNK`]).
    chunk: usize,
    /// The memory file: only this process writes it.
    file: OwnedFd,
}

// SAFETY: the mapping is plain memory owned by this value; access to its bytes
// is coordinated by the buffer pool, which hands each buffer to one owner.
unsafe impl Send for Mapping {}
// SAFETY: as above; `Mapping` itself exposes only the base pointer.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of ordinary memory on NUMA node `node`, faulted in
    /// now: a page fault per first-touched buffer on the data path costs
    /// more than the packet.
    pub(crate) fn host(len: usize, node: u32) -> io::Result<Self> {
        Self::map(len, 0, node, LOCKED_CHUNK)
    }

    /// Maps `len` bytes backed by the default hugepage size on NUMA node
    /// `node` and faults them in now, so a shortage shows at init rather than
    /// as SIGBUS on the data path.
    pub(crate) fn hugetlb(len: usize, node: u32) -> io::Result<Self> {
        let page = super::hugepages::HugepageInfo::read().map_or(2 << 20, |info| info.page_size as usize);
        Self::map(len.next_multiple_of(page), libc::MFD_HUGETLB, node, LOCKED_CHUNK.next_multiple_of(page))
    }

    fn map(len: usize, file_flags: libc::c_uint, node: u32, chunk: usize) -> io::Result<Self> {
        let len = len.max(1);
        let file = memory_file(len, file_flags)?;
        // SAFETY: a fresh shared mapping of a file nothing else maps aliases
        // no Rust object; the arguments are valid for mmap and the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // From here on, dropping `mapping` unmaps on every error path.
        let mapping = Self { base, len, chunk, file };
        // Packet pools can be gigabytes: keep them out of core dumps and out
        // of a forked child (a NIC or device may hold their physical pages).
        // The distinct flags also keep the pool its own entry in /proc/PID/smaps.
        for advice in [libc::MADV_DONTDUMP, libc::MADV_DONTFORK] {
            // SAFETY: advises on exactly the range just mapped.
            if unsafe { libc::madvise(ptr, len, advice) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        bind_to_node(ptr, len, node)?;
        seal(&mapping.file)?;
        // Fault every page in now, on the node just bound, a chunk per call:
        // each call holds the process's mmap lock, and one call over
        // gigabytes would stall every other thread that maps memory (the
        // admin API's health probes among them) for the whole allocation.
        for (start, chunk) in chunks(len, chunk) {
            // SAFETY: populates part of the range just mapped, which nothing reads yet.
            if unsafe { libc::madvise(ptr.cast::<u8>().add(start).cast(), chunk, libc::MADV_POPULATE_WRITE) } != 0 {
                let e = io::Error::last_os_error();
                // An allocation failure: for hugetlb, too few pages.
                return Err(if e.raw_os_error() == Some(libc::EFAULT) {
                    io::Error::from_raw_os_error(libc::ENOMEM)
                } else {
                    e
                });
            }
            let_lock_waiters_run();
        }
        Ok(mapping)
    }

    /// Start of the mapping.
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// [`read_only_fd`](Self::read_only_fd), its failure an engine error.
    pub(crate) fn read_only_fd_named(&self) -> Result<OwnedFd, crate::error::Error> {
        self.read_only_fd().map_err(|e| {
            crate::error::Error::new(crate::error::Status::InternalError, format!("a descriptor of the memory: {e}"))
        })
    }

    /// A new descriptor of the memory file that only reads: a process it is
    /// handed to can map the pages to read, and not to write, by this
    /// descriptor or any it reopens (the file is sealed, see [`SEALS`]).
    pub(crate) fn read_only_fd(&self) -> io::Result<OwnedFd> {
        let path = std::ffi::CString::new(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
            .expect("no NUL in a path of digits");
        // SAFETY: opens a path we built; the result is checked and owned below.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened, owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// What a region's memory file is sealed against once the engine maps it:
/// growing, shrinking (a consumer's `ftruncate` would make the engine's own
/// accesses fault), any writable mapping or `write` made after the seal, and
/// further seals. The engine's mapping, made before, stays writable.
pub(crate) const SEALS: libc::c_int =
    libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_FUTURE_WRITE | libc::F_SEAL_SEAL;

/// Seals a region's memory file (see [`SEALS`]) and leaves its mode to the
/// owner's reading alone, so no other user can even reopen it.
fn seal(file: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain calls on a descriptor we own; results are checked.
    unsafe {
        if libc::fchmod(file.as_raw_fd(), 0o400) != 0 || libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, SEALS) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A memory file of `len` bytes (`file_flags`: hugetlb or not), close-on-exec,
/// that can be sealed.
fn memory_file(len: usize, file_flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and valid flags; the result is checked.
    let fd = unsafe {
        libc::memfd_create(c"daqiri-region".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING | file_flags)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just made, owned by nothing else.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sizes the file just made.
    if unsafe { libc::ftruncate(file.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Binds a fresh mapping's pages to NUMA node `node` (the region's
/// `affinity`). A single-node machine has nothing to bind; a node that does
/// not exist is refused rather than ignored.
fn bind_to_node(ptr: *mut libc::c_void, len: usize, node: u32) -> io::Result<()> {
    let nodes = numa_nodes();
    if !nodes.contains(&node) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("NUMA node {node} does not exist here (nodes: {nodes:?}); set affinity to one of them"),
        ));
    }
    if nodes.len() < 2 {
        return Ok(());
    }
    let mask: [libc::c_ulong; 16] = std::array::from_fn(|word| {
        if node as usize / libc::c_ulong::BITS as usize == word { 1 << (node % libc::c_ulong::BITS) } else { 0 }
    });
    const MPOL_BIND: libc::c_long = 2;
    const MPOL_MF_STRICT: libc::c_long = 1;
    // SAFETY: mbind reads `mask` (16 words, maxnode bits) and changes only the
    // policy of the range just mapped.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            mask.len() as libc::c_ulong * libc::c_ulong::BITS as libc::c_ulong,
            MPOL_MF_STRICT,
        )
    };
    if rc != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// NUMA nodes the kernel reports; `[0]` on a kernel without NUMA.
pub(crate) fn numa_nodes() -> Vec<u32> {
    let mut nodes: Vec<u32> = std::fs::read_dir("/sys/devices/system/node")
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok()).collect())
        .unwrap_or_default();
    if nodes.is_empty() {
        nodes.push(0);
    }
    nodes.sort_unstable();
    nodes
}

/// Pauses between two chunks so a thread woken for the mmap lock takes it.
/// Without the pause the next chunk's call takes the lock again before the
/// woken thread runs: the admin API's worker, freeing memory, waited out
/// 20 chunks (0.5-1 s) of a 4 GiB populate; with it, 30 ms. The pause costs
/// 13 ms over 4 GiB.
fn let_lock_waiters_run() {
    std::thread::sleep(std::time::Duration::from_micros(200));
}

/// `(start, len)` of each `chunk`-byte piece of `len` bytes, the last shorter.
fn chunks(len: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len).step_by(chunk).map(move |start| (start, chunk.min(len - start)))
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // A chunk per call, for the reason `map` populates a chunk per call:
        // unmapping gigabytes at once holds the mmap lock as long.
        for (start, chunk) in chunks(self.len, self.chunk) {
            // SAFETY: each chunk lies in the mapping created in `map` (hugetlb
            // chunks are whole pages), and every buffer borrowed from it has
            // been returned (pools outlive bursts through `Arc`).
            unsafe {
                libc::munmap(self.base.as_ptr().add(start).cast(), chunk);
            }
            let_lock_waiters_run();
        }
    }
}
