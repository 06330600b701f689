//! The gateway's GPU memory (`device` regions) in this process: imported
//! from the descriptor the welcome carries (a CUDA shareable handle) and
//! mapped read-only on the same GPU, found by its UUID. cudarc loads
//! `libcuda` when first asked, so a client built with `cuda` runs on a
//! machine without a GPU until a subscription names GPU memory.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use cudarc::driver::sys::{self, CUmemAccess_flags, CUmemAllocationHandleType, CUmemLocationType};
use cudarc::driver::{CudaContext, result};

use crate::error::Error;

/// A region of the gateway's GPU memory, mapped for reading; unmapped on drop.
#[derive(Debug)]
pub(crate) struct Imported {
    ctx: Arc<CudaContext>,
    handle: sys::CUmemGenericAllocationHandle,
    ptr: sys::CUdeviceptr,
    size: usize,
}

impl Imported {
    /// Imports `size` bytes of GPU `uuid`'s memory from `fd`.
    pub(crate) fn open(fd: &OwnedFd, size: usize, uuid: &str) -> Result<Self, Error> {
        let ordinal = find_gpu(uuid)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| gpu_error(format!("opening GPU {ordinal} ({uuid})"), e))?;
        let doing = || format!("mapping {size} bytes of the gateway's memory on {uuid}");
        ctx.bind_to_thread().map_err(|e| gpu_error(doing(), e))?;
        let mut handle = 0;
        // SAFETY: a POSIX handle is passed as the descriptor's number;
        // CUDA takes its own reference, so `fd` may close after this.
        unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                fd.as_raw_fd() as usize as *mut std::ffi::c_void,
                CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        }
        .result()
        .map_err(|e| gpu_error(doing(), e))?;
        let mut imported = Self { ctx, handle, ptr: 0, size };
        // SAFETY: reserves a fresh range of `size` bytes at an address CUDA
        // picks; freed on drop, like the mapping below.
        unsafe { sys::cuMemAddressReserve(&mut imported.ptr, size, 0, 0, 0) }
            .result()
            .map_err(|e| gpu_error(doing(), e))?;
        // SAFETY: the range just reserved, the whole allocation imported.
        unsafe { sys::cuMemMap(imported.ptr, size, 0, handle, 0) }.result().map_err(|e| gpu_error(doing(), e))?;
        let read_only = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: imported.ctx.cu_device(),
            },
            flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READ,
        };
        // SAFETY: the range was mapped just above.
        unsafe { sys::cuMemSetAccess(imported.ptr, size, &read_only, 1) }
            .result()
            .map_err(|e| gpu_error(doing(), e))?;
        Ok(imported)
    }

    /// `len` bytes at `offset`, where they lie inside the mapping.
    pub(crate) fn segment(&self, offset: u64, len: u32) -> Option<GpuSegment<'_>> {
        let end = offset.checked_add(u64::from(len))?;
        (end <= self.size as u64).then_some(GpuSegment { region: self, ptr: self.ptr + offset, len: len as usize })
    }
}

impl Drop for Imported {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the range and handle are this value's, and nothing borrows
        // them past it (segments borrow the subscription). Each call undoes
        // one step of `open` and is harmless where that step never ran.
        unsafe {
            if self.ptr != 0 {
                let _ = sys::cuMemUnmap(self.ptr, self.size);
                let _ = sys::cuMemAddressFree(self.ptr, self.size);
            }
            let _ = sys::cuMemRelease(self.handle);
        }
    }
}

// SAFETY: a device address and a handle are numbers; the context is
// thread-safe and bound to whichever thread copies or unmaps.
unsafe impl Send for Imported {}
// SAFETY: shared references only read them.
unsafe impl Sync for Imported {}

/// A packet's segment in the gateway's GPU memory, mapped read-only on GPU
/// [`device`](Self::device) of this process: kernels read it at
/// [`ptr`](Self::ptr) while its burst is held.
#[derive(Debug, Clone, Copy)]
pub struct GpuSegment<'b> {
    region: &'b Imported,
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl GpuSegment<'_> {
    /// Its first byte's device address in this process.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Its bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CUDA device (ordinal in this process) it is mapped on.
    pub fn device(&self) -> usize {
        self.region.ctx.ordinal()
    }

    /// A copy of its bytes on the host, for checks and tools; kernels
    /// read it in place.
    pub fn to_host(&self) -> Result<Vec<u8>, Error> {
        let mut out = vec![0u8; self.len];
        let ctx = &self.region.ctx;
        ctx.bind_to_thread().map_err(|e| gpu_error("copying a packet from the GPU", e))?;
        // SAFETY: `len` bytes at `ptr` lie in the mapping (checked in
        // `Imported::segment`), held while the segment borrows it.
        unsafe { result::memcpy_dtoh_sync(&mut out, self.ptr) }
            .map_err(|e| gpu_error("copying a packet from the GPU", e))?;
        Ok(out)
    }
}

/// The ordinal, in this process, of the GPU whose UUID is `uuid`.
fn find_gpu(uuid: &str) -> Result<usize, Error> {
    let wanted = parse_uuid(uuid).ok_or_else(|| Error::Protocol(format!("\"{uuid}\" is no GPU UUID")))?;
    // SAFETY: looks the library up by name; no precondition. cudarc
    // panics where a missing library is first used, so this comes first.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Gpu(format!(
            "the gateway's memory is on {uuid}, and this machine has no NVIDIA driver (libcuda.so) to map it"
        )));
    }
    result::init().map_err(|e| gpu_error("starting CUDA", e))?;
    let count = result::device::get_count().map_err(|e| gpu_error("counting GPUs", e))?;
    for ordinal in 0..count {
        let device = result::device::get(ordinal).map_err(|e| gpu_error("listing GPUs", e))?;
        let mut id = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: fills the 16 bytes of `id` for a device CUDA listed.
        unsafe { sys::cuDeviceGetUuid_v2(&mut id, device) }.result().map_err(|e| gpu_error("listing GPUs", e))?;
        if id.bytes.map(|b| b as u8) == wanted {
            return Ok(ordinal as usize);
        }
    }
    Err(Error::Gpu(format!(
        "the gateway's memory is on {uuid}, which this process does not see among its {count} GPUs (CUDA_VISIBLE_DEVICES, or the pod's GPU)"
    )))
}

/// The 16 bytes of `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn parse_uuid(uuid: &str) -> Option<[u8; 16]> {
    let hex: String = uuid.strip_prefix("GPU-")?.chars().filter(|&c| c != '-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (k, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * k..2 * k + 2)?, 16).ok()?;
    }
    Some(bytes)
}

fn gpu_error(doing: impl std::fmt::Display, error: impl std::fmt::Debug) -> Error {
    Error::Gpu(format!("{doing}: CUDA error {error:?}"))
}

#[cfg(test)]
mod tests {
    use super::parse_uuid;

    #[test]
    fn a_uuid_reads_as_nvidia_smi_writes_it() {
        let bytes = parse_uuid("GPU-0123abcd-4567-89ef-0011-223344556677").unwrap();
        assert_eq!(bytes[..4], [0x01, 0x23, 0xab, 0xcd]);
        assert_eq!(bytes[15], 0x77);
        assert_eq!(parse_uuid("0123abcd-4567-89ef-0011-223344556677"), None, "GPU- first");
        assert_eq!(parse_uuid("GPU-0123"), None, "16 bytes");
        assert_eq!(parse_uuid("GPU-zz23abcd-4567-89ef-0011-223344556677"), None, "hex");
    }
}
