//! Where a capture's records go: pcap files, raw files, GPUDirect Storage
//! writes, or S3 objects; and how many of them are durable there.

mod s3;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use daqiri::writer::{PcapResolution, PcapWriter};

use super::gds;
use super::request::{CaptureFormat, Destination, Plan};
use super::ring::{MemoryBudget, Record};
pub(crate) use s3::{S3Settings, S3Stores};

/// What an output needs of the capture it writes for.
pub(super) trait Capture {
    /// The checked request.
    fn plan(&self) -> &Plan;
    /// Where the output lists what it wrote.
    fn listing(&self) -> &Listing;
    /// A `gds` capture's device slots while it runs.
    fn device_slots(&self) -> Option<Arc<gds::DeviceSlots>>;
}

/// What a capture's outputs wrote, as its status shows it.
#[derive(Debug, Default)]
pub(super) struct Listing {
    /// Files (or `s3://` objects), oldest first.
    pub files: Mutex<Vec<PathBuf>>,
    /// Missing-slot descriptions beside incomplete aggregates.
    pub missing_slot_files: Mutex<Vec<PathBuf>>,
    /// How cuFile wrote a `gds` capture.
    pub gds_mode: Mutex<Option<&'static str>>,
}

impl Listing {
    /// Lists a file (or object) written whole.
    fn add_file(&self, file: PathBuf) {
        self.files.lock().unwrap_or_else(|e| e.into_inner()).push(file);
    }

    /// Lists an incomplete aggregate's missing-slot description.
    fn add_missing_slot_file(&self, file: PathBuf) {
        self.missing_slot_files.lock().unwrap_or_else(|e| e.into_inner()).push(file);
    }
}

/// Records written but not yet durable: not counted until they are.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pending {
    pub packets: u64,
    pub bytes: u64,
}

impl Pending {
    fn add(&mut self, other: Pending) {
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

/// Where a capture's records go.
#[derive(Debug)]
pub(super) enum Output {
    Pcap {
        file: PcapFile,
        dir: PathBuf,
        file_bytes: u64,
        index: u32,
    },
    Raw {
        dir: PathBuf,
        next: u64,
    },
    /// A `gds` capture of reorder aggregates: one raw file per aggregate.
    GdsAggregates {
        dir: PathBuf,
    },
    /// Objects in an S3 bucket.
    S3(s3::S3Output),
}

/// One pcap file, written by the CPU or through cuFile (`gds`).
#[derive(Debug)]
pub(super) enum PcapFile {
    Host(PcapWriter),
    Gds(gds::GdsWriter),
}

impl PcapFile {
    fn open(session: &dyn Capture, path: &Path) -> anyhow::Result<Self> {
        if session.plan().format == CaptureFormat::Gds {
            let (writer, mode) = gds::open_pcap(path, session.plan().snaplen)?;
            *session.listing().gds_mode.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode);
            return Ok(PcapFile::Gds(writer));
        }
        Ok(PcapFile::Host(PcapWriter::create(path, PcapResolution::Micros, Some(session.plan().snaplen))?))
    }

    fn write(&mut self, session: &dyn Capture, record: &Record) -> anyhow::Result<u64> {
        match self {
            PcapFile::Host(writer) => Ok(writer.write_packet(std::iter::once(&record.bytes[..]), record.time)?),
            PcapFile::Gds(writer) => gds::write_record(writer, session.device_slots().as_deref(), record),
        }
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        match self {
            PcapFile::Host(writer) => Ok(writer.flush()?),
            // cuFile and positioned writes leave nothing buffered.
            PcapFile::Gds(_) => Ok(()),
        }
    }

    fn discard_unflushed(&mut self) -> anyhow::Result<()> {
        match self {
            PcapFile::Host(writer) => Ok(writer.discard_unflushed()?),
            PcapFile::Gds(_) => Ok(()),
        }
    }

    fn path_in_place(&self) -> std::io::Result<bool> {
        match self {
            PcapFile::Host(writer) => writer.still_at_path(),
            PcapFile::Gds(_) => Ok(true),
        }
    }
}

impl Output {
    /// Opens where `session`'s records go: files in `dir`, or objects of
    /// `stores` (whose parts take capture memory from `budget`).
    pub(super) fn open(
        session: &dyn Capture,
        dir: &Path,
        stores: &S3Stores,
        budget: &Arc<MemoryBudget>,
    ) -> anyhow::Result<Self> {
        if let Destination::S3 { bucket, prefix } = &session.plan().destination {
            return Ok(Output::S3(s3::S3Output::open(session, stores, budget, bucket, prefix)?));
        }
        let dir = dir.to_path_buf();
        Ok(match (session.plan().format, &session.plan().reorder) {
            (CaptureFormat::Raw, _) => Output::Raw { dir, next: 0 },
            (CaptureFormat::Gds, Some(_)) => Output::GdsAggregates { dir },
            _ => {
                let path = dir.join(stream_file_name(session.plan(), 1));
                let file = PcapFile::open(session, &path)?;
                session.listing().add_file(path);
                Output::Pcap { file, dir, file_bytes: 0, index: 1 }
            }
        })
    }

    /// Writes one record; returns the bytes it added to storage.
    pub(super) fn write(&mut self, session: &dyn Capture, record: &Record) -> anyhow::Result<u64> {
        match self {
            Output::Pcap { file, dir, file_bytes, index } => {
                if session.plan().rotate_bytes.is_some_and(|limit| *file_bytes >= limit) {
                    file.flush()?;
                    *index += 1;
                    let path = dir.join(stream_file_name(session.plan(), *index));
                    *file = PcapFile::open(session, &path)?;
                    *file_bytes = 0;
                    let mut files = session.listing().files.lock().unwrap_or_else(|e| e.into_inner());
                    files.push(path);
                    if let Some(keep) = session.plan().rotate_files {
                        while files.len() > keep as usize {
                            let _ = std::fs::remove_file(files.remove(0));
                        }
                    }
                }
                let written = file.write(session, record)?;
                *file_bytes += written;
                Ok(written)
            }
            Output::Raw { dir, next } => {
                let path = dir.join(raw_file_name(session.plan(), record, *next));
                write_new(&path, &record.bytes)?;
                *next += 1;
                list_written(session, path, record)?;
                Ok(record.bytes.len() as u64)
            }
            Output::GdsAggregates { dir } => {
                let path = dir.join(raw_file_name(session.plan(), record, 0));
                let (written, mode) = gds::write_aggregate(&path, session.device_slots().as_deref(), record)?;
                *session.listing().gds_mode.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode);
                list_written(session, path, record)?;
                Ok(written)
            }
            Output::S3(output) => output.write(session, record),
        }
    }

    /// Whether to commit after this record: a file per record is whole
    /// once written, and an S3 pcap object's records once it completed;
    /// a pcap file's records wait for the next flush.
    pub(super) fn commit_due(&self) -> bool {
        match self {
            Output::Pcap { .. } => false,
            Output::S3(output) => output.commit_due(),
            Output::Raw { .. } | Output::GdsAggregates { .. } => true,
        }
    }

    /// Pushes buffered records to storage (at each commit); returns what of
    /// `pending` is durable now: all of it for files, only the records of
    /// completed objects for an S3 pcap stream.
    pub(super) fn flush(&mut self, pending: Pending) -> anyhow::Result<Pending> {
        match self {
            Output::Pcap { file, .. } => file.flush().map(|()| pending),
            Output::S3(output) => Ok(output.durable(pending)),
            Output::Raw { .. } | Output::GdsAggregates { .. } => Ok(pending),
        }
    }

    /// Completes what is open (an S3 object); at the capture's end.
    pub(super) fn close(&mut self, session: &dyn Capture) -> anyhow::Result<()> {
        match self {
            Output::S3(output) => output.close(session),
            _ => Ok(()),
        }
    }

    /// Bytes the S3 store has acknowledged, parts of open objects included;
    /// none for local files.
    pub(super) fn uploaded(&self) -> Option<u64> {
        match self {
            Output::S3(output) => Some(output.uploaded()),
            _ => None,
        }
    }

    /// Whether the records go to the capture filesystem (and its free-space floor applies).
    pub(super) fn on_capture_filesystem(&self) -> bool {
        !matches!(self, Output::S3(_))
    }

    /// Cuts the current file back to its last flush, after a failure.
    pub(super) fn discard_unflushed(&mut self) -> anyhow::Result<()> {
        if let Output::Pcap { file, .. } = self {
            file.discard_unflushed()?;
        }
        Ok(())
    }

    /// Fails when the file being written was removed (its directory deleted)
    /// or replaced: what was written to it is gone.
    pub(super) fn check_in_place(&self) -> anyhow::Result<()> {
        let (removed, dir) = match self {
            // A pcap file unlinked with its directory still takes writes: ask the file.
            Output::Pcap { file, dir, .. } => (!file.path_in_place().unwrap_or(true), dir),
            Output::Raw { dir, .. } => (!dir.is_dir(), dir),
            Output::GdsAggregates { dir } => (!dir.is_dir(), dir),
            Output::S3(_) => return Ok(()),
        };
        if removed {
            anyhow::bail!(
                "the capture's files in {} were removed or replaced while being written; what they held is gone",
                dir.display()
            );
        }
        Ok(())
    }
}

/// A file or object a capture streams its records into: `<name>.pcap`, or
/// `<name>.raw` for a raw capture's records back to back (S3); numbered
/// `<name>_<index>.<ext>` when rotating.
fn stream_file_name(plan: &Plan, index: u32) -> String {
    let extension = if plan.format == CaptureFormat::Raw { "raw" } else { "pcap" };
    if plan.rotate_bytes.is_some() {
        format!("{}_{index:04}.{extension}", plan.name)
    } else {
        format!("{}.{extension}", plan.name)
    }
}

/// A raw record's file name: an aggregate's by its batch, a packet's by its order.
fn raw_file_name(plan: &Plan, record: &Record, next: u64) -> String {
    format!("{}_{}", plan.name, record.batch_id.unwrap_or(next))
}

/// An incomplete aggregate's `<file>.missing.json` text: its batch id, its
/// slots and those no packet filled (zero-filled in the file); none for others.
fn missing_slots_json(record: &Record) -> Option<String> {
    let batch_id = record.batch_id.filter(|_| !record.missing.is_empty())?;
    Some(
        serde_json::json!({ "batch_id": batch_id, "slots": record.slots, "missing_slots": record.missing }).to_string(),
    )
}

/// Lists a record's file, written, among the capture's files; beside an
/// incomplete aggregate's it first writes `<file>.missing.json`: its batch
/// id, its slots and those no packet filled (zero-filled in the file),
/// listed apart so `files` holds one entry per record.
fn list_written(session: &dyn Capture, file: PathBuf, record: &Record) -> anyhow::Result<()> {
    if let Some(info) = missing_slots_json(record) {
        let path = PathBuf::from(format!("{}.missing.json", file.display()));
        write_new(&path, info.as_bytes())?;
        session.listing().add_missing_slot_file(path);
    }
    session.listing().add_file(file);
    Ok(())
}

/// Writes a raw record file that must not exist yet; a partial one is removed.
fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    file.write_all(bytes).map_err(|e| {
        let _ = std::fs::remove_file(path);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}

/// A file a capture named `name` would write that exists already in `dir`:
/// `<name>.pcap`, or `<name>_<digits>` with or without `.pcap` (rotated
/// pcap files, raw records).
pub(in crate::capture) fn existing_output(dir: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|file| output_of(name, file)))
}

/// Whether `file` is one a capture named `name` writes.
fn output_of(name: &str, file: &str) -> bool {
    let Some(rest) = file.strip_prefix(name) else { return false };
    let numbered_file = rest.strip_suffix(".pcap").or_else(|| rest.strip_suffix(".raw")).unwrap_or(rest);
    rest == ".pcap" || rest == ".raw" || numbered(numbered_file)
}

/// Whether captures named `a` and `b` could write the same file: the same
/// name, or one is the other's numbered file name (`col` rotates into
/// `col_0003.pcap`, which a capture named `col_0003` writes too).
pub(in crate::capture) fn names_collide(a: &str, b: &str) -> bool {
    let numbered_from = |name: &str, base: &str| name.strip_prefix(base).is_some_and(numbered);
    a == b || numbered_from(a, b) || numbered_from(b, a)
}

/// `_<digits>`: the suffix of a rotated or raw capture file.
fn numbered(suffix: &str) -> bool {
    suffix.strip_prefix('_').is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}
