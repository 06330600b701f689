//! Burst writers: received bursts to storage, as DAQIRI's
//! `daqiri_write_raw_to_file` and pcap writes do.
//!
//! - [`RawWriter`] writes one file per packet, `<prefix>_<index>`, truncating,
//!   skipping `packet_data_offset` bytes of the logical packet (all segments
//!   in order, so an offset past the headers of a header-data-split burst
//!   writes only the payload).
//! - [`PcapWriter`] appends whole packets to a classic pcap v2.4 file
//!   (Ethernet link type, microsecond or nanosecond records). An existing
//!   file is appended to when compatible and refused with a clear error when
//!   not; a torn last record (a writer killed mid-write) is cut off first, so
//!   the file always reads to its last whole record.
//!
//! - [`GdsWriter`] (CUDA builds) writes bursts whose segments live in GPU
//!   memory to one raw or pcap file through GPUDirect Storage (cuFile).
//!
//! All have a synchronous call and an asynchronous one that takes the burst
//! and returns a [`FileWriteHandle`] to wait on, which hands the burst back.

#[cfg(feature = "cuda")]
mod gds;
mod handle;
mod pcap;
mod raw;

#[cfg(feature = "cuda")]
pub use gds::{GdsFormat, GdsMode, GdsWriteHandle, GdsWriter};
pub use handle::FileWriteHandle;
pub use pcap::{DEFAULT_SNAPLEN, PcapResolution, PcapWriter};
pub use raw::RawWriter;

/// What one write did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Packets written.
    pub packets: u64,
    /// Bytes written to storage, headers included.
    pub bytes: u64,
}

/// Refuses a burst any of whose segments lies in GPU memory, before a byte
/// is written: these writers read host memory, and a packet written without
/// its device segments would be a silent loss.
pub(crate) fn host_only(burst: &crate::Burst, writer: &str) -> crate::Result<()> {
    for (index, packet) in burst.packets().enumerate() {
        for segment in 0..crate::MAX_SEGMENTS {
            if let Some(crate::SegmentMemory::Device(_)) = packet.segment_memory(segment) {
                return Err(crate::Error::new(
                    crate::Status::NotSupported,
                    format!(
                        "packet {index} segment {segment} lies in GPU memory, which the {writer} cannot read: write bursts in device regions with the GDS writer (a cuda build)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The logical bytes of a packet: its segments in order.
pub(crate) fn logical_packet<'a>(packet: &crate::Packet<'a>) -> impl Iterator<Item = &'a [u8]> + Clone + use<'a> {
    let packet = *packet;
    (0..crate::MAX_SEGMENTS).filter_map(move |s| packet.segment(s))
}
