//! Dynamic RX flows: `add_rx_flow_async`, `add_rx_flows_async`,
//! `delete_flow_async`, `poll_flow_op`. A `FlowRuleConfig` crosses
//! libdaqiri's ABI as the YAML of its `rx.flows` entry, as in C++.

use pyo3::prelude::*;

use crate::config::classes;
use crate::cstr::c_string;
use crate::status::Status;

/// Queues the creation of `flows` on `port`: `(Status, op_id)`.
#[pyfunction]
fn add_rx_flows_async(py: Python<'_>, port: i32, flows: Vec<Bound<'_, PyAny>>) -> PyResult<(Status, u64)> {
    let flow_yaml = classes(py)?.getattr("flow_yaml")?;
    let texts = flows
        .iter()
        .map(|flow| c_string("a flow", &flow_yaml.call1((flow,))?.extract::<String>()?))
        .collect::<PyResult<Vec<_>>>()?;
    let pointers: Vec<_> = texts.iter().map(|text| text.as_ptr()).collect();
    let mut op_id = 0;
    // SAFETY: live C strings, their count, and a writable local, as the call takes them.
    // The GIL stays held, as DAQIRI's module holds it here.
    let code = unsafe { daqiri_capi::daqiri_gw_add_rx_flows(port, pointers.as_ptr(), pointers.len(), &mut op_id) };
    Ok((Status::of(code), op_id))
}

/// Queues the creation of one flow on `port`: `(Status, op_id)`.
#[pyfunction]
fn add_rx_flow_async(py: Python<'_>, port: i32, flow: Bound<'_, PyAny>) -> PyResult<(Status, u64)> {
    add_rx_flows_async(py, port, vec![flow])
}

/// Queues the deletion of a flow `add_rx_flow_async` added: `(Status, op_id)`.
#[pyfunction]
fn delete_flow_async(flow_id: u32) -> (Status, u64) {
    let mut op_id = 0;
    // SAFETY: a writable local.
    let code = unsafe { daqiri_capi::daqiri_gw_delete_flow(flow_id, &mut op_id) };
    (Status::of(code), op_id)
}

/// The next finished flow operation: `(Status, FlowOpResult)`, or
/// `(NOT_READY, None)` when none has finished.
#[pyfunction]
fn poll_flow_op(py: Python<'_>) -> PyResult<(Status, Option<Bound<'_, PyAny>>)> {
    let mut op = daqiri_capi::FlowOp::default();
    let mut ids = vec![0u32; 16];
    // SAFETY: a writable result and `ids.len()` writable ids, as the call takes them.
    let mut code = unsafe { daqiri_capi::daqiri_gw_poll_flow_op(&mut op, ids.as_mut_ptr(), ids.len()) };
    if code == Status::NO_SPACE_AVAILABLE as i32 {
        ids.resize(op.num_flows as usize, 0);
        // SAFETY: as above, with room for every id.
        code = unsafe { daqiri_capi::daqiri_gw_poll_flow_op(&mut op, ids.as_mut_ptr(), ids.len()) };
    }
    if code != 0 {
        return Ok((Status::of(code), None));
    }
    ids.truncate(op.num_flows as usize);
    let classes = classes(py)?;
    let result = classes.getattr("FlowOpResult")?.call0()?;
    result.setattr("op_id", op.op_id)?;
    result.setattr("type", classes.getattr("FlowOpType")?.call1((op.kind,))?)?;
    result.setattr("status", Status::of(op.status))?;
    result.setattr("flow_id", op.flow_id)?;
    result.setattr("flow_ids", ids)?;
    Ok((Status::SUCCESS, Some(result)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(add_rx_flow_async, m)?)?;
    m.add_function(wrap_pyfunction!(add_rx_flows_async, m)?)?;
    m.add_function(wrap_pyfunction!(delete_flow_async, m)?)?;
    m.add_function(wrap_pyfunction!(poll_flow_op, m)?)?;
    Ok(())
}
