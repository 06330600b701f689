//! Ports, traffic switches and socket connections.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyString};

use crate::cstr::c_string;
use crate::status::Status;

/// The port of an interface name or address; -1 when none has it.
#[pyfunction]
fn get_port_id(key: &str) -> PyResult<i32> {
    Ok(
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe { daqiri_capi::daqiri_gw_get_port_id(c_string("key", key)?.as_ptr()) },
    )
}

#[pyfunction]
fn get_num_rx_queues(port_id: i32) -> i32 {
    daqiri_capi::daqiri_gw_get_num_rx_queues(port_id)
}

/// `(Status, "aa:bb:cc:dd:ee:ff")`.
#[pyfunction]
fn get_mac_addr(port: i32) -> (Status, String) {
    let mut mac = [0u8; 6];
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let code = unsafe { daqiri_capi::daqiri_gw_get_mac_addr(port, mac.as_mut_ptr()) };
    let text = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    (Status::of(code), text)
}

/// Six bytes of a MAC address; zeros when `addr` is not one.
#[pyfunction]
fn format_eth_addr<'py>(py: Python<'py>, addr: &str) -> PyResult<Bound<'py, PyBytes>> {
    let mut mac = [0u8; 6];
    /* SAFETY: live C strings and writable locals, as the call takes them. */
    unsafe { daqiri_capi::daqiri_gw_format_eth_addr(mac.as_mut_ptr(), c_string("addr", addr)?.as_ptr()) };
    Ok(PyBytes::new(py, &mac))
}

#[pyfunction]
fn drop_all_traffic(port: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_drop_all_traffic(port))
}

#[pyfunction]
fn allow_all_traffic(port: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_allow_all_traffic(port))
}

/// Packets discarded from an RX queue; -1 when the queue does not exist.
#[pyfunction]
fn flush_port_queue(port: i32, queue: i32) -> i64 {
    daqiri_capi::daqiri_gw_flush_port_queue(port, queue)
}

/// `(Status, conn_id)` of the socket client aimed at the server.
#[pyfunction]
#[pyo3(signature = (server_addr, server_port, src_addr=None))]
fn socket_connect_to_server(server_addr: &str, server_port: u16, src_addr: Option<&str>) -> PyResult<(Status, usize)> {
    let server = c_string("server_addr", server_addr)?;
    let source = src_addr.map(|s| c_string("src_addr", s)).transpose()?;
    let mut conn = 0;
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let code = unsafe {
        daqiri_capi::daqiri_gw_socket_connect_to_server(
            server.as_ptr(),
            server_port,
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            &mut conn,
        )
    };
    Ok((Status::of(code), conn))
}

/// `(Status, conn_id)` of the socket server bound to the address.
#[pyfunction]
fn socket_get_server_conn_id(server_addr: &str, server_port: u16) -> PyResult<(Status, usize)> {
    let mut conn = 0;
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let code = unsafe {
        daqiri_capi::daqiri_gw_socket_get_server_conn_id(
            c_string("server_addr", server_addr)?.as_ptr(),
            server_port,
            &mut conn,
        )
    };
    Ok((Status::of(code), conn))
}

/// `(Status, port, queue)` a connection's TX bursts go to.
#[pyfunction]
fn socket_get_port_queue(conn_id: usize) -> (Status, u16, u16) {
    let (mut port, mut queue) = (0, 0);
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let code = unsafe { daqiri_capi::daqiri_gw_socket_get_port_queue(conn_id, &mut port, &mut queue) };
    (Status::of(code), port, queue)
}

/// Sets a socket option on the connection's sockets (kept for those it
/// opens later): `value` a bool or int (a C int), a str (its UTF-8 bytes),
/// or bytes or another buffer, as `setsockopt(2)` takes them.
#[pyfunction]
fn socket_setsockopt(
    py: Python<'_>,
    conn_id: usize,
    level: i32,
    optname: i32,
    value: &Bound<'_, PyAny>,
) -> PyResult<Status> {
    let bytes: Vec<u8> = if value.is_instance_of::<PyBool>() {
        i32::from(value.extract::<bool>()?).to_ne_bytes().to_vec()
    } else if value.is_instance_of::<PyInt>() {
        value.extract::<i32>()?.to_ne_bytes().to_vec()
    } else if let Ok(text) = value.cast::<PyString>() {
        text.to_str()?.as_bytes().to_vec()
    } else if let Ok(buffer) = PyBuffer::<u8>::get(value) {
        buffer.to_vec(py)?
    } else {
        return Err(PyTypeError::new_err("value must be a bool, an int, a str, bytes or another buffer of bytes"));
    };
    // SAFETY: a live buffer of `bytes.len()` bytes.
    let code = py.detach(|| unsafe {
        daqiri_capi::daqiri_gw_socket_setsockopt(conn_id, level, optname, bytes.as_ptr().cast(), bytes.len())
    });
    Ok(Status::of(code))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(get_port_id, m)?,
        wrap_pyfunction!(get_num_rx_queues, m)?,
        wrap_pyfunction!(get_mac_addr, m)?,
        wrap_pyfunction!(format_eth_addr, m)?,
        wrap_pyfunction!(drop_all_traffic, m)?,
        wrap_pyfunction!(allow_all_traffic, m)?,
        wrap_pyfunction!(flush_port_queue, m)?,
        wrap_pyfunction!(socket_connect_to_server, m)?,
        wrap_pyfunction!(socket_get_server_conn_id, m)?,
        wrap_pyfunction!(socket_get_port_queue, m)?,
        wrap_pyfunction!(socket_setsockopt, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
