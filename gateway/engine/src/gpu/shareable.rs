//! Device memory another process can map: made with CUDA's virtual memory
//! calls (`cuMemCreate`, then mapped at an address range of our own) so that
//! it exports as a file descriptor, which travels over a Unix socket
//! (`SCM_RIGHTS`) like any other. The importer maps it read-only (see
//! `daqiri-consumer`'s `gpu` module); the legacy `cuIpcGetMemHandle` route
//! could give it only read-write access, and its 64-byte handle is no
//! capability the socket's permissions guard.

#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};

use cudarc::driver::CudaContext;
use cudarc::driver::sys::{
    self, CUdevice_attribute, CUmemAccess_flags, CUmemAllocationGranularity_flags, CUmemAllocationHandleType,
    CUmemAllocationType, CUmemLocationType,
};

use super::cuda_error;
use crate::error::{Error, Status};

/// Physical memory mapped at a range reserved for it; unmapped and freed by
/// [`Shareable::free`].
#[derive(Debug)]
pub(super) struct Shareable {
    handle: sys::CUmemGenericAllocationHandle,
    /// Bytes mapped: the length asked for, in whole allocation granules.
    size: usize,
}

impl Shareable {
    /// `len` bytes on `ctx`'s GPU, mapped read-write for it at the returned
    /// address; `None` where the GPU cannot export memory as a file
    /// descriptor (then the caller allocates it the ordinary way).
    /// The context must be current on this thread.
    pub(super) fn allocate(ctx: &CudaContext, len: usize) -> Result<Option<(sys::CUdeviceptr, Self)>, Error> {
        let gpu = ctx.ordinal();
        let doing = || format!("allocating {len} shareable bytes on GPU {gpu}");
        let attribute = |a| ctx.attribute(a).map_err(|e| cuda_error(doing(), e));
        if attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)? == 0
            || attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)? == 0
        {
            return Ok(None);
        }
        let rdma = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)?;
        let mut prop = allocation_properties(ctx.cu_device());
        // An RDMA device may register it too (`DeviceMemory::dma_buf`).
        prop.allocFlags.gpuDirectRDMACapable = u8::from(rdma != 0);
        let mut granule = 0usize;
        // SAFETY: `prop` describes a pinned allocation on this device.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granule,
                &prop,
                CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(|e| cuda_error(doing(), e))?;
        let size = len.max(1).next_multiple_of(granule.max(1));
        let mut handle = 0;
        // SAFETY: creates physical memory of `size` bytes, a multiple of the
        // granularity; the handle is released in `free` (or below on failure).
        unsafe { sys::cuMemCreate(&mut handle, size, &prop, 0) }.result().map_err(|e| cuda_error(doing(), e))?;
        let memory = Self { handle, size };
        let mut ptr = 0;
        // SAFETY: reserves a fresh range of `size` bytes at an address CUDA picks.
        if let Err(e) = unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) }.result() {
            memory.release();
            return Err(cuda_error(doing(), e));
        }
        if let Err(e) = map_for(ptr, size, handle, ctx.cu_device()) {
            // SAFETY: the range reserved just above, mapped or not, and used
            // by nothing yet; unmapping what was never mapped only fails.
            let _ = unsafe { memory.free(ptr) };
            return Err(cuda_error(doing(), e));
        }
        Ok(Some((ptr, memory)))
    }

    /// Bytes mapped (whole granules): what an importer maps.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// A new descriptor of the memory, for another process to import
    /// (`cuMemImportFromShareableHandle`); closing it frees nothing.
    pub(super) fn export(&self) -> Result<OwnedFd, Error> {
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: the handle is live (released only in `free`); `fd`
        // receives a new descriptor, ours to close.
        unsafe {
            sys::cuMemExportToShareableHandle(
                (&raw mut fd).cast(),
                self.handle,
                CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        }
        .result()
        .map_err(|e| cuda_error("exporting GPU memory for another process", e))?;
        // SAFETY: a descriptor CUDA just made for us.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Unmaps the memory at `ptr` and frees it. Importers keep their own
    /// reference: the pages go once the last process lets them go.
    ///
    /// # Safety
    /// `ptr` is the address [`allocate`](Self::allocate) returned with this
    /// value, and nothing uses it any more. The context is current.
    pub(super) unsafe fn free(self, ptr: sys::CUdeviceptr) -> Result<(), sys::CUresult> {
        // SAFETY: the caller's promise; the range and handle are this value's.
        let unmapped = unsafe { sys::cuMemUnmap(ptr, self.size) };
        // SAFETY: as above.
        let freed = unsafe { sys::cuMemAddressFree(ptr, self.size) };
        self.release();
        for result in [unmapped, freed] {
            if result != sys::CUresult::CUDA_SUCCESS {
                return Err(result);
            }
        }
        Ok(())
    }

    fn release(self) {
        // SAFETY: the handle is ours, released once (this consumes it).
        let _ = unsafe { sys::cuMemRelease(self.handle) };
    }
}

/// Pinned device memory on `device` that exports as a file descriptor.
fn allocation_properties(device: sys::CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct, for which all zeroes is "nothing asked".
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type_ = CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop
}

/// Maps `handle` at `ptr` and lets `device` read and write it.
fn map_for(
    ptr: sys::CUdeviceptr,
    size: usize,
    handle: sys::CUmemGenericAllocationHandle,
    device: sys::CUdevice,
) -> Result<(), cudarc::driver::DriverError> {
    // SAFETY: `ptr` is a reserved range of `size` bytes; `handle` is at least as large.
    unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) }.result()?;
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation { type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: device },
        flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the range was mapped just above.
    unsafe { sys::cuMemSetAccess(ptr, size, &desc, 1) }.result()
}

/// GPU `ctx`'s UUID, as `nvidia-smi -L` writes it (`GPU-` and hex groups):
/// the name another process finds the same GPU by, whatever its ordinal is
/// there (`CUDA_VISIBLE_DEVICES` renumbers them).
pub(super) fn uuid(ctx: &CudaContext) -> Result<String, Error> {
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: fills the 16 bytes of `uuid` for a device CUDA gave us.
    unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, ctx.cu_device()) }
        .result()
        .map_err(|e| cuda_error(format!("reading GPU {}'s UUID", ctx.ordinal()), e))?;
    Ok(format_uuid(uuid.bytes.map(|b| b as u8)))
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn format_uuid(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// Why GPU `gpu`'s region cannot be shared: its memory was not made shareable.
pub(super) fn not_shareable(gpu: u32) -> Error {
    Error::new(
        Status::NotSupported,
        format!(
            "GPU {gpu}'s driver cannot export memory as a file descriptor (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0), so no other process can map its regions"
        ),
    )
}
