//! RDMA connections of RoCE ports, requests and their completions: the
//! libdaqiri calls of the same names (gateway/capi/src/rdma.rs), in
//! DAQIRI's tuple-returning style. Completions come from
//! `get_rx_burst_for_connection(conn_id, server)`.

use pyo3::prelude::*;

use crate::bursts::BurstParams;
use crate::cstr::c_string;
use crate::status::Status;

/// DAQIRI's `RDMAOpCode`: what a request is, or what a completion was.
#[pyclass(eq, eq_int, module = "daqiri")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub(crate) enum RDMAOpCode {
    CONNECT = 0,
    SEND = 1,
    RECEIVE = 2,
    RDMA_WRITE = 3,
    RDMA_WRITE_IMM = 4,
    RDMA_READ = 5,
    RDMA_READ_IMM = 6,
    INVALID = 7,
}

impl RDMAOpCode {
    fn of(code: i32) -> Self {
        match code {
            0 => Self::CONNECT,
            1 => Self::SEND,
            2 => Self::RECEIVE,
            3 => Self::RDMA_WRITE,
            4 => Self::RDMA_WRITE_IMM,
            5 => Self::RDMA_READ,
            6 => Self::RDMA_READ_IMM,
            _ => Self::INVALID,
        }
    }
}

/// `(Status, conn_id)`: a connection of the RoCE client aimed at the server.
#[pyfunction]
#[pyo3(signature = (server_addr, server_port, src_addr=None))]
fn rdma_connect_to_server(
    py: Python<'_>,
    server_addr: &str,
    server_port: u16,
    src_addr: Option<&str>,
) -> PyResult<(Status, usize)> {
    let server = c_string("server_addr", server_addr)?;
    let source = src_addr.map(|s| c_string("src_addr", s)).transpose()?;
    // It may wait for the port's connection: without the GIL.
    let code = py.detach(|| {
        let mut conn = 0;
        // SAFETY: live C strings and a writable local, as the call takes them.
        let code = unsafe {
            daqiri_capi::daqiri_gw_rdma_connect_to_server(
                server.as_ptr(),
                server_port,
                source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                &mut conn,
            )
        };
        (code, conn)
    });
    Ok((Status::of(code.0), code.1))
}

/// `(Status, conn_id)`: a connection a client made to the RoCE server.
#[pyfunction]
fn rdma_get_server_conn_id(server_addr: &str, server_port: u16) -> PyResult<(Status, usize)> {
    let mut conn = 0;
    // SAFETY: a live C string and a writable local, as the call takes them.
    let code = unsafe {
        daqiri_capi::daqiri_gw_rdma_get_server_conn_id(
            c_string("server_addr", server_addr)?.as_ptr(),
            server_port,
            &mut conn,
        )
    };
    Ok((Status::of(code), conn))
}

/// `(Status, port, queue)` of a connection.
#[pyfunction]
fn rdma_get_port_queue(conn_id: usize) -> (Status, u16, u16) {
    let (mut port, mut queue) = (0, 0);
    // SAFETY: writable locals, as the call takes them.
    let code = unsafe { daqiri_capi::daqiri_gw_rdma_get_port_queue(conn_id, &mut port, &mut queue) };
    (Status::of(code), port, queue)
}

/// Makes a TX burst not yet filled a SEND or RECEIVE request on `conn_id`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn rdma_set_header(
    burst: &BurstParams,
    op_code: RDMAOpCode,
    conn_id: usize,
    is_server: bool,
    num_pkts: i32,
    wr_id: u64,
    local_mr_name: &str,
) -> PyResult<Status> {
    let name = c_string("local_mr_name", local_mr_name)?;
    // SAFETY: a live C string; the handle is checked by the call.
    let code = unsafe {
        daqiri_capi::daqiri_gw_rdma_set_header(
            burst.handle(),
            op_code as i32,
            conn_id,
            is_server,
            num_pkts,
            wr_id,
            name.as_ptr(),
        )
    };
    Ok(Status::of(code))
}

/// What the request or completion is.
#[pyfunction]
fn rdma_get_opcode(burst: &BurstParams) -> RDMAOpCode {
    RDMAOpCode::of(daqiri_capi::daqiri_gw_rdma_get_opcode(burst.handle()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RDMAOpCode>()?;
    for f in [
        wrap_pyfunction!(rdma_connect_to_server, m)?,
        wrap_pyfunction!(rdma_get_server_conn_id, m)?,
        wrap_pyfunction!(rdma_get_port_queue, m)?,
        wrap_pyfunction!(rdma_set_header, m)?,
        wrap_pyfunction!(rdma_get_opcode, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
