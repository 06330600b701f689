//! Bursts to files: DAQIRI's `daqiri_write_raw_to_file` (one file per
//! packet) and `daqiri_write_pcap_to_file` (appended to `<prefix>.pcap`).

use std::ffi::c_char;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use daqiri::Error;
use daqiri::writer::{PcapResolution, PcapWriter, RawWriter};

use crate::handle::{self, BurstParams};
use crate::lifecycle::{text, with_engine};
use crate::status::status_of;

/// The output directory, which DAQIRI requires absolute.
pub(crate) fn directory<'a>(pointer: *const c_char) -> daqiri::Result<&'a Path> {
    let dir = Path::new(text("absolute_path", pointer)?);
    if !dir.is_absolute() {
        return Err(Error::invalid(format!("absolute_path \"{}\" is not absolute", dir.display())));
    }
    Ok(dir)
}

/// Writes packet `i` to `<absolute_path>/<file_prefix>_<i>`, skipping the
/// first `packet_data_offset` bytes of each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_write_raw_to_file(
    burst: *mut BurstParams,
    absolute_path: *const c_char,
    file_prefix: *const c_char,
    packet_data_offset: usize,
) -> i32 {
    let written = handle::resolve(burst).and_then(|h| {
        let writer = raw_writer(absolute_path, file_prefix, packet_data_offset)?;
        writer.write(h.burst()?).map(drop)
    });
    status_of("daqiri_write_raw_to_file", written)
}

/// The raw writer of a call's arguments.
pub(crate) fn raw_writer(
    absolute_path: *const c_char,
    file_prefix: *const c_char,
    packet_data_offset: usize,
) -> daqiri::Result<RawWriter> {
    RawWriter::new(directory(absolute_path)?, text("file_prefix", file_prefix)?, packet_data_offset)
}

/// `<absolute_path>/<file_prefix>.pcap`.
pub(crate) fn pcap_path(absolute_path: *const c_char, file_prefix: *const c_char) -> daqiri::Result<PathBuf> {
    Ok(directory(absolute_path)?.join(format!("{}.pcap", text("file_prefix", file_prefix)?)))
}

/// The socket address a UDP socket's burst was received on, to frame its
/// datagrams for a pcap; `None` for other bursts.
pub(crate) fn udp_local(burst: &daqiri::Burst) -> daqiri::Result<Option<SocketAddr>> {
    if burst.num_packets() == 0 || burst.packet(0).source().is_none() {
        return Ok(None);
    }
    with_engine(|engine| engine.local_addr(burst.port_id()))
}

/// Appends the burst's packets to `<absolute_path>/<file_prefix>.pcap`
/// (microsecond records), creating it with a global header when missing.
/// Datagrams from a UDP socket are written as the Ethernet/IPv4/UDP frames
/// that carried them (sender to the socket's address), so pcap readers
/// dissect them; DAQIRI writes the bare payloads under an Ethernet link type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_write_pcap_to_file(
    burst: *mut BurstParams,
    absolute_path: *const c_char,
    file_prefix: *const c_char,
) -> i32 {
    let written = handle::resolve(burst).and_then(|h| {
        let burst = h.burst()?;
        let mut writer = PcapWriter::open(pcap_path(absolute_path, file_prefix)?, PcapResolution::Micros, None)?;
        match udp_local(burst)? {
            Some(local) => writer.write_burst_as_udp(burst, local).map(drop),
            None => writer.write_burst(burst).map(drop),
        }
    });
    status_of("daqiri_write_pcap_to_file", written)
}
