//! The reorder kernels DAQIRI exports for its programs (`by_sequence_*`
//! and `gather_payloads` in `reorder.cu`), launched on a stream the
//! program owns, in that stream's context: a program built on the CUDA
//! runtime passes its own `cudaStream_t`, which is a driver `CUstream`.
//!
//! Unlike [`GpuReorder`](super::GpuReorder), which places packets whose
//! slots the CPU worked out, these kernels read each packet's sequence
//! number on the GPU, from packet addresses in a device table the program
//! filled.

#![allow(unsafe_code)]

use std::ffi::{CString, c_void};
use std::sync::Mutex;

use cudarc::driver::sys::{self, CUcontext, CUfunction, CUmodule, CUstream};
use cudarc::driver::{DriverError, result};
use daqiri_config::model::DataTypes;

use super::context::require_driver;
use super::cuda_error;
use super::reorder::{kernel_name, ptx};
use crate::error::{Error, Status};
use crate::reorder::convert::output_len;

/// Threads per block: a block places one packet.
const THREADS: u32 = 256;

/// Where each packet's sequence number and payload are, and how slots are laid out.
#[derive(Debug, Clone, Copy)]
pub struct SequenceLayout {
    /// Payload bytes from the packet's start.
    pub payload_offset: u32,
    /// Payload bytes per packet (the input).
    pub in_len: u32,
    /// Bytes between slots in the output.
    pub out_len: u32,
    /// The sequence number: bit offset from the packet's start, and width (1..=32), most significant bit first.
    pub seq_bits: (u16, u8),
    /// The batch number field, where packets carry one.
    pub batch_bits: Option<(u16, u8)>,
    /// Slots per batch: a packet's slot is its sequence number modulo this.
    pub packets_per_batch: u32,
    /// Packets whose slot is past this are skipped.
    pub max_slot: u32,
}

/// Places `count` packets into their slots of `out`, converting as `types`
/// says (`None`: the payload as it is), on `stream`; with `batch_id_out`
/// not 0, packet 0 writes the batch id there (a device `u64`).
///
/// # Safety
/// `stream` is a live stream (or null, the legacy stream of the current
/// context); `packets` is a device table of `count` packet addresses (or
/// 0s), each packet readable for the sequence and batch fields and for
/// `payload_offset + in_len` bytes; `out` has room for `max_slot + 1`
/// slots of `out_len` bytes; all stay valid until the stream reaches the kernel.
pub unsafe fn launch_by_sequence(
    stream: CUstream,
    packets: u64,
    count: u32,
    out: u64,
    layout: &SequenceLayout,
    types: Option<&DataTypes>,
    batch_id_out: u64,
) -> Result<(), Error> {
    check_layout(layout, types)?;
    let function = function(stream, &kernel_name("by_sequence", types))?;
    let (batch_offset, batch_width) = layout.batch_bits.unwrap_or((0, 0));
    let mut params = (
        packets,
        count,
        layout.payload_offset,
        layout.in_len,
        out,
        layout.out_len,
        u32::from(layout.seq_bits.0),
        u32::from(layout.seq_bits.1),
        u32::from(batch_offset),
        u32::from(batch_width),
        u32::from(layout.batch_bits.is_some()),
        layout.packets_per_batch,
        layout.max_slot,
        batch_id_out,
    );
    let mut args: [*mut c_void; 14] = [
        (&raw mut params.0).cast(),
        (&raw mut params.1).cast(),
        (&raw mut params.2).cast(),
        (&raw mut params.3).cast(),
        (&raw mut params.4).cast(),
        (&raw mut params.5).cast(),
        (&raw mut params.6).cast(),
        (&raw mut params.7).cast(),
        (&raw mut params.8).cast(),
        (&raw mut params.9).cast(),
        (&raw mut params.10).cast(),
        (&raw mut params.11).cast(),
        (&raw mut params.12).cast(),
        (&raw mut params.13).cast(),
    ];
    // SAFETY: the kernel takes (const u64*, u32 x3, u8*, u32 x8, u64*) as
    // passed, each argument a local that outlives the call (the driver
    // copies them at launch); memory validity is the caller's contract.
    unsafe { result::launch_kernel(function, (count, 1, 1), (THREADS, 1, 1), 0, stream, &mut args) }
        .map_err(|e| cuda_error("launching a reorder-by-sequence kernel", e))
}

/// Copies packet `p`'s `len` payload bytes (from `payload_offset`) to
/// `out + p * len`, for `count` packets, on `stream`.
///
/// # Safety
/// As [`launch_by_sequence`]: a live stream, a device table of `count`
/// packet addresses each readable for `payload_offset + len` bytes, and
/// `out` with room for `count * len` bytes.
pub unsafe fn launch_gather(
    stream: CUstream,
    packets: u64,
    count: u32,
    out: u64,
    len: u32,
    payload_offset: u32,
) -> Result<(), Error> {
    let function = function(stream, "gather_payloads")?;
    let mut params = (packets, count, payload_offset, len, out);
    let mut args: [*mut c_void; 5] = [
        (&raw mut params.0).cast(),
        (&raw mut params.1).cast(),
        (&raw mut params.2).cast(),
        (&raw mut params.3).cast(),
        (&raw mut params.4).cast(),
    ];
    // SAFETY: the kernel takes (const u64*, u32, u32, u32, u8*) as passed;
    // memory validity is the caller's contract.
    unsafe { result::launch_kernel(function, (count, 1, 1), (THREADS, 1, 1), 0, stream, &mut args) }
        .map_err(|e| cuda_error("launching the gather kernel", e))
}

fn check_layout(layout: &SequenceLayout, types: Option<&DataTypes>) -> Result<(), Error> {
    let invalid = |message: String| Err(Error::new(Status::InvalidParameter, message));
    if !(1..=32).contains(&layout.seq_bits.1) || layout.batch_bits.is_some_and(|(_, width)| !(1..=32).contains(&width))
    {
        return invalid(format!("sequence and batch fields are 1 to 32 bits wide, not {:?}", layout.seq_bits.1));
    }
    if layout.packets_per_batch == 0 {
        return invalid("packets_per_batch is 0".into());
    }
    let needed = match types {
        Some(types) => output_len(types, layout.in_len as usize).ok_or_else(|| {
            Error::new(
                Status::InvalidParameter,
                format!("{} payload bytes are not a whole number of {:?} samples", layout.in_len, types.input_type),
            )
        })?,
        None => layout.in_len as usize,
    };
    if (layout.out_len as usize) < needed {
        return invalid(format!(
            "output_payload_len {} is less than the {needed} bytes a slot's converted payload takes",
            layout.out_len
        ));
    }
    Ok(())
}

/// `name` in the stream's context, the kernels loaded there on first use.
fn function(stream: CUstream, name: &str) -> Result<CUfunction, Error> {
    let context = stream_context(stream)?;
    // Modules and functions by context and name: a handful per process.
    static LOADED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    static FUNCTIONS: Mutex<Vec<(usize, String, usize)>> = Mutex::new(Vec::new());
    let key = context as usize;
    let mut functions = FUNCTIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, f)) = functions.iter().find(|(c, n, _)| *c == key && n == name) {
        return Ok(*f as CUfunction);
    }
    let module = {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        match loaded.iter().find(|(c, _)| *c == key) {
            Some((_, module)) => *module as CUmodule,
            None => {
                let module = in_context(context, load_module)??;
                loaded.push((key, module as usize));
                module
            }
        }
    };
    let c_name = CString::new(name).expect("kernel names have no NUL");
    // SAFETY: `module` was loaded in this context and is never unloaded.
    let f = unsafe { result::module::get_function(module, c_name) }
        .map_err(|e| cuda_error(format!("finding kernel {name}"), e))?;
    functions.push((key, name.to_owned(), f as usize));
    Ok(f)
}

/// Compiles (once per architecture) and loads the kernels into the current context.
fn load_module() -> Result<CUmodule, Error> {
    let mut device = 0;
    // SAFETY: a context is current (in_context), and `device` is writable.
    unsafe { sys::cuCtxGetDevice(&raw mut device) }.result().map_err(|e| cuda_error("reading the stream's GPU", e))?;
    let attribute = |which| {
        // SAFETY: `device` is the current context's device.
        unsafe { result::device::get_attribute(device, which) }
            .map_err(|e| cuda_error("reading the compute capability", e))
    };
    let major = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let source = CString::new(ptx((major, minor))?.to_src())
        .map_err(|_| Error::new(Status::InternalError, "NVRTC's PTX holds a NUL byte"))?;
    // SAFETY: a NUL-terminated PTX image; the driver copies it.
    unsafe { result::module::load_data(source.as_ptr().cast()) }
        .map_err(|e| cuda_error("loading the reorder kernels", e))
}

/// The context `stream` belongs to (the current one for the legacy stream).
fn stream_context(stream: CUstream) -> Result<CUcontext, Error> {
    require_driver()?;
    if stream.is_null() {
        return result::ctx::get_current()
            .map_err(|e| cuda_error("reading the current context", e))?
            .ok_or_else(|| Error::new(Status::InvalidParameter, "the default stream, but no CUDA context is current"));
    }
    let mut context: CUcontext = std::ptr::null_mut();
    // SAFETY: `stream` is live by the caller's contract; `context` is writable.
    unsafe { sys::cuStreamGetCtx(stream, &raw mut context) }
        .result()
        .map_err(|e: DriverError| cuda_error("reading the stream's context", e))?;
    Ok(context)
}

/// Runs `f` with `context` current on this thread, then restores the thread's own.
fn in_context<T>(context: CUcontext, f: impl FnOnce() -> T) -> Result<T, Error> {
    // SAFETY: a context the driver handed out for a live stream.
    unsafe { sys::cuCtxPushCurrent_v2(context) }
        .result()
        .map_err(|e| cuda_error("entering the stream's context", e))?;
    let value = f();
    let mut popped: CUcontext = std::ptr::null_mut();
    // SAFETY: pops what was pushed above.
    unsafe { sys::cuCtxPopCurrent_v2(&raw mut popped) }
        .result()
        .map_err(|e| cuda_error("leaving the stream's context", e))?;
    Ok(value)
}
