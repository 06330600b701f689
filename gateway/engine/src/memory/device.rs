//! Device memory as host code sees it: an address and a length, never bytes.
//!
//! A segment in GPU memory is a [`DeviceSlice`]. It has no `Deref` to
//! `[u8]`, so host code cannot read it by mistake; only device code (a
//! kernel launch, a DMA, a cuFile write) takes its pointer.

use std::marker::PhantomData;

/// An address in a device's memory space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevicePtr(u64);

impl DevicePtr {
    /// Wraps a device address (from a CUDA allocation, a dma-buf mapping).
    pub const fn new(address: u64) -> Self {
        Self(address)
    }

    /// The raw device address, for device APIs.
    pub const fn address(self) -> u64 {
        self.0
    }

    /// The address `bytes` further on.
    pub const fn offset(self, bytes: usize) -> Self {
        Self(self.0 + bytes as u64)
    }
}

/// `len` bytes of device memory, borrowed from a burst for `'a`.
///
/// Host code cannot read it: there is no indexing and no `Deref` to `[u8]`.
///
/// ```compile_fail
/// fn read_on_the_host(segment: daqiri::DeviceSlice<'_>) -> u8 {
///     segment[0] // error: DeviceSlice cannot be indexed: it is not host memory
/// }
/// ```
///
/// ```compile_fail
/// fn as_bytes<'a>(segment: &'a daqiri::DeviceSlice<'a>) -> &'a [u8] {
///     &**segment // error: DeviceSlice does not dereference to host bytes
/// }
/// ```
///
/// What device code takes is its address and length:
///
/// ```
/// fn launch_args(segment: daqiri::DeviceSlice<'_>) -> (u64, usize) {
///     (segment.ptr().address(), segment.len())
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSlice<'a> {
    ptr: DevicePtr,
    len: usize,
    borrowed: PhantomData<&'a ()>,
}

impl DeviceSlice<'_> {
    pub(crate) fn new(ptr: DevicePtr, len: usize) -> Self {
        Self { ptr, len, borrowed: PhantomData }
    }

    /// Device address of the first byte.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where a segment's bytes live.
#[derive(Debug, Clone, Copy)]
pub enum SegmentMemory<'a> {
    /// Memory the CPU can read.
    Host(&'a [u8]),
    /// GPU memory: only device code (a kernel, a DMA) can read it.
    Device(DeviceSlice<'a>),
}

impl SegmentMemory<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            SegmentMemory::Host(bytes) => bytes.len(),
            SegmentMemory::Device(slice) => slice.len(),
        }
    }

    /// Whether the segment holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
