//! `format: gds` in a build without the `cuda` feature: the capture
//! manager refuses such a capture ([`gds_available`]) before any of the
//! rest could run, so its device slots and writers have no values. The
//! session is written once, for both builds, against this module's shape.

use std::net::SocketAddrV4;
use std::path::Path;

use daqiri::{Burst, Packet};

use super::device_side::DeviceSide;
use super::error::CaptureError;
use super::ring::Record;

/// Why no `gds` capture runs here.
const NO_GDS: &str =
    "format gds (GPUDirect Storage) needs a gateway built with the cuda feature; this one has no GPU support";

/// Refuses every `gds` capture.
pub(super) fn gds_available() -> Result<(), CaptureError> {
    Err(CaptureError::NotImplemented(NO_GDS.into()))
}

/// A GDS capture's device ring: none in this build.
#[derive(Debug)]
pub(super) enum DeviceSlots {}

/// A pcap file written through cuFile: none in this build.
#[derive(Debug)]
pub(super) enum GdsWriter {}

impl DeviceSlots {
    pub(super) fn ring_slots(_side: DeviceSide, most: usize) -> usize {
        most
    }

    pub(super) fn new(_side: DeviceSide, _slots: usize) -> anyhow::Result<Self> {
        anyhow::bail!(NO_GDS)
    }

    pub(super) fn bind_writer_thread(&self) -> anyhow::Result<()> {
        match *self {}
    }

    // A record that cannot be staged goes back to its ring: moved whole, as a slot is.
    #[allow(clippy::result_large_err)]
    pub(super) fn stage(
        &self,
        _record: Record,
        _packet: &Packet<'_>,
        _frame: Option<(SocketAddrV4, SocketAddrV4)>,
    ) -> Result<(), Record> {
        match *self {}
    }

    pub(super) fn finish(&self, _burst: &Burst, _done: impl FnMut(Record, bool)) {
        match *self {}
    }
}

pub(super) fn write_record(
    writer: &mut GdsWriter,
    _slots: Option<&DeviceSlots>,
    _record: &Record,
) -> anyhow::Result<u64> {
    match *writer {}
}

pub(super) fn open_pcap(_path: &Path, _snaplen: u32) -> anyhow::Result<(GdsWriter, &'static str)> {
    anyhow::bail!(NO_GDS)
}

pub(super) fn write_aggregate(
    _path: &Path,
    _slots: Option<&DeviceSlots>,
    _record: &Record,
) -> anyhow::Result<(u64, &'static str)> {
    anyhow::bail!(NO_GDS)
}
