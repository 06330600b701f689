//! The Python module `daqiri`: DAQIRI's Python API, in-process over the
//! daqiri engine. Each function is the libdaqiri call of the same name
//! (gateway/capi), so C++, C and Python programs share one implementation,
//! its ownership rules and its checks: a freed or foreign burst is a status
//! and a message (`daqiri.last_error()`), never a crash. The GIL is released
//! where DAQIRI releases it (init, receive, TX allocation and send, copies,
//! writers, event waits).

use pyo3::prelude::*;

mod bursts;
mod config;
mod cstr;
mod flows;
mod lifecycle;
mod ports;
mod rdma;
mod s3;
mod status;
mod transfer;

/// Constants DAQIRI's programs use.
fn constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DAQIRI_BURST_FLAG_REORDERED", 1u32 << 28)?;
    m.add("DAQIRI_BURST_FLAG_REORDER_TIMEOUT", 1u32 << 29)?;
    m.add("MAX_NUM_SEGS", 4)?;
    m.add("IPPROTO_UDP", 17)?;
    m.add("DAQIRI_VERSION", lifecycle::VERSION)?;
    m.add("DAQIRI_VERSION_YEAR", lifecycle::VERSION_PARTS.0)?;
    m.add("DAQIRI_VERSION_MONTH", lifecycle::VERSION_PARTS.1)?;
    m.add("DAQIRI_VERSION_PATCH", lifecycle::VERSION_PARTS.2)?;
    m.add("DAQIRI_ABI_VERSION", daqiri_capi::daqiri_gw_abi_version())?;
    m.add("__version__", lifecycle::VERSION)?;
    m.add("__version_info__", lifecycle::VERSION_PARTS)?;
    m.add("__abi_version__", daqiri_capi::daqiri_gw_abi_version())?;
    Ok(())
}

#[pymodule]
fn daqiri(m: &Bound<'_, PyModule>) -> PyResult<()> {
    constants(m)?;
    status::register(m)?;
    lifecycle::register(m)?;
    config::register(m)?;
    flows::register(m)?;
    bursts::register(m)?;
    transfer::register(m)?;
    ports::register(m)?;
    rdma::register(m)?;
    s3::register(m)?;
    Ok(())
}
