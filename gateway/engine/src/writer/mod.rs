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
//! - [`S3Writer`] (the `s3` feature) uploads each packet as an S3 object,
//!   `<prefix>_<index>`, as DAQIRI's `daqiri_write_raw_to_s3_objects_async`.
//! - [`GdsWriter`] (CUDA builds) writes bursts whose segments live in GPU
//!   memory to one raw or pcap file through GPUDirect Storage (cuFile).
//!
//! All have a synchronous call and an asynchronous one that takes the burst
//! and returns a [`FileWriteHandle`] to wait on, which hands the burst back.
//! The raw and pcap writers read GPU segments through a copy to the host (a
//! CUDA build), as DAQIRI's writers do through GDS.

use std::borrow::Cow;

#[cfg(feature = "cuda")]
mod gds;
mod handle;
mod pcap;
mod raw;
#[cfg(feature = "s3")]
mod s3;

#[cfg(feature = "cuda")]
pub use gds::{GdsFormat, GdsMode, GdsWriteHandle, GdsWriter};
pub use handle::FileWriteHandle;
pub use pcap::{DEFAULT_SNAPLEN, PcapResolution, PcapWriter, pcap_global_header, pcap_record_header};
pub use raw::RawWriter;
#[cfg(feature = "s3")]
pub use s3::{
    MAX_SINGLE_PUT_BYTES, S3Bucket, S3Config, S3Download, S3ObjectStream, S3Upload, S3UploadStatus, S3Writer,
};

/// What one write did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Packets written.
    pub packets: u64,
    /// Bytes written to storage, headers included.
    pub bytes: u64,
}

/// Every packet of `burst` as the CPU reads it, its segments in order:
/// host segments in place, GPU segments copied to the host, all of them
/// before a byte is written, so a failed copy (or a build without CUDA,
/// `NOT_SUPPORTED`) writes nothing. The copy is the bounce buffer cuFile's
/// compatibility mode would use; `GdsWriter` writes from GPU memory directly.
pub(crate) fn host_packets<'a>(burst: &'a crate::Burst, writer: &str) -> crate::Result<Vec<Vec<Cow<'a, [u8]>>>> {
    // An RX burst's copy into GPU memory may still run.
    burst.wait_ready();
    burst
        .packets()
        .enumerate()
        .map(|(index, packet)| {
            (0..crate::MAX_SEGMENTS)
                .filter_map(|s| packet.segment_to_host(s).transpose())
                .collect::<crate::Result<Vec<_>>>()
                .map_err(|e| {
                    crate::Error::new(e.status, format!("the {writer} cannot read packet {index}: {}", e.message))
                })
        })
        .collect()
}

/// A packet's pieces from `offset` bytes into its logical bytes on: the
/// pieces that hold them, the first cut where the offset falls inside it.
pub(crate) fn after_offset<'p>(pieces: &'p [Cow<'_, [u8]>], offset: usize) -> impl Iterator<Item = &'p [u8]> + 'p {
    let mut skip = offset;
    pieces.iter().map(move |piece| {
        let cut = skip.min(piece.len());
        skip -= cut;
        &piece[cut..]
    })
}
