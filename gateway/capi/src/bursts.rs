//! Receiving bursts and reading any burst: `get_rx_burst` in its four
//! forms, packet and segment pointers and lengths, flow ids, timestamps,
//! reorder information.

use std::ffi::c_void;

use daqiri::{Burst, Error, SegmentMemory, Status};

use crate::args::{packet_index, port_id, queue_id, segment_index};
use crate::connections;
use crate::handle::{self, BurstParams, Role};
use crate::lifecycle::with_engine;
use crate::rdma;
use crate::status::{self, SUCCESS};

/// `get_rx_burst`'s "any" for a port or queue.
const ANY: i32 = -1;

/// Hands `burst` to C in a fresh RX handle.
fn hand_over(burst: Burst, out: *mut *mut BurstParams) -> i32 {
    let Some(handle) = handle::acquire(Role::Rx) else {
        return status::fail("get_rx_burst", handle::exhausted());
    };
    handle.describe(&burst);
    handle.burst = Some(burst);
    // SAFETY: `out` is checked non-null by every caller; a writable
    // `BurstParams**` by the C contract.
    unsafe { *out = handle };
    SUCCESS
}

/// Sets `*out` to null and checks it can be written.
fn clear_out(out: *mut *mut BurstParams) -> daqiri::Result<()> {
    if out.is_null() {
        return Err(Error::new(Status::NullPtr, "the BurstParams** to fill is a null pointer"));
    }
    // SAFETY: non-null, and a writable `BurstParams**` by the C contract.
    unsafe { *out = std::ptr::null_mut() };
    Ok(())
}

fn deliver(call: &str, out: *mut *mut BurstParams, next: impl FnOnce() -> daqiri::Result<Option<Burst>>) -> i32 {
    if let Err(e) = clear_out(out) {
        return status::fail(call, e);
    }
    match next() {
        Ok(Some(burst)) => hand_over(burst, out),
        Ok(None) => status::fail(call, Error::new(Status::NotReady, "no burst is ready")),
        Err(e) => status::fail(call, e),
    }
}

/// The next burst of one queue (`port` and `queue` >= 0), of any queue of
/// a port (`queue` -1) or of any port (both -1). `NOT_READY` when none is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_get_rx_burst(out: *mut *mut BurstParams, port: i32, queue: i32) -> i32 {
    deliver("get_rx_burst", out, || {
        with_engine(|engine| match (port, queue) {
            (ANY, ANY) => Ok(engine.get_rx_burst_any()),
            (ANY, _) => Err(Error::invalid(format!("queue {queue} of any port: name the port"))),
            (_, ANY) => engine.get_rx_burst_from_port(port_id(port)?),
            _ => engine.get_rx_burst(port_id(port)?, queue_id(queue)?),
        })
    })
}

/// The next burst of a socket connection (`socket_get_server_conn_id`,
/// `socket_connect_to_server`), or the next completion of an RDMA one
/// (`rdma_get_server_conn_id`, `rdma_connect_to_server`; rdma.rs);
/// `server` says which side the program is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_get_rx_burst_conn(out: *mut *mut BurstParams, conn_id: usize, server: bool) -> i32 {
    if rdma::is_rdma_id(conn_id) {
        if let Err(e) = clear_out(out) {
            return status::fail("get_rx_burst", e);
        }
        return match rdma::next_completion(conn_id, server) {
            Ok(completion) => {
                // SAFETY: checked non-null by clear_out; a writable `BurstParams**` by the C contract.
                unsafe { *out = completion };
                SUCCESS
            }
            Err(e) => status::fail("get_rx_burst", e),
        };
    }
    deliver("get_rx_burst", out, || {
        with_engine(|engine| {
            let port = connections::port_of(engine, conn_id, Some(server))?;
            engine.get_rx_burst_from_port(port)
        })
    })
}

/// Runs `f` on a live handle; `fallback` (and a recorded error) when the
/// handle or `f` fails.
fn read<T>(
    call: &str,
    burst: *mut BurstParams,
    fallback: T,
    f: impl FnOnce(&mut BurstParams) -> daqiri::Result<T>,
) -> T {
    match handle::resolve(burst).and_then(f) {
        Ok(value) => value,
        Err(e) => {
            status::fail(call, e);
            fallback
        }
    }
}

/// Packets in the burst: those filled, or for a TX burst not yet filled,
/// those `set_header` asked for.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_num_packets(burst: *mut BurstParams) -> i64 {
    read("get_num_packets", burst, 0, |h| {
        Ok(h.burst.as_ref().map_or(i64::from(h.hdr.hdr.num_pkts), |b| b.num_packets() as i64))
    })
}

/// The burst's queue id.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_q_id(burst: *mut BurstParams) -> i32 {
    read("get_q_id", burst, -1, |h| Ok(i32::from(h.burst.as_ref().map_or(h.hdr.hdr.q_id, Burst::queue_id))))
}

/// Bytes in the burst's packets, all segments.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_burst_tot_byte(burst: *mut BurstParams) -> u64 {
    read("get_burst_tot_byte", burst, 0, |h| Ok(h.burst.as_ref().map_or(0, Burst::total_bytes)))
}

/// Where segment `seg` of packet `idx` starts: a host address, or a device
/// address for GPU memory. Null when the packet has no such segment.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_segment_packet_ptr(burst: *mut BurstParams, seg: i32, idx: i32) -> *mut c_void {
    read("get_segment_packet_ptr", burst, std::ptr::null_mut(), |h| {
        let role = h.role;
        let b = h.burst_mut()?;
        let (index, segment) = (packet_index(b, idx)?, segment_index(seg)?);
        if role == Role::Tx
            && let Some(buffer) = b.packet_mut(index).segment_buffer(segment)
        {
            return Ok(buffer.as_mut_ptr().cast());
        }
        match b.packet(index).segment_memory(segment) {
            Some(SegmentMemory::Host(bytes)) => Ok(bytes.as_ptr().cast_mut().cast()),
            Some(SegmentMemory::Device(slice)) => Ok(slice.ptr().address() as *mut c_void),
            None => Err(Error::invalid(format!("packet {idx} has no segment {seg} (freed, or not configured)"))),
        }
    })
}

/// Length of segment `seg` of packet `idx`.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_segment_packet_length(burst: *mut BurstParams, seg: i32, idx: i32) -> u32 {
    read("get_segment_packet_length", burst, 0, |h| {
        let b = h.burst()?;
        Ok(b.packet(packet_index(b, idx)?).segment_len(segment_index(seg)?) as u32)
    })
}

/// Length of packet `idx`, all segments.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_packet_length(burst: *mut BurstParams, idx: i32) -> u32 {
    read("get_packet_length", burst, 0, |h| {
        let b = h.burst()?;
        Ok(b.packet(packet_index(b, idx)?).len() as u32)
    })
}

/// The flow that matched packet `idx`; 0 when none did.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_packet_flow_id(burst: *mut BurstParams, idx: i32) -> u32 {
    read("get_packet_flow_id", burst, 0, |h| {
        let b = h.burst()?;
        Ok(b.packet(packet_index(b, idx)?).flow_id().unwrap_or(0))
    })
}

/// The NIC's receive timestamp of packet `idx` in nanoseconds;
/// `NOT_SUPPORTED` when the packet has none (no `rx.hardware_timestamps`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_get_packet_rx_timestamp(
    burst: *mut BurstParams,
    idx: i32,
    timestamp_ns: *mut u64,
) -> i32 {
    let found = handle::resolve(burst).and_then(|h| {
        let b = h.burst()?;
        let packet = b.packet(packet_index(b, idx)?);
        packet.rx_timestamp().ok_or_else(|| {
            Error::new(
                Status::NotSupported,
                format!("packet {idx} carries no receive timestamp (rx.hardware_timestamps)"),
            )
        })
    });
    match found {
        Ok(_) if timestamp_ns.is_null() => {
            status::fail("get_packet_rx_timestamp", Error::new(Status::NullPtr, "timestamp_ns is a null pointer"))
        }
        Ok(stamp) => {
            // SAFETY: non-null, a writable uint64_t* by the C contract.
            unsafe { *timestamp_ns = stamp };
            SUCCESS
        }
        Err(e) => status::fail("get_packet_rx_timestamp", e),
    }
}

/// What `get_reorder_burst_info` fills (c_api.h's `daqiri_gw_reorder_info`):
/// DAQIRI's `ReorderBurstInfo` fields, then two of ours.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ReorderInfo {
    /// The aggregate's batch number.
    pub batch_id: u64,
    /// Source packets in the aggregate.
    pub source_packet_count: u32,
    /// Slots in the aggregate (the plan's packets per batch).
    pub packets_per_batch: u32,
    /// Bytes per slot.
    pub payload_len: u32,
    /// The aggregate's bytes: `packets_per_batch` x `payload_len`.
    pub aggregate_len: u32,
    /// `DAQIRI_BURST_FLAG_*`.
    pub burst_flags: u32,
    /// The reorder plan's index among the interface's `reorder_configs`.
    pub plan: u16,
    /// Receive time of its first source packet (ns; 0 when not stamped).
    pub timestamp_ns: u64,
}

/// Fills `info` for a reorder aggregate; `INVALID_PARAMETER` for any other burst.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_get_reorder_burst_info(burst: *mut BurstParams, info: *mut ReorderInfo) -> i32 {
    const CALL: &str = "get_reorder_burst_info";
    if info.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "info is a null pointer"));
    }
    let filled = handle::resolve(burst).and_then(|h| {
        let b = h.burst()?;
        let plan = b.reorder_plan().ok_or_else(|| Error::invalid("this burst is not a reorder aggregate"))?;
        let slots = b.reorder_missing().map_or(1, |missing| missing.slots()).max(1);
        let aggregate_len = b.packet(0).len() as u32;
        Ok(ReorderInfo {
            batch_id: b.batch_id().unwrap_or(0),
            source_packet_count: b.source_packets(),
            packets_per_batch: slots,
            payload_len: aggregate_len / slots,
            aggregate_len,
            burst_flags: b.flags(),
            plan,
            timestamp_ns: b.timestamp_ns().unwrap_or(0),
        })
    });
    match filled {
        Ok(filled) => {
            // SAFETY: non-null, a writable daqiri_gw_reorder_info* by the C contract.
            unsafe { *info = filled };
            SUCCESS
        }
        Err(e) => status::fail(CALL, e),
    }
}

/// Copies `len` bytes from `data` into segment `seg` of packet `idx`, at
/// `dst_offset` into its buffer (host memory; a TX burst's whole buffer,
/// an RX burst's received bytes). Nothing is copied when the bytes would
/// not fit.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_copy_to_segment_packet(
    burst: *mut BurstParams,
    seg: i32,
    idx: i32,
    data: *const c_void,
    len: usize,
    dst_offset: usize,
) -> i32 {
    const CALL: &str = "copy_buffer_to_segment_packet";
    if data.is_null() && len > 0 {
        return status::fail(CALL, Error::new(Status::NullPtr, "data is a null pointer"));
    }
    let copied = handle::resolve(burst).and_then(|h| {
        let role = h.role;
        let b = h.burst_mut()?;
        let (index, segment) = (packet_index(b, idx)?, segment_index(seg)?);
        let mut packet = b.packet_mut(index);
        let buffer = match role {
            Role::Tx => packet.segment_buffer(segment),
            Role::Rx => None,
        }
        .ok_or_else(|| {
            Error::new(
                Status::NotSupported,
                format!("packet {idx} segment {seg} is not a TX buffer in host memory: nothing to copy into"),
            )
        })?;
        let capacity = buffer.len();
        let target = dst_offset.checked_add(len).and_then(|end| buffer.get_mut(dst_offset..end)).ok_or_else(|| {
            Error::invalid(format!("{len} bytes at offset {dst_offset} do not fit the {capacity}-byte buffer"))
        })?;
        if len > 0 {
            // SAFETY: `data` is non-null and `len` readable bytes by the C contract.
            target.copy_from_slice(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) });
        }
        Ok(())
    });
    status::status_of(CALL, copied)
}

/// Copies up to `len` bytes of segment `seg` of packet `idx`, from
/// `src_offset` into the segment, to `data`; `*copied` says how many
/// (fewer when the segment ends first). Host memory only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_copy_from_segment_packet(
    burst: *mut BurstParams,
    seg: i32,
    idx: i32,
    data: *mut c_void,
    len: usize,
    src_offset: usize,
    copied: *mut usize,
) -> i32 {
    const CALL: &str = "get_segment_packet_bytes";
    if (data.is_null() && len > 0) || copied.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "data or copied is a null pointer"));
    }
    let done = handle::resolve(burst).and_then(|h| {
        let b = h.burst()?;
        let (index, segment) = (packet_index(b, idx)?, segment_index(seg)?);
        let bytes = match b.packet(index).segment_memory(segment) {
            Some(SegmentMemory::Host(bytes)) => bytes,
            Some(SegmentMemory::Device(_)) => {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "packet {idx} segment {seg} is in GPU memory: copy it with CUDA from get_segment_packet_ptr"
                    ),
                ));
            }
            None => return Err(Error::invalid(format!("packet {idx} has no segment {seg}"))),
        };
        let source = bytes.get(src_offset..).ok_or_else(|| {
            Error::invalid(format!("src_offset {src_offset} is past the segment's {} bytes", bytes.len()))
        })?;
        let n = source.len().min(len);
        if n > 0 {
            // SAFETY: `data` is non-null and `len` >= n writable bytes by the C contract.
            unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), data.cast::<u8>(), n) };
        }
        Ok(n)
    });
    match done {
        Ok(n) => {
            // SAFETY: non-null, a writable size_t* by the C contract.
            unsafe { *copied = n };
            SUCCESS
        }
        Err(e) => status::fail(CALL, e),
    }
}

/// Waits until the device work on the burst (a GPU reorder aggregate's
/// kernel) is done; returns at once for a burst without any.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_synchronize_burst_event(burst: *mut BurstParams) -> i32 {
    status::status_of(
        "synchronize_burst_event",
        handle::resolve(burst).and_then(|h| {
            h.burst()?.wait_ready();
            Ok(())
        }),
    )
}

/// A live burst's header fields, for Rust callers (the Python module);
/// C reads them from the handle.
pub fn header_of(burst: *mut BurstParams) -> daqiri::Result<crate::handle::BurstFields> {
    handle::resolve(burst).map(|h| h.hdr.hdr)
}
