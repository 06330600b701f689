//! DAQIRI's config classes and the calls that parse into them:
//! `NetworkConfig` and what it holds (config_classes.py, run when the module
//! is imported), `parse_network_config`, `get_engine_type`. `daqiri_init`
//! takes a `NetworkConfig` through its `as_dict()`.

use std::ffi::{CStr, CString};

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

/// The tree libdaqiri parsed `yaml_or_path` into, as Python data; or the failing status.
fn parsed_tree<'py>(py: Python<'py>, yaml_or_path: &str) -> PyResult<Result<Bound<'py, PyAny>, i32>> {
    let argument = c_string("the config", yaml_or_path)?;
    let (code, text) = py.detach(|| {
        let mut tree = std::ptr::null_mut();
        // SAFETY: a live C string and a writable out-pointer, as the call takes them.
        let code = unsafe { daqiri_capi::daqiri_gw_config_parse(argument.as_ptr(), &mut tree) };
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

/// Parses and validates a config as `daqiri_init` would: `(Status, NetworkConfig)`.
/// A key no attribute holds is `NOT_SUPPORTED`, named.
#[pyfunction]
fn parse_network_config<'py>(py: Python<'py>, yaml_string_or_path: &str) -> PyResult<(Status, Bound<'py, PyAny>)> {
    let classes = classes(py)?;
    let empty = classes.getattr("NetworkConfig")?.call0()?;
    let tree = match parsed_tree(py, yaml_string_or_path)? {
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

#[pyfunction]
fn parse_network_config_from_yaml_string<'py>(
    py: Python<'py>,
    yaml_string: &str,
) -> PyResult<(Status, Bound<'py, PyAny>)> {
    if !yaml_string.contains([':', '\n']) {
        let empty = classes(py)?.getattr("NetworkConfig")?.call0()?;
        return Ok((refuse(5, "parse_network_config_from_yaml_string: not YAML text")?, empty));
    }
    parse_network_config(py, yaml_string)
}

#[pyfunction]
fn parse_network_config_from_yaml_file<'py>(py: Python<'py>, yaml_path: &str) -> PyResult<(Status, Bound<'py, PyAny>)> {
    if yaml_path.contains('\n') {
        let empty = classes(py)?.getattr("NetworkConfig")?.call0()?;
        return Ok((refuse(5, "parse_network_config_from_yaml_file: not a path")?, empty));
    }
    parse_network_config(py, yaml_path)
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
