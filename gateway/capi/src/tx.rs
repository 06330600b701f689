//! Transmitting: TX burst handles, their packets, headers and lengths, and
//! `send_tx_burst`.
//!
//! Ownership as DAQIRI documents it, one case stricter: `send_tx_burst`
//! takes the burst whatever it answers, so a program that, as DAQIRI's
//! benchmarks do, frees nothing after a failed send loses no buffer, and
//! one that frees after it gets `INVALID_PARAMETER` (a freed burst), not a
//! crash.

use std::ffi::c_void;
use std::net::Ipv4Addr;

use daqiri::{Error, MAX_SEGMENTS, Status};

use crate::args::{packet_index, port_id};
use crate::connections;
use crate::handle::{self, BurstParams, Role};
use crate::lifecycle::with_engine;
use crate::rdma;
use crate::status::{self, status_of};

/// A TX burst handle with no packets yet: `set_header`, then
/// `get_tx_packet_burst`. Null once the program holds every handle the pool can make.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_create_tx_burst_params() -> *mut BurstParams {
    match handle::acquire(Role::Tx) {
        Some(handle) => handle,
        None => {
            status::fail("create_tx_burst_params", handle::exhausted());
            std::ptr::null_mut()
        }
    }
}

fn on_tx(call: &str, burst: *mut BurstParams, f: impl FnOnce(&mut BurstParams) -> daqiri::Result<()>) -> i32 {
    let result = handle::resolve(burst).and_then(|h| {
        if h.role != Role::Tx {
            return Err(Error::invalid(format!("{call} is for TX bursts; this one came from get_rx_burst")));
        }
        f(h)
    });
    status_of(call, result)
}

/// Port, queue, packets and segments of a TX burst not yet filled.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_set_header(burst: *mut BurstParams, port: u16, queue: u16, num: i32, segs: i32) -> i32 {
    on_tx("set_header", burst, |h| {
        if h.burst.is_some() {
            return Err(Error::invalid("set_header on a burst that already holds packets: send or free it first"));
        }
        h.hdr.hdr.port_id = port;
        h.hdr.hdr.q_id = queue;
        h.hdr.hdr.num_pkts = count("num", num)?;
        h.hdr.hdr.num_segs = count("segs", segs)?;
        Ok(())
    })
}

/// The packets a TX burst not yet filled will get.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_set_num_packets(burst: *mut BurstParams, num: i64) -> i32 {
    on_tx("set_num_packets", burst, |h| {
        if h.burst.is_some() {
            return Err(Error::invalid("set_num_packets on a burst that already holds packets"));
        }
        h.hdr.hdr.num_pkts = u32::try_from(num).map_err(|_| Error::invalid(format!("num {num} is out of range")))?;
        Ok(())
    })
}

fn count(what: &str, value: i32) -> daqiri::Result<u32> {
    u32::try_from(value).map_err(|_| Error::invalid(format!("{what} {value} is negative")))
}

/// Whether the buffers and metadata for the burst's header are free now.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_is_tx_burst_available(burst: *mut BurstParams) -> bool {
    let available = handle::resolve(burst).and_then(|h| {
        if h.rdma.is_some_and(|r| r.is_receive()) {
            return Ok(true);
        }
        let f = h.hdr.hdr;
        with_engine(|engine| engine.tx_burst_available(f.port_id, f.q_id, f.num_pkts as usize))
    });
    available.unwrap_or_else(|e| {
        status::fail("is_tx_burst_available", e);
        false
    })
}

/// Fills the burst with `num_pkts` packets of empty buffers, a buffer per segment.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_tx_packet_burst(burst: *mut BurstParams) -> i32 {
    on_tx("get_tx_packet_burst", burst, |h| {
        if h.burst.is_some() {
            return Err(Error::invalid("this burst already holds packets: send or free it first"));
        }
        if h.rdma.is_some_and(|r| r.is_receive()) {
            return rdma::arm_receive(h);
        }
        let f = h.hdr.hdr;
        let filled = with_engine(|engine| engine.get_tx_packet_burst(f.port_id, f.q_id, f.num_pkts as usize))?;
        let segments = (0..filled.num_packets()).map(|i| filled.packet(i).num_segments()).max().unwrap_or(0) as u32;
        if f.num_segs != 0 && filled.num_packets() > 0 && f.num_segs != segments {
            return Err(Error::invalid(format!(
                "set_header asked for {} segments; TX queue {} of port {} has {segments} (its memory_regions)",
                f.num_segs, f.q_id, f.port_id
            )));
        }
        h.hdr.hdr.num_segs = segments;
        h.hdr.hdr.max_pkt = filled.capacity() as u32;
        h.burst = Some(filled);
        Ok(())
    })
}

/// The socket connection a TX burst is for; it must be of the burst's port.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_set_connection_id(burst: *mut BurstParams, conn_id: usize) -> i32 {
    on_tx("set_connection_id", burst, |h| {
        let port = with_engine(|engine| connections::port_of(engine, conn_id, None))?;
        if port != h.hdr.hdr.port_id {
            return Err(Error::invalid(format!(
                "connection {conn_id:#x} is port {port}'s; this burst is for port {} (set_header)",
                h.hdr.hdr.port_id
            )));
        }
        h.conn_id = conn_id;
        Ok(())
    })
}

/// The connection of a burst: a TX burst's as set, an RX burst's from its
/// socket interface; 0 when it has none.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_get_connection_id(burst: *mut BurstParams) -> usize {
    let found = handle::resolve(burst).and_then(|h| {
        if h.role == Role::Tx {
            return Ok(h.conn_id);
        }
        let port = h.hdr.hdr.port_id;
        with_engine(|engine| Ok(engine.socket_mode(usize::from(port)).map_or(0, |_| connections::conn_of(port))))
    });
    found.unwrap_or_else(|e| {
        status::fail("get_connection_id", e);
        0
    })
}

/// Queues the burst for its TX worker, and frees the handle whatever the
/// answer: `SUCCESS`; `NO_SPACE_AVAILABLE` when the ring is full;
/// `NOT_READY` from a UDP server no peer has reached yet; the packets of a
/// refused burst are freed.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_send_tx_burst(burst: *mut BurstParams) -> i32 {
    const CALL: &str = "send_tx_burst";
    let h = match handle::resolve(burst) {
        Ok(h) => h,
        Err(e) => return status::fail(CALL, e),
    };
    if h.rdma.is_some() {
        return status_of(CALL, rdma::post(h));
    }
    let sent = match (h.role, h.burst.take()) {
        (Role::Rx, _) => Err(Error::invalid("this burst came from get_rx_burst: only TX bursts can be sent")),
        (Role::Tx, None) => Err(Error::invalid("this TX burst has no packets: call get_tx_packet_burst first")),
        (Role::Tx, Some(filled)) => with_engine(|engine| engine.send_tx_burst(filled).map_err(|refused| refused.error)),
    };
    if h.role == Role::Tx {
        handle::release(h);
    }
    status_of(CALL, sent)
}

fn on_packet(
    call: &str,
    burst: *mut BurstParams,
    idx: i32,
    f: impl FnOnce(daqiri::PacketMut<'_>) -> daqiri::Result<()>,
) -> i32 {
    on_tx(call, burst, |h| {
        let b = h.burst_mut()?;
        let index = packet_index(b, idx)?;
        f(b.packet_mut(index))
    })
}

/// Reads `n` segment lengths from C, into a fixed array (no allocation per packet).
#[inline(always)]
fn lengths(lens: *const i32, n: usize) -> daqiri::Result<([usize; MAX_SEGMENTS], usize)> {
    let mut out = [0usize; MAX_SEGMENTS];
    if n > MAX_SEGMENTS {
        return Err(Error::invalid(format!("{n} segment lengths: packets have at most {MAX_SEGMENTS} segments")));
    }
    if n == 0 {
        return Ok((out, 0));
    }
    if lens.is_null() {
        return Err(Error::new(Status::NullPtr, "lens is a null pointer"));
    }
    // SAFETY: non-null and `n` readable ints by the C contract.
    let lens = unsafe { std::slice::from_raw_parts(lens, n) };
    for (slot, &len) in out.iter_mut().zip(lens) {
        *slot = usize::try_from(len).map_err(|_| Error::invalid(format!("segment length {len} is negative")))?;
    }
    Ok((out, n))
}

/// Sets the segment lengths of packet `idx`, segment 0 first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_set_packet_lengths(
    burst: *mut BurstParams,
    idx: i32,
    lens: *const i32,
    n: usize,
) -> i32 {
    let (lens, n) = match lengths(lens, n) {
        Ok(lens) => lens,
        Err(e) => return status::fail("set_packet_lengths", e),
    };
    on_tx("set_packet_lengths", burst, |h| {
        if h.rdma.is_some_and(|r| r.is_receive()) {
            return rdma::receive_length(h, idx);
        }
        let b = h.burst_mut()?;
        let index = packet_index(b, idx)?;
        b.packet_mut(index).set_lengths(&lens[..n])
    })
}

/// Sets the same segment lengths on every packet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_set_all_packet_lengths(burst: *mut BurstParams, lens: *const i32, n: usize) -> i32 {
    let (lens, n) = match lengths(lens, n) {
        Ok(lens) => lens,
        Err(e) => return status::fail("set_all_packet_lengths", e),
    };
    on_tx("set_all_packet_lengths", burst, |h| {
        if h.rdma.is_some_and(|r| r.is_receive()) {
            return Ok(());
        }
        let b = h.burst_mut()?;
        (0..b.num_packets()).try_for_each(|i| b.packet_mut(i).set_lengths(&lens[..n]))
    })
}

/// Per-packet send times (ConnectX-7 accurate send) are not in this build.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_set_packet_tx_time(burst: *mut BurstParams, idx: i32, time: u64) -> i32 {
    on_packet("set_packet_tx_time", burst, idx, |_| {
        Err(Error::new(
            Status::NotSupported,
            format!("a send time ({time}) per packet needs a NIC's accurate send, which no backend of this build has"),
        ))
    })
}

/// Writes the IPv4 header after the Ethernet header of packet `idx`:
/// `ip_payload_len` is what follows it (UDP header and data), addresses in
/// host byte order, as DAQIRI takes them.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_set_ipv4_header(
    burst: *mut BurstParams,
    idx: i32,
    ip_payload_len: i32,
    proto: u8,
    src_host: u32,
    dst_host: u32,
) -> i32 {
    on_packet("set_ipv4_header", burst, idx, |mut packet| {
        let len = u16::try_from(ip_payload_len)
            .map_err(|_| Error::invalid(format!("ip_payload_len {ip_payload_len} is out of range")))?;
        packet.set_ipv4_header(len, proto, Ipv4Addr::from(src_host), Ipv4Addr::from(dst_host))
    })
}

/// Writes the UDP header after the IPv4 header of packet `idx`;
/// `udp_payload_len` is the data after it.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_set_udp_header(
    burst: *mut BurstParams,
    idx: i32,
    udp_payload_len: i32,
    src_port: u16,
    dst_port: u16,
) -> i32 {
    on_packet("set_udp_header", burst, idx, |mut packet| {
        let len = u16::try_from(udp_payload_len)
            .map_err(|_| Error::invalid(format!("udp_payload_len {udp_payload_len} is out of range")))?;
        packet.set_udp_header(len, src_port, dst_port)
    })
}

/// Copies `len` payload bytes after the UDP header of packet `idx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_set_udp_payload(
    burst: *mut BurstParams,
    idx: i32,
    data: *const c_void,
    len: usize,
) -> i32 {
    if data.is_null() && len > 0 {
        return status::fail("set_udp_payload", Error::new(Status::NullPtr, "data is a null pointer"));
    }
    let payload: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: non-null and `len` readable bytes by the C contract.
        unsafe { std::slice::from_raw_parts(data.cast(), len) }
    };
    on_packet("set_udp_payload", burst, idx, |mut packet| packet.set_udp_payload(payload))
}

/// Writes the Ethernet header of packet `idx` (host memory): `dst_addr`'s
/// six bytes as destination, the port's own address (`get_mac_addr`) as
/// source, IPv4 as its type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_set_eth_header(burst: *mut BurstParams, idx: i32, dst_addr: *const u8) -> i32 {
    const CALL: &str = "set_eth_header";
    if dst_addr.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "dst_addr is a null pointer"));
    }
    // SAFETY: non-null and six readable bytes by the C contract.
    let dst = unsafe { std::ptr::read_unaligned(dst_addr.cast::<[u8; 6]>()) };
    on_tx(CALL, burst, |h| {
        let b = h.burst_mut()?;
        let src = with_engine(|engine| engine.mac_address(b.port_id()))?;
        let index = packet_index(b, idx)?;
        b.packet_mut(index).set_eth_header(src, dst)
    })
}

/// Copies port `port`'s Ethernet address into six bytes at `mac`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_get_mac_addr(port: i32, mac: *mut u8) -> i32 {
    const CALL: &str = "get_mac_addr";
    if mac.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "mac is a null pointer"));
    }
    let address = port_id(port).and_then(|port| with_engine(|engine| engine.mac_address(port)));
    if let Ok(address) = address {
        // SAFETY: non-null and six writable bytes by the C contract.
        unsafe { std::ptr::write_unaligned(mac.cast::<[u8; 6]>(), address) };
    }
    status_of(CALL, address.map(drop))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_send_takes_the_handle_whatever_it_answers() {
        let handle = super::daqiri_gw_create_tx_burst_params();
        // No engine runs here: the send fails, and the handle is gone all the same.
        assert_ne!(super::daqiri_gw_send_tx_burst(handle), crate::status::SUCCESS);
        assert!(crate::handle::resolve(handle).unwrap_err().detail().contains("already freed"));
    }
}
