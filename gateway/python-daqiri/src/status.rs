//! `daqiri.Status`, and the message behind the last failure.

use std::ffi::CStr;

use pyo3::prelude::*;

/// DAQIRI's status codes (the values of libdaqiri's C ABI).
#[pyclass(eq, eq_int, module = "daqiri")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub(crate) enum Status {
    SUCCESS = 0,
    NULL_PTR = 1,
    NO_FREE_BURST_BUFFERS = 2,
    NO_FREE_PACKET_BUFFERS = 3,
    NOT_READY = 4,
    INVALID_PARAMETER = 5,
    NO_SPACE_AVAILABLE = 6,
    NOT_SUPPORTED = 7,
    GENERIC_FAILURE = 8,
    CONNECT_FAILURE = 9,
    INTERNAL_ERROR = 10,
}

impl Status {
    /// The status of a C ABI return code.
    pub(crate) fn of(code: i32) -> Self {
        match code {
            0 => Status::SUCCESS,
            1 => Status::NULL_PTR,
            2 => Status::NO_FREE_BURST_BUFFERS,
            3 => Status::NO_FREE_PACKET_BUFFERS,
            4 => Status::NOT_READY,
            5 => Status::INVALID_PARAMETER,
            6 => Status::NO_SPACE_AVAILABLE,
            7 => Status::NOT_SUPPORTED,
            8 => Status::GENERIC_FAILURE,
            9 => Status::CONNECT_FAILURE,
            _ => Status::INTERNAL_ERROR,
        }
    }
}

#[pymethods]
impl Status {
    fn __str__(&self) -> String {
        format!("Status.{}", status_name(*self as i32))
    }
}

fn status_name(code: i32) -> String {
    // SAFETY: status_name returns a static C string.
    unsafe { CStr::from_ptr(daqiri_capi::daqiri_gw_status_name(code)) }.to_string_lossy().into_owned()
}

/// Why the calling thread's last call failed ("" when none did).
#[pyfunction]
fn last_error() -> String {
    last_error_text()
}

/// libdaqiri's message for the calling thread's last failure.
pub(crate) fn last_error_text() -> String {
    // SAFETY: last_error returns this thread's live C string.
    unsafe { CStr::from_ptr(daqiri_capi::daqiri_gw_last_error()) }.to_string_lossy().into_owned()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Status>()?;
    m.add_function(wrap_pyfunction!(last_error, m)?)?;
    Ok(())
}
