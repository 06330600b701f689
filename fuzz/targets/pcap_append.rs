//! The capture writer's reader of existing pcap files (`PcapWriter::open`,
//! which appends): any file is either refused, untouched, or appended to so
//! that it stays a whole pcap file. The expected bytes are worked out here
//! from the pcap format: the header is checked, a torn last record cut, one
//! record added.
//!
//! The first input byte picks the options (bit 0: nanosecond timestamps,
//! bit 1: a 64-byte snap length asked for); the rest is the file.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use daqiri::writer::{DEFAULT_SNAPLEN, PcapResolution, PcapWriter};

const MICROS: u32 = 0xa1b2_c3d4;
const NANOS: u32 = 0xa1b2_3c4d;
const PACKET: [u8; 100] = [0x5a; 100];

fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The file's snap length when it may be appended to with `magic`.
fn appendable(file: &[u8], magic: u32) -> Option<u32> {
    let ok = file.len() >= 24 && le32(file, 0) == magic && file[4..8] == [2, 0, 4, 0] && le32(file, 20) == 1;
    ok.then(|| le32(file, 16))
}

/// The end of the last whole record.
fn whole_records(file: &[u8]) -> usize {
    let mut at = 24;
    while at + 16 <= file.len() {
        let next = at + 16 + le32(file, at + 8) as usize;
        if next > file.len() {
            break;
        }
        at = next;
    }
    at
}

fn expected(file: &[u8], magic: u32, asked: Option<u32>, time: SystemTime) -> Option<Vec<u8>> {
    let (mut out, snaplen) = if file.is_empty() {
        let snaplen = asked.unwrap_or(DEFAULT_SNAPLEN);
        let mut header = Vec::with_capacity(24);
        for word in [magic, 0x0004_0002, 0, 0, snaplen, 1] {
            header.extend_from_slice(&word.to_le_bytes());
        }
        (header, snaplen)
    } else {
        let in_file = appendable(file, magic)?;
        (file[..whole_records(file)].to_vec(), asked.unwrap_or(in_file).min(in_file))
    };
    let since = time.duration_since(UNIX_EPOCH).expect("after 1970");
    let fraction = if magic == NANOS { since.subsec_nanos() } else { since.subsec_micros() };
    let incl = PACKET.len().min(snaplen as usize);
    for word in [since.as_secs() as u32, fraction, incl as u32, PACKET.len() as u32] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&PACKET[..incl]);
    Some(out)
}

fn scratch_file() -> PathBuf {
    let dir = std::path::Path::new("/dev/shm");
    let dir = if dir.is_dir() { dir.to_path_buf() } else { std::env::temp_dir() };
    dir.join(format!("daqiri-fuzz-pcap-{}", std::process::id()))
}

fn main() {
    let path = scratch_file();
    let time = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    daqiri_gateway::fuzzing::log_panics();
    afl::fuzz!(|data: &[u8]| {
        let Some((&options, file)) = data.split_first() else { return };
        let (resolution, magic) =
            if options & 1 == 1 { (PcapResolution::Nanos, NANOS) } else { (PcapResolution::Micros, MICROS) };
        let asked = (options & 2 == 2).then_some(64);
        std::fs::write(&path, file).expect("the scratch file is writable");
        let opened = PcapWriter::open(&path, resolution, asked).and_then(|mut writer| {
            writer.write_packet(std::iter::once(&PACKET[..]), time)?;
            writer.flush()
        });
        let after = std::fs::read(&path).expect("the scratch file is readable");
        match (opened, expected(file, magic, asked, time)) {
            (Ok(()), Some(want)) => assert!(after == want, "the appended file differs from the format's rule"),
            (Err(_), None) => assert!(after == file, "a refused file was changed"),
            (Ok(()), None) => panic!("a file that cannot be appended to was accepted"),
            (Err(e), Some(_)) => panic!("an appendable file was refused: {e}"),
        }
    });
    let _ = std::fs::remove_file(path);
}
