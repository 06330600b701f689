//! Starting and stopping the engine, versions.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::cstr::c_string;
use crate::status::Status;

/// The DAQIRI API release this module provides (daqiri/version.h).
pub(crate) const VERSION: &str = "2026.7.0";
pub(crate) const VERSION_PARTS: (u32, u32, u32) = (2026, 7, 0);

/// YAML text for a dict, a config-like object (`as_dict()` or `value`), or
/// `None` when `config` is a string (a path or YAML, decided by libdaqiri).
fn yaml_of(config: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if config.is_instance_of::<PyString>() {
        return Ok(None);
    }
    let dict = if config.is_instance_of::<PyDict>() {
        config.clone()
    } else if config.hasattr("as_dict")? {
        config.call_method0("as_dict")?
    } else if config.hasattr("value")? {
        config.getattr("value")?
    } else {
        return Err(PyTypeError::new_err(
            "daqiri_init takes a YAML path or text, a dict, or an object with as_dict() or value",
        ));
    };
    let py = config.py();
    // DAQIRI's dicts are the `cfg` mapping itself; the YAML nests it.
    let wrapped = if dict.contains("daqiri")? {
        dict
    } else {
        let cfg = PyDict::new(py);
        cfg.set_item("cfg", dict)?;
        let root = PyDict::new(py);
        root.set_item("daqiri", cfg)?;
        root.into_any()
    };
    let text = py.import("yaml")?.call_method1("safe_dump", (wrapped,))?;
    Ok(Some(text.extract()?))
}

/// Starts the engine from a YAML path or text, a dict, or a config-like object.
#[pyfunction]
fn daqiri_init(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Status> {
    let code = match yaml_of(config)? {
        Some(yaml) => {
            let yaml = c_string("the config", &yaml)?;
            // SAFETY: live C strings and buffers, writable locals, as the call takes them.
            py.detach(|| unsafe { daqiri_capi::daqiri_gw_init_from_yaml_string(yaml.as_ptr()) })
        }
        None => {
            let text = c_string("the config", &config.extract::<String>()?)?;
            // SAFETY: live C strings and buffers, writable locals, as the call takes them.
            py.detach(|| unsafe { daqiri_capi::daqiri_gw_init(text.as_ptr()) })
        }
    };
    Ok(Status::of(code))
}

/// Starts the engine from YAML text.
#[pyfunction]
fn daqiri_init_from_yaml_string(py: Python<'_>, yaml_string: &str) -> PyResult<Status> {
    let yaml = c_string("the config", yaml_string)?;
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    Ok(Status::of(py.detach(|| unsafe { daqiri_capi::daqiri_gw_init_from_yaml_string(yaml.as_ptr()) })))
}

/// Starts the engine from a YAML file.
#[pyfunction]
fn daqiri_init_from_yaml_file(py: Python<'_>, yaml_path: &str) -> PyResult<Status> {
    let path = c_string("the path", yaml_path)?;
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    Ok(Status::of(py.detach(|| unsafe { daqiri_capi::daqiri_gw_init_from_yaml_file(path.as_ptr()) })))
}

/// Stops the engine; bursts still held stay readable and freeable.
#[pyfunction]
fn shutdown(py: Python<'_>) {
    py.detach(|| daqiri_capi::daqiri_gw_shutdown());
}

/// Prints every queue's counters.
#[pyfunction]
fn print_stats() {
    daqiri_capi::daqiri_gw_print_stats();
}

#[pyfunction]
fn version_string() -> &'static str {
    VERSION
}

#[pyfunction]
fn version_year() -> u32 {
    VERSION_PARTS.0
}

#[pyfunction]
fn version_month() -> u32 {
    VERSION_PARTS.1
}

#[pyfunction]
fn version_patch() -> u32 {
    VERSION_PARTS.2
}

#[pyfunction]
fn abi_version() -> i32 {
    daqiri_capi::daqiri_gw_abi_version()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(daqiri_init, m)?)?;
    m.add_function(wrap_pyfunction!(daqiri_init_from_yaml_string, m)?)?;
    m.add_function(wrap_pyfunction!(daqiri_init_from_yaml_file, m)?)?;
    m.add_function(wrap_pyfunction!(shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(print_stats, m)?)?;
    m.add_function(wrap_pyfunction!(version_string, m)?)?;
    m.add_function(wrap_pyfunction!(version_year, m)?)?;
    m.add_function(wrap_pyfunction!(version_month, m)?)?;
    m.add_function(wrap_pyfunction!(version_patch, m)?)?;
    m.add_function(wrap_pyfunction!(abi_version, m)?)?;
    Ok(())
}
