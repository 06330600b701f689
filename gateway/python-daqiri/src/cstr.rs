//! Python text as the C strings libdaqiri's calls take.

use std::ffi::CString;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `text` as a C string; a NUL inside it is a ValueError naming `what`.
pub(crate) fn c_string(what: &str, text: &str) -> PyResult<CString> {
    CString::new(text).map_err(|_| PyValueError::new_err(format!("{what} holds a NUL character")))
}
