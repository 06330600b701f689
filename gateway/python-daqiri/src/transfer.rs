//! Moving packets: receiving, transmitting, copying bytes in and out,
//! header helpers, and the writers.

use std::ffi::CString;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::bursts::BurstParams;
use crate::cstr::c_string;
use crate::status::Status;

type Handle = *mut daqiri_capi::BurstParams;

/// `(Status, BurstParams | None)`: a queue's next burst (`port` and
/// `queue`), any queue's of a port (`queue` None), or any port's (both
/// None). GIL released.
#[pyfunction]
#[pyo3(signature = (port=None, queue=None))]
fn get_rx_burst(py: Python<'_>, port: Option<i32>, queue: Option<i32>) -> (Status, Option<BurstParams>) {
    let (port, queue) = (port.unwrap_or(-1), queue.unwrap_or(-1));
    let (code, handle) = py.detach(|| {
        let mut burst: Handle = std::ptr::null_mut();
        // SAFETY: live C strings and buffers, writable locals, as the call takes them.
        let code = unsafe { daqiri_capi::daqiri_gw_get_rx_burst(&mut burst, port, queue) };
        (code, burst as usize)
    });
    received(code, handle)
}

/// `(Status, BurstParams | None)` of a socket connection. GIL released.
#[pyfunction]
#[pyo3(signature = (conn_id, server=true))]
fn get_rx_burst_for_connection(py: Python<'_>, conn_id: usize, server: bool) -> (Status, Option<BurstParams>) {
    let (code, handle) = py.detach(|| {
        let mut burst: Handle = std::ptr::null_mut();
        // SAFETY: live C strings and buffers, writable locals, as the call takes them.
        let code = unsafe { daqiri_capi::daqiri_gw_get_rx_burst_conn(&mut burst, conn_id, server) };
        (code, burst as usize)
    });
    received(code, handle)
}

fn received(code: i32, handle: usize) -> (Status, Option<BurstParams>) {
    let burst = (code == 0 && handle != 0).then(|| BurstParams::wrap(handle as Handle));
    (Status::of(code), burst)
}

#[pyfunction]
fn get_connection_id(burst: &BurstParams) -> usize {
    daqiri_capi::daqiri_gw_get_connection_id(burst.handle())
}

#[pyfunction]
fn is_tx_burst_available(py: Python<'_>, burst: &BurstParams) -> bool {
    let handle = burst.handle() as usize;
    py.detach(|| daqiri_capi::daqiri_gw_is_tx_burst_available(handle as Handle))
}

#[pyfunction]
fn get_tx_packet_burst(py: Python<'_>, burst: &BurstParams) -> Status {
    let handle = burst.handle() as usize;
    Status::of(py.detach(|| daqiri_capi::daqiri_gw_get_tx_packet_burst(handle as Handle)))
}

#[pyfunction]
fn set_connection_id(burst: &BurstParams, conn_id: usize) -> Status {
    Status::of(daqiri_capi::daqiri_gw_set_connection_id(burst.handle(), conn_id))
}

/// Queues the burst; it is gone afterwards whatever the answer.
#[pyfunction]
fn send_tx_burst(py: Python<'_>, burst: &BurstParams) -> Status {
    let handle = burst.handle() as usize;
    Status::of(py.detach(|| daqiri_capi::daqiri_gw_send_tx_burst(handle as Handle)))
}

/// The bytes of `data` from `src_offset`, `nbytes` of them (all when None),
/// as an address and length valid while `buffer` is held.
fn source(py: Python<'_>, buffer: &PyBuffer<u8>, nbytes: Option<usize>, src_offset: usize) -> PyResult<(usize, usize)> {
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err("data must be a contiguous buffer"));
    }
    let total = buffer.len_bytes();
    let len = nbytes.unwrap_or(total.saturating_sub(src_offset));
    if src_offset.checked_add(len).is_none_or(|end| end > total) {
        return Err(PyValueError::new_err(format!(
            "{len} bytes from offset {src_offset} are past the {total}-byte buffer"
        )));
    }
    let _ = py;
    Ok((buffer.buf_ptr() as usize + src_offset, len))
}

/// Copies a Python buffer into segment `seg` of packet `idx` (GIL released for the copy).
#[pyfunction]
#[pyo3(signature = (burst, seg, idx, data, nbytes=None, src_offset=0, dst_offset=0))]
#[allow(clippy::too_many_arguments, reason = "DAQIRI's Python signature")]
fn copy_buffer_to_segment_packet(
    py: Python<'_>,
    burst: &BurstParams,
    seg: i32,
    idx: i32,
    data: &Bound<'_, PyAny>,
    nbytes: Option<usize>,
    src_offset: usize,
    dst_offset: usize,
) -> PyResult<Status> {
    let buffer = PyBuffer::<u8>::get(data)?;
    let (address, len) = source(py, &buffer, nbytes, src_offset)?;
    let handle = burst.handle() as usize;
    let code = py.detach(|| {
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe {
            daqiri_capi::daqiri_gw_copy_to_segment_packet(
                handle as Handle,
                seg,
                idx,
                address as *const _,
                len,
                dst_offset,
            )
        }
    });
    drop(buffer);
    Ok(Status::of(code))
}

/// Copies a Python buffer into segment 0 of packet `idx`.
#[pyfunction]
#[pyo3(signature = (burst, idx, data, nbytes=None, src_offset=0, dst_offset=0))]
fn copy_buffer_to_packet(
    py: Python<'_>,
    burst: &BurstParams,
    idx: i32,
    data: &Bound<'_, PyAny>,
    nbytes: Option<usize>,
    src_offset: usize,
    dst_offset: usize,
) -> PyResult<Status> {
    copy_buffer_to_segment_packet(py, burst, 0, idx, data, nbytes, src_offset, dst_offset)
}

/// `(Status, bytes)`: segment `seg` of packet `idx` from `src_offset`,
/// `nbytes` of it (the rest when None). GIL released for the copy.
#[pyfunction]
#[pyo3(signature = (burst, seg, idx, nbytes=None, src_offset=0))]
fn get_segment_packet_bytes<'py>(
    py: Python<'py>,
    burst: &BurstParams,
    seg: i32,
    idx: i32,
    nbytes: Option<usize>,
    src_offset: usize,
) -> (Status, Bound<'py, PyBytes>) {
    let handle = burst.handle() as usize;
    let available = daqiri_capi::daqiri_gw_get_segment_packet_length(handle as Handle, seg, idx) as usize;
    let mut out = vec![0u8; nbytes.unwrap_or(available.saturating_sub(src_offset))];
    let (code, copied) = py.detach(|| {
        let mut copied = 0usize;
        // SAFETY: live C strings and buffers, writable locals, as the call takes them.
        let code = unsafe {
            daqiri_capi::daqiri_gw_copy_from_segment_packet(
                handle as Handle,
                seg,
                idx,
                out.as_mut_ptr().cast(),
                out.len(),
                src_offset,
                &mut copied,
            )
        };
        (code, copied)
    });
    out.truncate(if code == 0 { copied } else { 0 });
    (Status::of(code), PyBytes::new(py, &out))
}

/// `(Status, bytes)` of segment 0 of packet `idx`.
#[pyfunction]
#[pyo3(signature = (burst, idx, nbytes=None, src_offset=0))]
fn get_packet_bytes<'py>(
    py: Python<'py>,
    burst: &BurstParams,
    idx: i32,
    nbytes: Option<usize>,
    src_offset: usize,
) -> (Status, Bound<'py, PyBytes>) {
    get_segment_packet_bytes(py, burst, 0, idx, nbytes, src_offset)
}

/// The Ethernet header; `dst_addr` as "aa:bb:cc:dd:ee:ff".
#[pyfunction]
fn set_eth_header(burst: &BurstParams, idx: i32, dst_addr: &str) -> Status {
    let mut mac = [0u8; 6];
    let Ok(text) = CString::new(dst_addr) else { return Status::INVALID_PARAMETER };
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let parsed = unsafe { daqiri_capi::daqiri_gw_format_eth_addr(mac.as_mut_ptr(), text.as_ptr()) };
    if parsed != 0 {
        return Status::of(parsed);
    }
    Status::of(
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe { daqiri_capi::daqiri_gw_set_eth_header(burst.handle(), idx, mac.as_ptr()) },
    )
}

/// The IPv4 header; hosts as integers (`int(ipaddress.IPv4Address(...))`).
#[pyfunction]
fn set_ipv4_header(burst: &BurstParams, idx: i32, ip_len: i32, proto: u8, src_host: u32, dst_host: u32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_set_ipv4_header(burst.handle(), idx, ip_len, proto, src_host, dst_host))
}

#[pyfunction]
fn set_udp_header(burst: &BurstParams, idx: i32, udp_len: i32, src_port: u16, dst_port: u16) -> Status {
    Status::of(daqiri_capi::daqiri_gw_set_udp_header(burst.handle(), idx, udp_len, src_port, dst_port))
}

#[pyfunction]
fn set_udp_payload(burst: &BurstParams, idx: i32, data: &[u8]) -> Status {
    Status::of(
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe { daqiri_capi::daqiri_gw_set_udp_payload(burst.handle(), idx, data.as_ptr().cast(), data.len()) },
    )
}

/// Each packet to `<absolute_path>/<file_prefix>_<index>`. GIL released.
#[pyfunction]
#[pyo3(signature = (burst, absolute_path, file_prefix, packet_data_offset=0))]
fn daqiri_write_raw_to_file(
    py: Python<'_>,
    burst: &BurstParams,
    absolute_path: &str,
    file_prefix: &str,
    packet_data_offset: usize,
) -> PyResult<Status> {
    let (path, prefix, handle) =
        (c_string("absolute_path", absolute_path)?, c_string("file_prefix", file_prefix)?, burst.handle() as usize);
    Ok(Status::of(py.detach(|| {
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe {
            daqiri_capi::daqiri_gw_write_raw_to_file(
                handle as Handle,
                path.as_ptr(),
                prefix.as_ptr(),
                packet_data_offset,
            )
        }
    })))
}

/// The burst appended to `<absolute_path>/<file_prefix>.pcap`. GIL released.
#[pyfunction]
fn daqiri_write_pcap_to_file(
    py: Python<'_>,
    burst: &BurstParams,
    absolute_path: &str,
    file_prefix: &str,
) -> PyResult<Status> {
    let (path, prefix, handle) =
        (c_string("absolute_path", absolute_path)?, c_string("file_prefix", file_prefix)?, burst.handle() as usize);
    Ok(Status::of(
        // SAFETY: live C strings and buffers, writable locals, as the call takes them.
        py.detach(|| unsafe {
            daqiri_capi::daqiri_gw_write_pcap_to_file(handle as Handle, path.as_ptr(), prefix.as_ptr())
        }),
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(get_rx_burst, m)?,
        wrap_pyfunction!(get_rx_burst_for_connection, m)?,
        wrap_pyfunction!(get_connection_id, m)?,
        wrap_pyfunction!(is_tx_burst_available, m)?,
        wrap_pyfunction!(get_tx_packet_burst, m)?,
        wrap_pyfunction!(set_connection_id, m)?,
        wrap_pyfunction!(send_tx_burst, m)?,
        wrap_pyfunction!(copy_buffer_to_segment_packet, m)?,
        wrap_pyfunction!(copy_buffer_to_packet, m)?,
        wrap_pyfunction!(get_segment_packet_bytes, m)?,
        wrap_pyfunction!(get_packet_bytes, m)?,
        wrap_pyfunction!(set_eth_header, m)?,
        wrap_pyfunction!(set_ipv4_header, m)?,
        wrap_pyfunction!(set_udp_header, m)?,
        wrap_pyfunction!(set_udp_payload, m)?,
        wrap_pyfunction!(daqiri_write_raw_to_file, m)?,
        wrap_pyfunction!(daqiri_write_pcap_to_file, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
