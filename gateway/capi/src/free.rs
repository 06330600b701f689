//! Giving buffers and bursts back: DAQIRI's `free_*` calls.
//!
//! Freeing a burst's metadata also frees the packets it still holds (where
//! DAQIRI would leak them until the engine stops). A burst freed twice, or
//! freed after `send_tx_burst`, answers `INVALID_PARAMETER` and changes nothing.

use daqiri::Error;

use crate::args::{packet_index, segment_index};
use crate::handle::{self, BurstParams, Role};
use crate::status::status_of;

/// The direction a `free_*_rx` / `free_*_tx` call names (c_api.h's
/// `DAQIRI_GW_RX` / `DAQIRI_GW_TX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Rx,
    Tx,
    /// Either (`free_segment_packets_and_burst`).
    Any,
}

impl Side {
    fn from_c(side: i32) -> daqiri::Result<Self> {
        match side {
            0 => Ok(Side::Rx),
            1 => Ok(Side::Tx),
            _ => Err(Error::invalid(format!("side {side} is neither DAQIRI_GW_RX (0) nor DAQIRI_GW_TX (1)"))),
        }
    }
}

fn matches(side: Side, role: Role) -> bool {
    matches!((side, role), (Side::Any, _) | (Side::Rx, Role::Rx) | (Side::Tx, Role::Tx))
}

fn on_handle(call: &str, burst: *mut BurstParams, f: impl FnOnce(&mut BurstParams) -> daqiri::Result<()>) -> i32 {
    status_of(call, handle::resolve(burst).and_then(f))
}

/// Frees the handle and whatever packets it still holds.
fn release(call: &str, burst: *mut BurstParams, side: daqiri::Result<Side>) -> i32 {
    on_handle(call, burst, |h| {
        let side = side?;
        if !matches(side, h.role) {
            let (is, other) = if h.role == Role::Rx { ("an RX", "_rx") } else { ("a TX", "_tx") };
            return Err(Error::invalid(format!("{call} was given {is} burst: free it with the {other} call")));
        }
        handle::release(h);
        Ok(())
    })
}

/// Frees every packet of the burst and the burst (`free_all_packets_and_burst_rx/_tx`).
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_free_all_packets_and_burst(burst: *mut BurstParams, side: i32) -> i32 {
    release("free_all_packets_and_burst", burst, Side::from_c(side))
}

/// Frees the burst's metadata (`free_rx_burst`, `free_tx_metadata`, ...),
/// and with it any packet not freed yet.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_free_burst(burst: *mut BurstParams, side: i32) -> i32 {
    release("free_burst", burst, Side::from_c(side))
}

/// Frees every segment of packet `idx`.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_free_packet(burst: *mut BurstParams, idx: i32) -> i32 {
    on_handle("free_packet", burst, |h| {
        let b = h.burst_mut()?;
        let index = packet_index(b, idx)?;
        b.free_packet(index);
        Ok(())
    })
}

/// Frees segment `seg` of packet `idx`.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_free_packet_segment(burst: *mut BurstParams, seg: i32, idx: i32) -> i32 {
    on_handle("free_packet_segment", burst, |h| {
        let segment = segment_index(seg)?;
        let b = h.burst_mut()?;
        let index = packet_index(b, idx)?;
        b.free_packet_segment(segment, index);
        Ok(())
    })
}

/// Frees segment `seg` of every packet.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_free_all_segment_packets(burst: *mut BurstParams, seg: i32) -> i32 {
    on_handle("free_all_segment_packets", burst, |h| {
        let segment = segment_index(seg)?;
        h.burst_mut()?.free_all_segment_packets(segment);
        Ok(())
    })
}

/// Frees segment `seg` of every packet, then the burst.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_free_segment_packets_and_burst(burst: *mut BurstParams, seg: i32) -> i32 {
    let freed = daqiri_gw_free_all_segment_packets(burst, seg);
    if freed != crate::status::SUCCESS {
        return freed;
    }
    release("free_segment_packets_and_burst", burst, Ok(Side::Any))
}
