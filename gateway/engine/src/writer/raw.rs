//! Raw writes: one file per packet.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{FileWriteHandle, WriteSummary, after_offset, host_packets};
use crate::burst::Burst;
use crate::error::{Error, Result, Status};

/// Writes each packet of a burst to `<prefix>_<index>`.
#[derive(Debug, Clone)]
pub struct RawWriter {
    prefix: PathBuf,
    packet_data_offset: usize,
}

impl RawWriter {
    /// Files go to `<dir>/<name>_<index>`; `packet_data_offset` bytes of each
    /// logical packet are skipped.
    pub fn new(dir: impl AsRef<Path>, name: &str, packet_data_offset: usize) -> Result<Self> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::invalid(format!("file prefix \"{name}\" must be a plain file name (no '/')")));
        }
        Ok(Self { prefix: dir.as_ref().join(name), packet_data_offset })
    }

    /// The path of packet `index`.
    pub fn path(&self, index: usize) -> PathBuf {
        let mut name = self.prefix.clone().into_os_string();
        name.push(format!("_{index}"));
        name.into()
    }

    /// Writes every packet of the burst, truncating existing files; GPU
    /// segments are copied to the host first (a CUDA build; refused whole,
    /// `NOT_SUPPORTED`, without one).
    pub fn write(&self, burst: &Burst) -> Result<WriteSummary> {
        let packets = host_packets(burst, "raw writer")?;
        let mut summary = WriteSummary::default();
        for (index, pieces) in packets.iter().enumerate() {
            let path = self.path(index);
            let fail = |e| Error::io(Status::GenericFailure, format!("cannot write {}", path.display()), e);
            let mut file = File::create(&path).map_err(fail)?;
            for piece in after_offset(pieces, self.packet_data_offset) {
                file.write_all(piece).map_err(fail)?;
                summary.bytes += piece.len() as u64;
            }
            summary.packets += 1;
        }
        Ok(summary)
    }

    /// Writes on a writer thread; the handle gives the burst back.
    pub fn write_async(&self, burst: Burst) -> Result<FileWriteHandle> {
        let writer = self.clone();
        FileWriteHandle::spawn(burst, move |b| writer.write(b))
    }
}
