//! Bursts to files: DAQIRI's `daqiri_write_raw_to_file` (one file per
//! packet) and `daqiri_write_pcap_to_file` (appended to `<prefix>.pcap`).

use std::ffi::c_char;
use std::path::Path;

use daqiri::Error;
use daqiri::writer::{PcapResolution, PcapWriter, RawWriter};

use crate::handle::{self, BurstParams};
use crate::lifecycle::{text, with_engine};
use crate::status::status_of;

/// The output directory, which DAQIRI requires absolute.
fn directory<'a>(pointer: *const c_char) -> daqiri::Result<&'a Path> {
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
        let writer = RawWriter::new(directory(absolute_path)?, text("file_prefix", file_prefix)?, packet_data_offset)?;
        writer.write(h.burst()?).map(drop)
    });
    status_of("daqiri_write_raw_to_file", written)
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
        let path = directory(absolute_path)?.join(format!("{}.pcap", text("file_prefix", file_prefix)?));
        let burst = h.burst()?;
        let mut writer = PcapWriter::open(path, PcapResolution::Micros, None)?;
        let from_udp_socket = burst.num_packets() > 0 && burst.packet(0).source().is_some();
        match with_engine(|engine| engine.local_addr(burst.port_id()))? {
            Some(local) if from_udp_socket => writer.write_burst_as_udp(burst, local).map(drop),
            _ => writer.write_burst(burst).map(drop),
        }
    });
    status_of("daqiri_write_pcap_to_file", written)
}
