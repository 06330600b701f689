//! GPU memory for regions and for callers: device memory (`kind: device`)
//! and page-locked host memory mapped for the GPU (`kind: host_pinned`).
//! Allocated through the driver API directly, so the engine owns plain
//! addresses that bursts can carry; freed on drop.

#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{CudaContext, result, sys};

use super::shareable::{self, Shareable};
use super::{context, cuda_error};
use crate::error::{Error, Status};
use crate::memory::{DevicePtr, DeviceSlice, Mapping};

/// Device memory on one GPU, owned.
#[derive(Debug)]
pub struct DeviceMemory {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    len: usize,
    /// Set where another process can map it (see [`DeviceMemory::export`]).
    shareable: Option<Shareable>,
}

impl DeviceMemory {
    /// `len` zeroed bytes on GPU `gpu`, for the engine alone.
    pub(crate) fn new(gpu: u32, len: usize) -> Result<Self, Error> {
        Self::allocate(gpu, len, false)
    }

    /// `len` zeroed bytes on GPU `gpu` for a region, which consumers in
    /// other processes may map (see [`export`](Self::export)) where the GPU
    /// can share memory; the engine's own memory elsewhere.
    pub(crate) fn for_region(gpu: u32, len: usize) -> Result<Self, Error> {
        Self::allocate(gpu, len, true)
    }

    fn allocate(gpu: u32, len: usize, try_shareable: bool) -> Result<Self, Error> {
        let ctx = context::context(gpu)?;
        let doing = || format!("allocating {len} bytes on GPU {gpu}");
        ctx.bind_to_thread().map_err(|e| cuda_error(doing(), e))?;
        let shared = if try_shareable { Shareable::allocate(&ctx, len)? } else { None };
        let (ptr, shareable) = match shared {
            Some((ptr, memory)) => (ptr, Some(memory)),
            None => {
                // Whole host pages, so that the allocation can be exported
                // as a dma-buf (see `dma_buf`), which maps pages.
                let pages = len.max(1).next_multiple_of(PAGE);
                // SAFETY: the context is current on this thread (bound
                // above); the allocation is freed once, on drop.
                (unsafe { result::malloc_sync(pages) }.map_err(|e| cuda_error(doing(), e))?, None)
            }
        };
        let memory = Self { ctx, ptr, len, shareable };
        // SAFETY: `ptr` is `len` bytes just allocated in this context, zeroed
        // before anyone sees them.
        unsafe { result::memset_d8_sync(ptr, 0, len) }.map_err(|e| cuda_error(doing(), e))?;
        Ok(memory)
    }

    /// Bytes mapped from `ptr`: whole pages, or whole allocation granules
    /// for shareable memory (what a dma-buf or another process maps).
    fn mapped_len(&self) -> usize {
        self.shareable.as_ref().map_or(self.len.max(1).next_multiple_of(PAGE), Shareable::size)
    }

    /// A new descriptor of the memory for another process, which maps
    /// [`mapped_len`](Self::mapped_len) bytes of it; `NOT_SUPPORTED` where
    /// the GPU could not make it shareable.
    pub(crate) fn export(&self) -> Result<(std::os::fd::OwnedFd, usize), Error> {
        let memory = self.shareable.as_ref().ok_or_else(|| shareable::not_shareable(self.gpu()))?;
        Ok((memory.export()?, memory.size()))
    }

    /// The GPU's UUID (`GPU-...`, as `nvidia-smi -L` writes it).
    pub(crate) fn gpu_uuid(&self) -> Result<String, Error> {
        shareable::uuid(&self.ctx)
    }

    /// Where the memory starts in the GPU's address space.
    pub fn ptr(&self) -> DevicePtr {
        DevicePtr::new(self.ptr)
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes are allocated.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The GPU the memory is on.
    pub fn gpu(&self) -> u32 {
        self.ctx.ordinal() as u32
    }

    /// The memory as a dma-buf (whole pages from its start), for a device
    /// that registers it (an RDMA device through `ibv_reg_dmabuf_mr`); the
    /// importer keeps its own reference, so the descriptor may be closed
    /// once imported. `NOT_SUPPORTED` where the GPU's driver exports none
    /// (it needs NVIDIA's open kernel modules).
    pub fn dma_buf(&self) -> Result<std::os::fd::OwnedFd, Error> {
        use cudarc::driver::sys::{CUdevice_attribute, CUmemRangeHandleType};
        let gpu = self.gpu();
        let doing = || format!("exporting {} bytes of GPU {gpu} as a dma-buf", self.len);
        let supported = self.ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
        if supported.map_err(|e| cuda_error(doing(), e))? == 0 {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "GPU {gpu}'s driver exports no dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: it needs NVIDIA's open kernel modules), so no RDMA device can register its memory"
                ),
            ));
        }
        self.ctx.bind_to_thread().map_err(|e| cuda_error(doing(), e))?;
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: the range is this allocation's, in whole pages (see `new`);
        // `fd` receives a new descriptor that we own.
        let exported = unsafe {
            sys::cuMemGetHandleForAddressRange(
                (&raw mut fd).cast(),
                self.ptr,
                self.mapped_len(),
                CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        };
        exported.result().map_err(|e| cuda_error(doing(), e))?;
        // SAFETY: CUDA returned a descriptor of its own making, ours to close.
        Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
    }
}

/// The host page size a dma-buf maps (4 KiB on x86-64 and the default on aarch64).
const PAGE: usize = 4096;

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        let freed =
            self.ctx.bind_to_thread().map_err(|e| format!("{e:?}")).and_then(|()| match self.shareable.take() {
                // SAFETY: `ptr` is where `Shareable::allocate` mapped it, freed
                // only here; nothing holds it once its owner drops.
                Some(memory) => unsafe { memory.free(self.ptr) }.map_err(|e| format!("{e:?}")),
                // SAFETY: `ptr` came from `malloc_sync` in this context and is
                // freed only here.
                None => unsafe { result::free_sync(self.ptr) }.map_err(|e| format!("{e:?}")),
            });
        if let Err(error) = freed {
            tracing::warn!(gpu = self.gpu(), bytes = self.len, error, "freeing GPU memory failed");
        }
    }
}

// SAFETY: a device address is a number; the context is thread-safe and is
// bound to whichever thread frees the memory.
unsafe impl Send for DeviceMemory {}
// SAFETY: shared references only read the address and length.
unsafe impl Sync for DeviceMemory {}

/// Page-locked host memory on one NUMA node, mapped into every GPU's
/// address space. The pages are the engine's own mapping, bound to the
/// node before they are faulted in and then registered with CUDA:
/// `cuMemHostAlloc` picks no node, and its pinned pages cannot be moved.
#[derive(Debug)]
pub struct PinnedMemory {
    ctx: Arc<CudaContext>,
    device: sys::CUdeviceptr,
    /// Unregistered in `drop`, unmapped after it (fields drop last).
    pages: Mapping,
}

impl PinnedMemory {
    /// `len` zeroed bytes on NUMA node `node`, as a `host_pinned` region's
    /// `affinity` places them (DAQIRI's meaning), registered through GPU 0:
    /// portable memory is mapped into every GPU's address space alike.
    pub(crate) fn on_node(node: u32, len: usize) -> Result<Self, Error> {
        Self::register(0, node, len)
    }

    /// `len` zeroed bytes on GPU `gpu`'s NUMA node, for the engine's own
    /// staging and tables of that GPU.
    pub(crate) fn near_gpu(gpu: u32, len: usize) -> Result<Self, Error> {
        Self::register(gpu, context::numa_node(gpu), len)
    }

    fn register(gpu: u32, node: u32, len: usize) -> Result<Self, Error> {
        let pages = Mapping::host(len, node).map_err(|e| {
            // As for `host` regions: a node that does not exist is refused, a shortage is one.
            let status = if e.kind() == std::io::ErrorKind::Unsupported {
                Status::NotSupported
            } else {
                Status::NoFreePacketBuffers
            };
            Error::new(status, format!("cannot map {len} bytes of host memory on NUMA node {node}: {e}"))
        })?;
        let ctx = context::context(gpu)?;
        let doing = || format!("pinning {len} bytes of host memory on NUMA node {node} for the GPUs");
        ctx.bind_to_thread().map_err(|e| cuda_error(doing(), e))?;
        let host = pages.base().as_ptr().cast();
        let flags = sys::CU_MEMHOSTREGISTER_DEVICEMAP | sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: the context is current; `host` is `pages.len()` bytes of a
        // live page-aligned mapping that outlives the registration (drop
        // unregisters before the mapping goes).
        unsafe { sys::cuMemHostRegister_v2(host, pages.len(), flags) }.result().map_err(|e| cuda_error(doing(), e))?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was registered with DEVICEMAP just above.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }.result();
        let pinned = Self { ctx, device, pages };
        mapped.map_err(|e| cuda_error(doing(), e))?;
        Ok(pinned)
    }

    /// Where the CPU reads the first byte.
    pub fn host(&self) -> NonNull<u8> {
        self.pages.base()
    }

    /// The GPU whose context registered the memory (every GPU maps it).
    pub fn gpu(&self) -> u32 {
        self.ctx.ordinal() as u32
    }

    /// Where a GPU reads the first byte.
    pub fn device(&self) -> DevicePtr {
        DevicePtr::new(self.device)
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether no bytes are allocated.
    pub fn is_empty(&self) -> bool {
        self.pages.len() == 0
    }

    /// A descriptor of the pages that maps only for reading, for another process.
    pub(crate) fn read_only_fd(&self) -> Result<std::os::fd::OwnedFd, Error> {
        self.pages.read_only_fd_named()
    }

    /// The bytes, for the CPU: the caller must know no GPU work is using them.
    pub(crate) fn host_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping's bytes are this allocation's, and `&mut self`
        // makes this the only reference to them on the host.
        unsafe { std::slice::from_raw_parts_mut(self.pages.base().as_ptr(), self.pages.len()) }
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        let host = self.pages.base().as_ptr().cast();
        // SAFETY: `host` was registered in `register` and is unregistered
        // only here, before its mapping is unmapped.
        let unpinned = self.ctx.bind_to_thread().and_then(|()| unsafe { sys::cuMemHostUnregister(host) }.result());
        if let Err(e) = unpinned {
            tracing::warn!(bytes = self.len(), error = ?e, "unpinning host memory failed");
        }
    }
}

// SAFETY: the allocation is plain memory; who may touch which bytes is
// decided by the region's buffer tokens, as for host mappings.
unsafe impl Send for PinnedMemory {}
// SAFETY: as above.
unsafe impl Sync for PinnedMemory {}

/// Device memory for callers outside the engine (tests, benchmarks, the
/// application's own staging): filled from and read back to the host.
#[derive(Debug)]
pub struct DeviceBuffer {
    memory: DeviceMemory,
}

impl DeviceBuffer {
    /// `len` zeroed bytes on GPU `gpu`.
    pub fn zeroed(gpu: u32, len: usize) -> Result<Self, Error> {
        Ok(Self { memory: DeviceMemory::new(gpu, len)? })
    }

    /// `len` zeroed bytes on GPU `gpu`, allocated as a `device` region's
    /// are: shareable with another process where the GPU can (whole
    /// allocation granules).
    pub fn zeroed_as_region(gpu: u32, len: usize) -> Result<Self, Error> {
        Ok(Self { memory: DeviceMemory::for_region(gpu, len)? })
    }

    /// A copy of `bytes` on GPU `gpu`.
    pub fn from_host(gpu: u32, bytes: &[u8]) -> Result<Self, Error> {
        let buffer = Self::zeroed(gpu, bytes.len())?;
        buffer.memory.ctx.bind_to_thread().map_err(|e| cuda_error("copying to the GPU", e))?;
        // SAFETY: the allocation holds `bytes.len()` bytes; the copy is synchronous.
        unsafe { result::memcpy_htod_sync(buffer.memory.ptr, bytes) }
            .map_err(|e| cuda_error("copying to the GPU", e))?;
        Ok(buffer)
    }

    /// The bytes, copied back to the host (after all work on the GPU is done).
    pub fn to_host(&self) -> Result<Vec<u8>, Error> {
        copy_to_host(self.memory.gpu(), self.slice(0, self.len()))
    }

    /// Where the buffer starts in the GPU's address space.
    pub fn ptr(&self) -> DevicePtr {
        self.memory.ptr()
    }

    /// `len` bytes from `offset`, for device code; panics past the end.
    pub fn slice(&self, offset: usize, len: usize) -> DeviceSlice<'_> {
        assert!(offset + len <= self.len(), "{len} bytes at {offset} are past the buffer's {}", self.len());
        DeviceSlice::new(self.ptr().offset(offset), len)
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.memory.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.memory.len == 0
    }

    /// The buffer as a dma-buf (see [`DeviceMemory::dma_buf`]).
    pub fn dma_buf(&self) -> Result<std::os::fd::OwnedFd, Error> {
        self.memory.dma_buf()
    }
}

/// The bytes of `slice` (device memory, or pinned memory at its device
/// address), copied to the host once all work on GPU `gpu` is done: for
/// tests and tools that check what kernels wrote, not for the data path.
pub fn copy_to_host(gpu: u32, slice: DeviceSlice<'_>) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; slice.len()];
    let ctx = context::context(gpu)?;
    ctx.bind_to_thread().and_then(|()| ctx.synchronize()).map_err(|e| cuda_error("copying from the GPU", e))?;
    // SAFETY: the slice's lifetime keeps its `len` bytes allocated (a
    // burst or buffer lends it); the copy is synchronous.
    unsafe { result::memcpy_dtoh_sync(&mut out, slice.ptr().address()) }
        .map_err(|e| cuda_error("copying from the GPU", e))?;
    Ok(out)
}
