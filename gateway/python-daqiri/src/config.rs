//! DAQIRI's config classes and the calls that parse into them:
//! `NetworkConfig` and what it holds (config_classes.py, run when the module
//! is imported), `parse_network_config`, `get_engine_type`. `daqiri_init`
//! takes a `NetworkConfig` through its `as_dict()`.

use std::ffi::{CStr, CString, c_char};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::cstr::c_string;
use crate::status::Status;

/// The classes' module, made once per interpreter.
static CLASSES: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

pub(crate) fn classes(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    CLASSES
        .get_or_try_init(py, || {
            let code = CString::new(include_str!("config_classes.py"))?;
            Ok::<_, PyErr>(PyModule::from_code(py, &code, c"daqiri/config_classes.py", c"daqiri._config")?.unbind())
        })
        .map(|module| module.bind(py))
}

/// One of libdaqiri's `daqiri_gw_config_parse*` calls.
type Parse = unsafe extern "C" fn(*const c_char, *mut *mut daqiri_capi::ConfigTree) -> i32;

/// The tree `parse` made of `argument`, as Python data; or the failing status.
fn parsed_tree<'py>(py: Python<'py>, parse: Parse, argument: &str) -> PyResult<Result<Bound<'py, PyAny>, i32>> {
    let argument = c_string("the config", argument)?;
    let (code, text) = py.detach(|| {
        let mut tree = std::ptr::null_mut();
        // SAFETY: a live C string and a writable out-pointer, as the call takes them.
        let code = unsafe { parse(argument.as_ptr(), &mut tree) };
        if code != 0 {
            return (code, None);
        }
        // SAFETY: the tree just parsed, freed once below; the text freed after it is copied.
        unsafe {
            let text = daqiri_capi::daqiri_gw_config_yaml(tree);
            let copied = (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned());
            daqiri_capi::daqiri_gw_config_free_text(text);
            daqiri_capi::daqiri_gw_config_free(tree);
            (code, copied)
        }
    });
    match text {
        Some(text) => Ok(Ok(py.import("yaml")?.call_method1("safe_load", (text,))?)),
        None => Ok(Err(code)),
    }
}

/// Records a failure found here for `last_error()`, as libdaqiri's are; its status.
fn refuse(code: i32, message: &str) -> PyResult<Status> {
    let message = c_string("the message", message)?;
    // SAFETY: a live C string.
    Ok(Status::of(unsafe { daqiri_capi::daqiri_gw_fail(code, message.as_ptr()) }))
}

/// `(Status, NetworkConfig)` of what `parse` made of `argument`. A key no
/// attribute holds is `NOT_SUPPORTED`, named.
fn read_config<'py>(py: Python<'py>, parse: Parse, argument: &str) -> PyResult<(Status, Bound<'py, PyAny>)> {
    let classes = classes(py)?;
    let empty = classes.getattr("NetworkConfig")?.call0()?;
    let tree = match parsed_tree(py, parse, argument)? {
        Ok(tree) => tree,
        Err(code) => return Ok((Status::of(code), empty)),
    };
    let (config, why): (Bound<'py, PyAny>, Option<String>) =
        classes.getattr("network_config_of")?.call1((tree,))?.extract()?;
    match why {
        None => Ok((Status::SUCCESS, config)),
        Some(why) => Ok((refuse(7, &format!("parse_network_config: {why}"))?, empty)),
    }
}

/// Parses and validates a config file or YAML text as `daqiri_init` would.
#[pyfunction]
fn parse_network_config<'py>(py: Python<'py>, yaml_string_or_path: &str) -> PyResult<(Status, Bound<'py, PyAny>)> {
    read_config(py, daqiri_capi::daqiri_gw_config_parse, yaml_string_or_path)
}

#[pyfunction]
fn parse_network_config_from_yaml_string<'py>(
    py: Python<'py>,
    yaml_string: &str,
) -> PyResult<(Status, Bound<'py, PyAny>)> {
    read_config(py, daqiri_capi::daqiri_gw_config_parse_yaml_string, yaml_string)
}

#[pyfunction]
fn parse_network_config_from_yaml_file<'py>(py: Python<'py>, yaml_path: &str) -> PyResult<(Status, Bound<'py, PyAny>)> {
    read_config(py, daqiri_capi::daqiri_gw_config_parse_yaml_file, yaml_path)
}

/// The running engine's `EngineType`; `UNKNOWN` when none runs.
#[pyfunction]
fn get_engine_type(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    classes(py)?.getattr("EngineType")?.call1((daqiri_capi::daqiri_gw_engine_type(),))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for class in classes(m.py())?.getattr("CLASSES")?.try_iter()? {
        let class = class?;
        m.add(class.getattr("__name__")?.extract::<String>()?, class)?;
    }
    for name in ["MEM_ACCESS_LOCAL", "MEM_ACCESS_RDMA_WRITE", "MEM_ACCESS_RDMA_READ"] {
        m.add(name, classes(m.py())?.getattr(name)?)?;
    }
    for function in classes(m.py())?.getattr("FUNCTIONS")?.try_iter()? {
        let function = function?;
        m.add(function.getattr("__name__")?.extract::<String>()?, function)?;
    }
    m.add_function(wrap_pyfunction!(parse_network_config, m)?)?;
    m.add_function(wrap_pyfunction!(parse_network_config_from_yaml_string, m)?)?;
    m.add_function(wrap_pyfunction!(parse_network_config_from_yaml_file, m)?)?;
    m.add_function(wrap_pyfunction!(get_engine_type, m)?)?;
    Ok(())
}
