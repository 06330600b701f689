//! C's integer arguments as the engine's indices, or an error naming them.

use daqiri::{Burst, Error};

/// A packet index as a burst's, or why not.
pub(crate) fn packet_index(burst: &Burst, idx: i32) -> daqiri::Result<usize> {
    usize::try_from(idx).ok().filter(|&i| i < burst.num_packets()).ok_or_else(|| {
        Error::invalid(format!("packet index {idx} is outside the burst's {} packets", burst.num_packets()))
    })
}

/// A segment index as a burst's, or why not.
pub(crate) fn segment_index(seg: i32) -> daqiri::Result<usize> {
    usize::try_from(seg).ok().filter(|&s| s < daqiri::MAX_SEGMENTS).ok_or_else(|| {
        Error::invalid(format!("segment {seg} does not exist: packets have at most {} segments", daqiri::MAX_SEGMENTS))
    })
}

/// A port id.
pub(crate) fn port_id(port: i32) -> daqiri::Result<u16> {
    u16::try_from(port).map_err(|_| Error::invalid(format!("port {port} does not exist")))
}

/// A queue id.
pub(crate) fn queue_id(queue: i32) -> daqiri::Result<u16> {
    u16::try_from(queue).map_err(|_| Error::invalid(format!("queue {queue} does not exist")))
}
