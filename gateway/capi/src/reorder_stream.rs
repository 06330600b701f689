//! `set_reorder_cuda_stream`: a GPU reorder plan's kernels on the
//! application's CUDA stream, so its own work on that stream follows each
//! aggregate without a host wait.

use std::ffi::{c_char, c_void};

use daqiri::Error;

use crate::lifecycle::{text, with_engine};
use crate::status::status_of;

/// Runs reorder plan `reorder_name` of interface `interface_name` on
/// `stream` (a `cudaStream_t` of the plan's GPU; null: the legacy default
/// stream) from its next batch on. The stream must outlive the engine's use
/// of it (until `shutdown` or another stream is set).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_set_reorder_cuda_stream(
    interface_name: *const c_char,
    reorder_name: *const c_char,
    stream: *mut c_void,
) -> i32 {
    let set = text("interface_name", interface_name).and_then(|interface| {
        let plan = text("reorder_name", reorder_name)?;
        with_engine(|engine| {
            let port = engine
                .get_port_id(interface)
                .ok_or_else(|| Error::invalid(format!("no interface is named or addressed \"{interface}\"")))?;
            set_stream(engine, port, plan, stream)
        })
    });
    status_of("set_reorder_cuda_stream", set)
}

#[cfg(feature = "cuda")]
fn set_stream(engine: &daqiri::Engine, port: u16, plan: &str, stream: *mut c_void) -> daqiri::Result<()> {
    // SAFETY: a stream the caller keeps alive while the plan uses it, by
    // the contract above (as DAQIRI's).
    let stream = unsafe { daqiri::gpu::borrowed_stream(stream.cast()) }?;
    engine.set_reorder_cuda_stream(port, plan, stream)
}

#[cfg(not(feature = "cuda"))]
fn set_stream(_engine: &daqiri::Engine, _port: u16, plan: &str, _stream: *mut c_void) -> daqiri::Result<()> {
    Err(Error::new(
        daqiri::Status::NotSupported,
        format!(
            "reorder plan \"{plan}\": this libdaqiri is built without CUDA, so no plan runs on a GPU (gateway/capi/package.sh --features cuda)"
        ),
    ))
}
