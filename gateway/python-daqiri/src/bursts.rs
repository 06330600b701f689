//! `daqiri.BurstParams` and the calls that read, size and free a burst.

use pyo3::prelude::*;

use crate::status::Status;

type Handle = *mut daqiri_capi::BurstParams;

/// A burst: an opaque handle into libdaqiri's pool. `hdr.hdr` reads its
/// header; everything else goes through the module's functions.
#[pyclass(module = "daqiri", frozen)]
#[derive(Debug)]
pub(crate) struct BurstParams {
    handle: usize,
}

impl BurstParams {
    pub(crate) fn wrap(handle: Handle) -> Self {
        Self { handle: handle as usize }
    }

    pub(crate) fn handle(&self) -> Handle {
        self.handle as Handle
    }
}

/// `burst.hdr.hdr`: the header fields, as they are when read.
#[pyclass(module = "daqiri", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct BurstHeaderParams {
    num_pkts: u32,
    max_pkt: u32,
    num_segs: u32,
    burst_flags: u32,
    port_id: u16,
    q_id: u16,
}

/// `burst.hdr`: DAQIRI nests the fields one level further.
#[pyclass(module = "daqiri", frozen, get_all)]
#[derive(Debug)]
pub(crate) struct BurstHeader {
    hdr: BurstHeaderParams,
}

#[pymethods]
impl BurstParams {
    /// The header; a freed burst raises ValueError with libdaqiri's message.
    #[getter]
    fn hdr(&self) -> PyResult<BurstHeader> {
        let f =
            daqiri_capi::header_of(self.handle()).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.detail()))?;
        Ok(BurstHeader {
            hdr: BurstHeaderParams {
                num_pkts: f.num_pkts,
                max_pkt: f.max_pkt,
                num_segs: f.num_segs,
                burst_flags: f.burst_flags,
                port_id: f.port_id,
                q_id: f.q_id,
            },
        })
    }

    /// The work request id of an RDMA request or completion (0: none).
    #[getter]
    fn rdma_wr_id(&self) -> u64 {
        daqiri_capi::daqiri_gw_rdma_get_wr_id(self.handle())
    }

    /// The connection the burst came on or is for (0: none).
    #[getter]
    fn connection_id(&self) -> usize {
        daqiri_capi::daqiri_gw_get_connection_id(self.handle())
    }

    fn __repr__(&self) -> String {
        format!("<daqiri.BurstParams {:#x}>", self.handle)
    }
}

#[pyfunction]
fn create_tx_burst_params() -> BurstParams {
    BurstParams::wrap(daqiri_capi::daqiri_gw_create_tx_burst_params())
}

#[pyfunction]
fn create_burst_params() -> BurstParams {
    create_tx_burst_params()
}

#[pyfunction]
fn set_header(burst: &BurstParams, port: u16, q: u16, num: i32, segs: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_set_header(burst.handle(), port, q, num, segs))
}

#[pyfunction]
fn set_num_packets(burst: &BurstParams, num: i64) -> Status {
    Status::of(daqiri_capi::daqiri_gw_set_num_packets(burst.handle(), num))
}

#[pyfunction]
fn get_num_packets(burst: &BurstParams) -> i64 {
    daqiri_capi::daqiri_gw_get_num_packets(burst.handle())
}

#[pyfunction]
fn get_q_id(burst: &BurstParams) -> i32 {
    daqiri_capi::daqiri_gw_get_q_id(burst.handle())
}

#[pyfunction]
fn get_burst_tot_byte(burst: &BurstParams) -> u64 {
    daqiri_capi::daqiri_gw_get_burst_tot_byte(burst.handle())
}

/// Segment 0's address as an integer (0 when the packet has none).
#[pyfunction]
fn get_packet_ptr(burst: &BurstParams, idx: i32) -> usize {
    daqiri_capi::daqiri_gw_get_segment_packet_ptr(burst.handle(), 0, idx) as usize
}

#[pyfunction]
fn get_segment_packet_ptr(burst: &BurstParams, seg: i32, idx: i32) -> usize {
    daqiri_capi::daqiri_gw_get_segment_packet_ptr(burst.handle(), seg, idx) as usize
}

#[pyfunction]
fn get_packet_length(burst: &BurstParams, idx: i32) -> u32 {
    daqiri_capi::daqiri_gw_get_packet_length(burst.handle(), idx)
}

#[pyfunction]
fn get_segment_packet_length(burst: &BurstParams, seg: i32, idx: i32) -> u32 {
    daqiri_capi::daqiri_gw_get_segment_packet_length(burst.handle(), seg, idx)
}

#[pyfunction]
fn get_packet_flow_id(burst: &BurstParams, idx: i32) -> u32 {
    daqiri_capi::daqiri_gw_get_packet_flow_id(burst.handle(), idx)
}

/// `(Status, timestamp_ns)`.
#[pyfunction]
fn get_packet_rx_timestamp(burst: &BurstParams, idx: i32) -> (Status, u64) {
    let mut stamp = 0;
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let code = unsafe { daqiri_capi::daqiri_gw_get_packet_rx_timestamp(burst.handle(), idx, &mut stamp) };
    (Status::of(code), stamp)
}

/// `(Status, ReorderBurstInfo | None)`.
#[pyfunction]
fn get_reorder_burst_info(burst: &BurstParams) -> (Status, Option<ReorderBurstInfo>) {
    let mut info = daqiri_capi::ReorderInfo::default();
    // SAFETY: live C strings and buffers, writable locals, as the call takes them.
    let code = unsafe { daqiri_capi::daqiri_gw_get_reorder_burst_info(burst.handle(), &mut info) };
    let info = (code == 0).then_some(ReorderBurstInfo {
        batch_id: info.batch_id,
        source_packet_count: info.source_packet_count,
        packets_per_batch: info.packets_per_batch,
        payload_len: info.payload_len,
        aggregate_len: info.aggregate_len,
        burst_flags: info.burst_flags,
        plan: info.plan,
        timestamp_ns: info.timestamp_ns,
    });
    (Status::of(code), info)
}

/// Runs a GPU reorder plan's kernels on `stream`: a `cudaStream_t` as an
/// integer (0: the legacy default stream), or a stream object that carries
/// one (CuPy's `.ptr`, PyTorch's `.cuda_stream`).
#[pyfunction]
#[pyo3(signature = (interface_name, reorder_name, stream = None))]
fn set_reorder_cuda_stream(
    interface_name: &str,
    reorder_name: &str,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<Status> {
    let interface = crate::cstr::c_string("interface_name", interface_name)?;
    let plan = crate::cstr::c_string("reorder_name", reorder_name)?;
    let handle: usize = match stream {
        None => 0,
        Some(stream) if stream.hasattr("ptr")? => stream.getattr("ptr")?.extract()?,
        Some(stream) if stream.hasattr("cuda_stream")? => stream.getattr("cuda_stream")?.extract()?,
        Some(stream) => stream.extract()?,
    };
    // SAFETY: live C strings; the stream is the caller's, kept alive while
    // the plan uses it, as DAQIRI asks.
    let code = unsafe {
        daqiri_capi::daqiri_gw_set_reorder_cuda_stream(
            interface.as_ptr(),
            plan.as_ptr(),
            handle as *mut std::ffi::c_void,
        )
    };
    Ok(Status::of(code))
}

/// A reorder aggregate's batch, source packets and shape: DAQIRI's fields,
/// then the plan's index and the first packet's receive time.
#[pyclass(module = "daqiri", frozen, get_all)]
#[derive(Debug)]
pub(crate) struct ReorderBurstInfo {
    batch_id: u64,
    source_packet_count: u32,
    packets_per_batch: u32,
    payload_len: u32,
    aggregate_len: u32,
    burst_flags: u32,
    plan: u16,
    timestamp_ns: u64,
}

/// Waits for the device work on a burst, if any (GIL released).
#[pyfunction]
fn synchronize_burst_event(py: Python<'_>, burst: &BurstParams) -> Status {
    let handle = burst.handle;
    Status::of(py.detach(|| daqiri_capi::daqiri_gw_synchronize_burst_event(handle as Handle)))
}

/// Segment lengths of one packet.
#[pyfunction]
fn set_packet_lengths(burst: &BurstParams, idx: i32, lens: Vec<i32>) -> Status {
    Status::of(
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe { daqiri_capi::daqiri_gw_set_packet_lengths(burst.handle(), idx, lens.as_ptr(), lens.len()) },
    )
}

#[pyfunction]
fn set_all_packet_lengths(burst: &BurstParams, lens: Vec<i32>) -> Status {
    Status::of(
        /* SAFETY: live C strings and writable locals, as the call takes them. */
        unsafe { daqiri_capi::daqiri_gw_set_all_packet_lengths(burst.handle(), lens.as_ptr(), lens.len()) },
    )
}

#[pyfunction]
fn set_packet_tx_time(burst: &BurstParams, idx: i32, time: u64) -> Status {
    Status::of(daqiri_capi::daqiri_gw_set_packet_tx_time(burst.handle(), idx, time))
}

const RX: i32 = 0;
const TX: i32 = 1;

#[pyfunction]
fn free_all_packets_and_burst_rx(burst: &BurstParams) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_all_packets_and_burst(burst.handle(), RX))
}

#[pyfunction]
fn free_all_packets_and_burst_tx(burst: &BurstParams) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_all_packets_and_burst(burst.handle(), TX))
}

#[pyfunction]
fn free_rx_burst(burst: &BurstParams) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_burst(burst.handle(), RX))
}

#[pyfunction]
fn free_tx_burst(burst: &BurstParams) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_burst(burst.handle(), TX))
}

#[pyfunction]
fn free_rx_metadata(burst: &BurstParams) -> Status {
    free_rx_burst(burst)
}

#[pyfunction]
fn free_tx_metadata(burst: &BurstParams) -> Status {
    free_tx_burst(burst)
}

#[pyfunction]
fn free_packet(burst: &BurstParams, idx: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_packet(burst.handle(), idx))
}

#[pyfunction]
fn free_packet_segment(burst: &BurstParams, seg: i32, idx: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_packet_segment(burst.handle(), seg, idx))
}

#[pyfunction]
fn free_all_segment_packets(burst: &BurstParams, seg: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_all_segment_packets(burst.handle(), seg))
}

#[pyfunction]
fn free_segment_packets_and_burst(burst: &BurstParams, seg: i32) -> Status {
    Status::of(daqiri_capi::daqiri_gw_free_segment_packets_and_burst(burst.handle(), seg))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BurstParams>()?;
    m.add_class::<BurstHeader>()?;
    m.add_class::<BurstHeaderParams>()?;
    m.add_class::<ReorderBurstInfo>()?;
    for f in [
        wrap_pyfunction!(create_tx_burst_params, m)?,
        wrap_pyfunction!(create_burst_params, m)?,
        wrap_pyfunction!(set_header, m)?,
        wrap_pyfunction!(set_num_packets, m)?,
        wrap_pyfunction!(get_num_packets, m)?,
        wrap_pyfunction!(get_q_id, m)?,
        wrap_pyfunction!(get_burst_tot_byte, m)?,
        wrap_pyfunction!(get_packet_ptr, m)?,
        wrap_pyfunction!(get_segment_packet_ptr, m)?,
        wrap_pyfunction!(get_packet_length, m)?,
        wrap_pyfunction!(get_segment_packet_length, m)?,
        wrap_pyfunction!(get_packet_flow_id, m)?,
        wrap_pyfunction!(get_packet_rx_timestamp, m)?,
        wrap_pyfunction!(get_reorder_burst_info, m)?,
        wrap_pyfunction!(set_reorder_cuda_stream, m)?,
        wrap_pyfunction!(synchronize_burst_event, m)?,
        wrap_pyfunction!(set_packet_lengths, m)?,
        wrap_pyfunction!(set_all_packet_lengths, m)?,
        wrap_pyfunction!(set_packet_tx_time, m)?,
        wrap_pyfunction!(free_all_packets_and_burst_rx, m)?,
        wrap_pyfunction!(free_all_packets_and_burst_tx, m)?,
        wrap_pyfunction!(free_rx_burst, m)?,
        wrap_pyfunction!(free_tx_burst, m)?,
        wrap_pyfunction!(free_rx_metadata, m)?,
        wrap_pyfunction!(free_tx_metadata, m)?,
        wrap_pyfunction!(free_packet, m)?,
        wrap_pyfunction!(free_packet_segment, m)?,
        wrap_pyfunction!(free_all_segment_packets, m)?,
        wrap_pyfunction!(free_segment_packets_and_burst, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
