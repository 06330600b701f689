//! How many buffers a region really gets, by DAQIRI's rule for raw streams.

use crate::model::{EngineConfig, Loopback, MemoryRegion, StreamType};

/// NIC RX ring size DAQIRI uses for raw streams; pools below 1.5x of it are raised to 3x.
pub(crate) const RAW_RING_SIZE: u32 = 8192;

/// Buffers an RX queue's region gets: raw streams without software
/// loopback raise a pool below 1.5x the NIC ring to 3x, as DAQIRI does.
pub(crate) fn rx_num_bufs(config: &EngineConfig, region: &MemoryRegion) -> u32 {
    let raw = config.stream_type == Some(StreamType::Raw);
    if raw && config.loopback == Loopback::Off && region.num_bufs < RAW_RING_SIZE + RAW_RING_SIZE / 2 {
        RAW_RING_SIZE * 3
    } else {
        region.num_bufs
    }
}
