//! Classic pcap v2.4 files, Ethernet link type, written by hand: the format
//! is 24 + 16 bytes of headers, and appending safely to an existing file
//! (checking its header, cutting a torn last record) is exactly what the
//! pcap crates do not offer.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{FileWriteHandle, WriteSummary, host_packets};
use crate::burst::Burst;
use crate::error::{Error, Result, Status};
use crate::headers;

const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
const LINKTYPE_ETHERNET: u32 = 1;
const GLOBAL_HEADER: u64 = 24;
const RECORD_HEADER: u64 = 16;
/// Records buffered before they go to the file.
const BUFFER_BYTES: usize = 1 << 20;
/// Snap length written into new files and used when none is asked for.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Timestamp resolution of a pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PcapResolution {
    /// Microseconds (magic `a1b2c3d4`), what every reader knows.
    #[default]
    Micros,
    /// Nanoseconds (magic `a1b23c4d`).
    Nanos,
}

impl PcapResolution {
    fn magic(self) -> u32 {
        match self {
            PcapResolution::Micros => MAGIC_MICROS,
            PcapResolution::Nanos => MAGIC_NANOS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PcapResolution::Micros => "microsecond",
            PcapResolution::Nanos => "nanosecond",
        }
    }
}

/// An open pcap file, positioned to append.
#[derive(Debug)]
pub struct PcapWriter {
    path: PathBuf,
    out: BufWriter<File>,
    resolution: PcapResolution,
    snaplen: u32,
    scratch: Vec<u8>,
    /// File length after the last successful flush: what is surely written.
    flushed_len: u64,
}

impl PcapWriter {
    /// Creates `path`, which must not exist yet, with a global header.
    pub fn create(path: impl AsRef<Path>, resolution: PcapResolution, snaplen: Option<u32>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(|e| {
            let status = if e.kind() == std::io::ErrorKind::AlreadyExists {
                Status::InvalidParameter
            } else {
                Status::GenericFailure
            };
            Error::io(status, format!("cannot create {}", path.display()), e)
        })?;
        Self::on_file(path, file, resolution, snaplen)
    }

    /// Opens `path` for appending, creating it with a global header when it
    /// is missing or empty. An existing file must be little-endian pcap v2.4,
    /// Ethernet, with the same resolution; a torn last record is cut off.
    pub fn open(path: impl AsRef<Path>, resolution: PcapResolution, snaplen: Option<u32>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(Status::GenericFailure, format!("cannot open {}", path.display()), e))?;
        Self::on_file(path, file, resolution, snaplen)
    }

    /// Writes the global header into an empty `file`, or checks an existing
    /// one's, and positions it to append.
    fn on_file(path: PathBuf, mut file: File, resolution: PcapResolution, snaplen: Option<u32>) -> Result<Self> {
        let fail = |e| Error::io(Status::GenericFailure, format!("cannot open {}", path.display()), e);
        let len = file.metadata().map_err(fail)?.len();
        let snaplen = if len == 0 {
            let snaplen = snaplen.unwrap_or(DEFAULT_SNAPLEN);
            file.write_all(&pcap_global_header(resolution, snaplen)).map_err(fail)?;
            snaplen
        } else {
            let file_snaplen = check_header(&mut file, &path, resolution)?;
            let end = last_whole_record(&mut file, len).map_err(fail)?;
            if end < len {
                tracing::warn!(file = %path.display(), "cutting a torn last record ({} bytes) before appending", len - end);
                file.set_len(end).map_err(fail)?;
            }
            snaplen.unwrap_or(file_snaplen).min(file_snaplen)
        };
        let flushed_len = file.seek(SeekFrom::End(0)).map_err(fail)?;
        Ok(Self {
            path,
            out: BufWriter::with_capacity(BUFFER_BYTES, file),
            resolution,
            snaplen,
            scratch: Vec::new(),
            flushed_len,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record; `pieces` are the packet's bytes in order.
    pub fn write_packet<'a>(
        &mut self,
        pieces: impl Iterator<Item = &'a [u8]> + Clone,
        time: SystemTime,
    ) -> Result<u64> {
        let orig_len: usize = pieces.clone().map(<[u8]>::len).sum();
        let incl_len = orig_len.min(self.snaplen as usize);
        let header = pcap_record_header(self.resolution, time, incl_len as u32, orig_len as u32);
        let fail = |e| Error::io(Status::GenericFailure, format!("cannot write {}", self.path.display()), e);
        self.out.write_all(&header).map_err(fail)?;
        let mut left = incl_len;
        for piece in pieces {
            let take = left.min(piece.len());
            self.out.write_all(&piece[..take]).map_err(fail)?;
            left -= take;
        }
        Ok(RECORD_HEADER + incl_len as u64)
    }

    /// Appends every packet of a burst and flushes, so the file is whole on
    /// disk. GPU segments are copied to the host first (a CUDA build;
    /// refused whole, `NOT_SUPPORTED`, without one).
    pub fn write_burst(&mut self, burst: &Burst) -> Result<WriteSummary> {
        let packets = host_packets(burst, "pcap writer")?;
        let mut summary = WriteSummary::default();
        for pieces in &packets {
            summary.bytes += self.write_packet(pieces.iter().map(|p| &p[..]), SystemTime::now())?;
            summary.packets += 1;
        }
        self.flush()?;
        Ok(summary)
    }

    /// Appends the datagrams of a socket burst as complete Ethernet/IPv4/UDP
    /// frames, synthesised from each packet's sender and the socket's `local`
    /// address, so Wireshark dissects them like a capture from the wire.
    pub fn write_burst_as_udp(&mut self, burst: &Burst, local: SocketAddr) -> Result<WriteSummary> {
        let SocketAddr::V4(local) = local else {
            return Err(Error::new(
                Status::NotSupported,
                "synthesised frames are IPv4 only; write IPv6 streams as raw",
            ));
        };
        let packets = host_packets(burst, "pcap writer")?;
        let mut summary = WriteSummary::default();
        let mut frame = std::mem::take(&mut self.scratch);
        for (packet, pieces) in burst.packets().zip(&packets) {
            let Some(SocketAddr::V4(source)) = packet.source() else {
                return Err(Error::invalid(
                    "a packet has no IPv4 sender: only datagrams received on a UDP socket can be written as frames",
                ));
            };
            headers::synthesize_udp_frame(&mut frame, source, local, pieces.iter().map(|p| &p[..]))?;
            summary.bytes += self.write_packet(std::iter::once(&frame[..]), SystemTime::now())?;
            summary.packets += 1;
        }
        self.scratch = frame;
        self.flush()?;
        Ok(summary)
    }

    /// Pushes buffered records to the file.
    pub fn flush(&mut self) -> Result<()> {
        let fail = |e| Error::io(Status::GenericFailure, format!("cannot write {}", self.path.display()), e);
        self.out.flush().map_err(fail)?;
        self.flushed_len = self.out.get_ref().stream_position().map_err(fail)?;
        Ok(())
    }

    /// After a failed write or flush: drops what is still buffered and cuts
    /// the file back to the last successful flush, so it ends on a record
    /// that was counted as written.
    pub fn discard_unflushed(&mut self) -> Result<()> {
        let fail = |e| Error::io(Status::GenericFailure, format!("cannot truncate {}", self.path.display()), e);
        let file = self.out.get_ref().try_clone().map_err(fail)?;
        let (_, _buffered) =
            std::mem::replace(&mut self.out, BufWriter::with_capacity(BUFFER_BYTES, file)).into_parts();
        let file = self.out.get_mut();
        file.set_len(self.flushed_len).map_err(fail)?;
        file.seek(SeekFrom::Start(self.flushed_len)).map_err(fail)?;
        Ok(())
    }

    /// Whether the file is still reachable at its path: not unlinked (its
    /// directory removed) and not replaced by another file.
    pub fn still_at_path(&self) -> std::io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let open = self.out.get_ref().metadata()?;
        if open.nlink() == 0 {
            return Ok(false);
        }
        match std::fs::metadata(&self.path) {
            Ok(at_path) => Ok(at_path.dev() == open.dev() && at_path.ino() == open.ino()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Opens `path`, appends the burst and closes, on a writer thread.
    pub fn append_async(path: impl AsRef<Path>, resolution: PcapResolution, burst: Burst) -> Result<FileWriteHandle> {
        let path = path.as_ref().to_path_buf();
        FileWriteHandle::spawn(burst, move |b| PcapWriter::open(&path, resolution, None)?.write_burst(b))
    }

    /// As [`append_async`](Self::append_async), a UDP socket's datagrams
    /// framed as [`write_burst_as_udp`](Self::write_burst_as_udp) frames them.
    pub fn append_as_udp_async(
        path: impl AsRef<Path>,
        resolution: PcapResolution,
        burst: Burst,
        local: SocketAddr,
    ) -> Result<FileWriteHandle> {
        let path = path.as_ref().to_path_buf();
        FileWriteHandle::spawn(burst, move |b| PcapWriter::open(&path, resolution, None)?.write_burst_as_udp(b, local))
    }
}

impl Drop for PcapWriter {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

/// A record's header: when, bytes stored, bytes the packet had (for pcap
/// files written elsewhere than a local file, such as an S3 object).
pub fn pcap_record_header(resolution: PcapResolution, time: SystemTime, incl_len: u32, orig_len: u32) -> [u8; 16] {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let fraction = match resolution {
        PcapResolution::Micros => since.subsec_micros(),
        PcapResolution::Nanos => since.subsec_nanos(),
    };
    let mut header = [0u8; RECORD_HEADER as usize];
    header[0..4].copy_from_slice(&(since.as_secs() as u32).to_le_bytes());
    header[4..8].copy_from_slice(&fraction.to_le_bytes());
    header[8..12].copy_from_slice(&incl_len.to_le_bytes());
    header[12..16].copy_from_slice(&orig_len.to_le_bytes());
    header
}

/// A pcap file's 24-byte global header: Ethernet frames, `snaplen`, `resolution`.
pub fn pcap_global_header(resolution: PcapResolution, snaplen: u32) -> [u8; GLOBAL_HEADER as usize] {
    let mut h = [0u8; GLOBAL_HEADER as usize];
    h[0..4].copy_from_slice(&resolution.magic().to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    h
}

/// Checks an existing file's global header; returns its snap length.
fn check_header(file: &mut File, path: &Path, wanted: PcapResolution) -> Result<u32> {
    let mut h = [0u8; GLOBAL_HEADER as usize];
    let refuse =
        |why: String| Error::new(Status::InvalidParameter, format!("cannot append to {}: {why}", path.display()));
    file.read_exact(&mut h).map_err(|_| refuse("shorter than a pcap global header (24 bytes)".into()))?;
    let word = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let found = match word(0) {
        MAGIC_MICROS => PcapResolution::Micros,
        MAGIC_NANOS => PcapResolution::Nanos,
        m if m.swap_bytes() == MAGIC_MICROS || m.swap_bytes() == MAGIC_NANOS => {
            return Err(refuse("it is a big-endian pcap; only little-endian files are appended to".into()));
        }
        m => return Err(refuse(format!("not a classic pcap file (magic {m:#010x}; pcapng is not appended to)"))),
    };
    let (major, minor) = (u16::from_le_bytes([h[4], h[5]]), u16::from_le_bytes([h[6], h[7]]));
    if (major, minor) != (2, 4) {
        return Err(refuse(format!("pcap version {major}.{minor}, expected 2.4")));
    }
    if word(20) != LINKTYPE_ETHERNET {
        return Err(refuse(format!("link type {}, expected 1 (Ethernet)", word(20))));
    }
    if found != wanted {
        return Err(refuse(format!("it has {} timestamps, this capture writes {}", found.name(), wanted.name())));
    }
    Ok(word(16))
}

/// The end of the last complete record.
fn last_whole_record(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut reader = BufReader::new(&mut *file);
    reader.seek(SeekFrom::Start(GLOBAL_HEADER))?;
    let mut at = GLOBAL_HEADER;
    let mut header = [0u8; RECORD_HEADER as usize];
    while at + RECORD_HEADER <= len {
        reader.read_exact(&mut header)?;
        let incl = u64::from(u32::from_le_bytes([header[8], header[9], header[10], header[11]]));
        if at + RECORD_HEADER + incl > len {
            break;
        }
        reader.seek_relative(incl as i64)?;
        at += RECORD_HEADER + incl;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path in a fresh directory that goes, with the file, when the guard drops.
    fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::Builder::new().prefix("daqiri-pcap-").tempdir().unwrap();
        let path = dir.path().join(name);
        (dir, path)
    }

    fn records(path: &Path) -> usize {
        let bytes = std::fs::read(path).unwrap();
        let mut at = 24;
        let mut n = 0;
        while at + 16 <= bytes.len() {
            at += 16 + u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            n += 1;
        }
        assert_eq!(at, bytes.len(), "file ends on a record boundary");
        n
    }

    #[test]
    fn appends_to_a_compatible_file() {
        let (_dir, path) = temp("append");
        for _ in 0..2 {
            let mut w = PcapWriter::open(&path, PcapResolution::Micros, None).unwrap();
            w.write_packet([&b"abc"[..], b"def"].into_iter(), SystemTime::now()).unwrap();
        }
        assert_eq!(records(&path), 2);
        assert_eq!(std::fs::read(&path).unwrap().len(), 24 + 2 * (16 + 6));
    }

    #[test]
    fn refuses_incompatible_files_with_the_reason() {
        let (_dir, path) = temp("nanos");
        drop(PcapWriter::open(&path, PcapResolution::Nanos, None).unwrap());
        let err = PcapWriter::open(&path, PcapResolution::Micros, None).unwrap_err();
        assert!(err.message.contains("nanosecond timestamps, this capture writes microsecond"), "{err}");
        std::fs::write(&path, b"not a pcap file at all, clearly").unwrap();
        assert!(
            PcapWriter::open(&path, PcapResolution::Micros, None).unwrap_err().message.contains("not a classic pcap")
        );
    }

    #[test]
    fn cuts_a_torn_record_before_appending() {
        let (_dir, path) = temp("torn");
        let mut w = PcapWriter::open(&path, PcapResolution::Micros, None).unwrap();
        w.write_packet(std::iter::once(&[7u8; 100][..]), SystemTime::now()).unwrap();
        drop(w);
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[1, 2, 3, 4, 5, 6, 7, 8, 60, 0, 0, 0, 60, 0, 0, 0, 9, 9]).unwrap();
        drop(f);
        let mut w = PcapWriter::open(&path, PcapResolution::Micros, None).unwrap();
        assert_eq!(w.out.get_ref().metadata().unwrap().len(), whole);
        w.write_packet(std::iter::once(&[8u8; 10][..]), SystemTime::now()).unwrap();
        drop(w);
        assert_eq!(records(&path), 2);
    }

    #[test]
    fn snaplen_cuts_records_but_keeps_the_original_length() {
        let (_dir, path) = temp("snap");
        let mut w = PcapWriter::open(&path, PcapResolution::Micros, Some(64)).unwrap();
        w.write_packet(std::iter::once(&[1u8; 1000][..]), SystemTime::now()).unwrap();
        drop(w);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(u32::from_le_bytes(bytes[32..36].try_into().unwrap()), 64);
        assert_eq!(u32::from_le_bytes(bytes[36..40].try_into().unwrap()), 1000);
        assert_eq!(bytes.len(), 24 + 16 + 64);
    }
}
