//! One CUDA context per GPU for the whole process (the device's primary
//! context, shared with any CUDA library the application uses).

#![allow(unsafe_code)]

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaStream};

use super::cuda_error;
use crate::error::{Error, Status};

/// GPUs this machine shows to CUDA; an error says why none can be used.
pub fn gpu_count() -> Result<usize, Error> {
    require_driver()?;
    let count = CudaContext::device_count().map_err(|e| cuda_error("counting GPUs", e))?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// A new stream on GPU `ordinal`, for the application's own work (see
/// [`Engine::set_reorder_cuda_stream`](crate::Engine::set_reorder_cuda_stream)).
pub fn new_stream(ordinal: u32) -> Result<Arc<CudaStream>, Error> {
    context(ordinal)?.new_stream().map_err(|e| cuda_error(format!("creating a stream on GPU {ordinal}"), e))
}

/// A stream the application made with CUDA's runtime or driver API (a
/// `cudaStream_t`, as DAQIRI's `set_reorder_cuda_stream` takes it) on the
/// primary context of one of the GPUs, borrowed: the engine never destroys
/// it. Null is the legacy default stream of GPU 0.
///
/// # Safety
///
/// `stream` is null or a live stream, and stays alive while the returned
/// wrapper (or a plan given it) is used.
pub unsafe fn borrowed_stream(stream: cudarc::driver::sys::CUstream) -> Result<Arc<CudaStream>, Error> {
    if stream.is_null() {
        // SAFETY: the null stream is every context's legacy default stream.
        return Ok(unsafe { context(0)?.wrap_borrowed_stream(stream) });
    }
    let mut owner = std::ptr::null_mut();
    // SAFETY: a live stream by this function's contract; `owner` is writable.
    unsafe { cudarc::driver::sys::cuStreamGetCtx(stream, &mut owner) }
        .result()
        .map_err(|e| cuda_error("asking which context a stream belongs to", e))?;
    for ordinal in 0..gpu_count()? as u32 {
        let ctx = context(ordinal)?;
        if ctx.cu_ctx() == owner {
            // SAFETY: a live stream of this context, by this function's contract.
            return Ok(unsafe { ctx.wrap_borrowed_stream(stream) });
        }
    }
    Err(Error::new(
        Status::InvalidParameter,
        "the stream belongs to a CUDA context that is no GPU's primary context: create it with cudaStreamCreate (the runtime uses the primary context) or on cuDevicePrimaryCtxRetain's context",
    ))
}

/// Makes GPU `ordinal`'s context current on the calling thread, for threads
/// that hand device memory to a library which expects one (cuFile).
pub fn bind_thread(ordinal: u32) -> Result<(), Error> {
    context(ordinal)?.bind_to_thread().map_err(|e| cuda_error(format!("binding GPU {ordinal} to a thread"), e))
}

/// Bytes of GPU `ordinal`'s memory free now, every process's allocations
/// counted, and its size.
pub fn memory_info(ordinal: u32) -> Result<(usize, usize), Error> {
    context(ordinal)?.mem_get_info().map_err(|e| cuda_error(format!("reading GPU {ordinal}'s free memory"), e))
}

/// The NUMA node GPU `ordinal` sits on, as its PCI device says; node 0 when
/// the kernel does not tell (a single-node machine says -1).
pub(crate) fn numa_node(ordinal: u32) -> u32 {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
    };
    let Ok(ctx) = context(ordinal) else { return 0 };
    let id = |attribute| ctx.attribute(attribute).ok();
    let (Some(domain), Some(bus), Some(device)) = (
        id(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
        id(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
        id(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
    ) else {
        return 0;
    };
    std::fs::read_to_string(format!("/sys/bus/pci/devices/{domain:04x}:{bus:02x}:{device:02x}.0/numa_node"))
        .ok()
        .and_then(|node| node.trim().parse::<u32>().ok())
        .unwrap_or(0)
}

/// The context of GPU `ordinal`, created on first use.
pub(crate) fn context(ordinal: u32) -> Result<Arc<CudaContext>, Error> {
    static CONTEXTS: Mutex<Vec<(u32, Arc<CudaContext>)>> = Mutex::new(Vec::new());
    let mut contexts = CONTEXTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ctx)) = contexts.iter().find(|(o, _)| *o == ordinal) {
        return Ok(Arc::clone(ctx));
    }
    let count = gpu_count()?;
    if ordinal as usize >= count {
        return Err(Error::new(
            Status::InvalidParameter,
            format!("GPU {ordinal} does not exist: this machine has {count} (affinity counts from 0)"),
        ));
    }
    let ctx = CudaContext::new(ordinal as usize).map_err(|e| cuda_error(format!("opening GPU {ordinal}"), e))?;
    contexts.push((ordinal, Arc::clone(&ctx)));
    Ok(ctx)
}

/// `NOT_SUPPORTED` unless the NVIDIA driver library can be loaded.
pub(super) fn require_driver() -> Result<(), Error> {
    // SAFETY: looks the library up by name and keeps it loaded for the
    // process; it has no precondition. cudarc panics on a missing library
    // where it is first used, so this check comes before any other call.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::new(
            Status::NotSupported,
            "GPU memory and GPU reorder need the NVIDIA driver (libcuda.so), which this machine does not have",
        ))
    }
}
