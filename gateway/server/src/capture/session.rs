//! One capture: the tap side (copy into the ring) and its writer thread.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use daqiri::writer::{PcapResolution, PcapWriter};
use daqiri::{Burst, MAX_SEGMENTS};
use serde::Serialize;
use utoipa::ToSchema;

use super::device_side::DeviceSide;
use super::gds;
use super::request::{CaptureFormat, Plan};
use super::ring::{MemoryBudget, Record, Ring};

/// Packets the ring holds between the application loop and the writer.
const RING_SLOTS: usize = 8192;
/// Bytes written between commits: a flush, then the records it made durable
/// are counted and the free-space floor is checked before the next chunk.
const COMMIT_BYTES: u64 = 1 << 20;

/// Where a capture is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CaptureState {
    /// Copying and writing.
    Running,
    /// Ended; its files are complete.
    Finished,
    /// Ended on an error; files hold what was written before it.
    Failed,
}

/// What the API reports about a capture.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct CaptureInfo {
    /// Capture id.
    pub id: u64,
    /// File name stem.
    pub name: String,
    /// Output format.
    pub format: CaptureFormat,
    /// Port id of the interface.
    pub port: u16,
    /// Queue filter.
    pub queue: Option<u16>,
    /// Flow filter.
    pub flow: Option<u32>,
    /// Reorder plan whose aggregates are captured.
    pub reorder: Option<String>,
    /// State.
    pub state: CaptureState,
    /// Why it ended.
    pub reason: Option<String>,
    /// Packets written: flushed to the files, never more than they hold.
    pub packets: u64,
    /// Bytes written to files (flushed).
    pub bytes: u64,
    /// Copies dropped because the writer was behind (not RX drops).
    pub capture_drops: u64,
    /// Files written, oldest first: one per pcap file or raw record.
    #[schema(value_type = Vec<String>)]
    pub files: Vec<PathBuf>,
    /// A raw reorder capture's `<record>.missing.json` files, one beside
    /// each incomplete aggregate: its batch id, slots and empty slots.
    #[schema(value_type = Vec<String>)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_slot_files: Vec<PathBuf>,
    /// Seconds since start.
    pub elapsed_s: f64,
    /// Fraction of the nearest limit reached (packets, bytes or duration), if any.
    pub progress: Option<f64>,
    /// How cuFile wrote a `gds` capture: `direct` (nvidia-fs) or
    /// `compatibility` (through host bounce buffers); absent for other formats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gds_mode: Option<&'static str>,
}

#[derive(Debug)]
pub(crate) struct Session {
    id: u64,
    port: u16,
    local: Option<SocketAddr>,
    plan: Plan,
    started: Instant,
    ring: Ring,
    stop: AtomicBool,
    packets: AtomicU64,
    bytes: AtomicU64,
    drops: AtomicU64,
    end: Mutex<Option<(CaptureState, String)>>,
    files: Mutex<Vec<PathBuf>>,
    missing_slot_files: Mutex<Vec<PathBuf>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// A `gds` capture's device half of the ring, where it copies GPU bytes;
    /// emptied with the ring once the capture ended, which frees its GPU memory.
    device: Option<ArcSwapOption<gds::DeviceSlots>>,
    gds_mode: Mutex<Option<&'static str>>,
}

/// What a session needs of the captures it belongs to: where its files go,
/// the free-space floor it keeps to, and word when it ends.
pub(crate) trait Owner: Send + Sync + std::fmt::Debug {
    /// The capture directory.
    fn dir(&self) -> &Path;
    /// Bytes free on the capture filesystem.
    fn free_space(&self) -> std::io::Result<u64>;
    /// Bytes that must stay free there.
    fn free_space_floor(&self) -> u64;
    /// Called once the session's writer has ended.
    fn session_ended(&self, session: &Session);
    /// The memory every capture's ring shares.
    fn ring_budget(&self) -> Arc<MemoryBudget>;
}

impl Session {
    pub(crate) fn start(
        id: u64,
        port: u16,
        local: Option<SocketAddr>,
        plan: Plan,
        device: Option<DeviceSide>,
        manager: Arc<dyn Owner>,
    ) -> anyhow::Result<Arc<Self>> {
        let mut slots = RING_SLOTS;
        let device = match device {
            Some(side) if plan.format == CaptureFormat::Gds => {
                slots = gds::DeviceSlots::ring_slots(side, RING_SLOTS);
                Some(ArcSwapOption::from_pointee(gds::DeviceSlots::new(side, slots)?))
            }
            _ => None,
        };
        let session = Arc::new(Self {
            id,
            port,
            local,
            plan,
            started: Instant::now(),
            ring: Ring::new(slots, manager.ring_budget()),
            stop: AtomicBool::new(false),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            end: Mutex::new(None),
            files: Mutex::new(Vec::new()),
            missing_slot_files: Mutex::new(Vec::new()),
            writer: Mutex::new(None),
            device,
            gds_mode: Mutex::new(None),
        });
        let mut output = Output::open(&session, &*manager)?;
        let writer = {
            let session = Arc::clone(&session);
            std::thread::Builder::new().name(format!("capture-{id}")).spawn(move || {
                let (state, reason) = match session.write_loop(&mut output, &*manager) {
                    Ok(reason) => (CaptureState::Finished, reason),
                    Err(e) => {
                        // The files end with the last record counted as written.
                        if let Err(cut) = output.discard_unflushed() {
                            tracing::warn!(capture = session.id, "{cut:#}");
                        }
                        (CaptureState::Failed, format!("{e:#}"))
                    }
                };
                drop(output);
                if state == CaptureState::Failed {
                    tracing::warn!(capture = session.id, name = %session.plan.name, "capture failed: {reason}");
                }
                *session.end.lock().unwrap_or_else(|e| e.into_inner()) = Some((state, reason));
                session.stop.store(true, Relaxed);
                manager.session_ended(&session);
            })?
        };
        *session.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(writer);
        Ok(session)
    }

    pub(crate) fn name(&self) -> &str {
        &self.plan.name
    }

    /// Port id of the captured interface.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn state(&self) -> CaptureState {
        self.end.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(CaptureState::Running, |(s, _)| *s)
    }

    pub(crate) fn files(&self) -> Vec<PathBuf> {
        self.files.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn info(&self) -> CaptureInfo {
        let end = self.end.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (packets, bytes) = (self.packets.load(Relaxed), self.bytes.load(Relaxed));
        let elapsed = self.started.elapsed();
        let progress = [
            self.plan.max_packets.map(|m| packets as f64 / m as f64),
            self.plan.max_bytes.map(|m| bytes as f64 / m as f64),
            self.plan.duration.map(|d| elapsed.as_secs_f64() / d.as_secs_f64()),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max)
        .map(|p| if end.is_some() { 1.0 } else { p.min(1.0) });
        CaptureInfo {
            id: self.id,
            name: self.plan.name.clone(),
            format: self.plan.format,
            port: self.port,
            queue: self.plan.queue,
            flow: self.plan.flow,
            reorder: self.plan.reorder.as_ref().map(|(_, name)| name.clone()),
            state: end.as_ref().map_or(CaptureState::Running, |(s, _)| *s),
            reason: end.map(|(_, r)| r),
            packets,
            bytes,
            capture_drops: self.drops.load(Relaxed),
            files: self.files(),
            missing_slot_files: self.missing_slot_files.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            elapsed_s: elapsed.as_secs_f64(),
            progress,
            gds_mode: *self.gds_mode.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Asks the writer to finish and waits for it; the files are complete after.
    pub(crate) fn stop_and_wait(&self, reason: &str) {
        if !self.stop.swap(true, Relaxed) {
            tracing::info!(capture = self.id, "{reason}");
        }
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        if let Some(end) = self.end.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
            && end.0 == CaptureState::Finished
            && end.1 == "stop requested"
        {
            end.1 = reason.to_owned();
        }
    }

    /// Drops the ring's packet copies, and a `gds` capture's device slots;
    /// the capture manager calls it when the writer has ended, under the
    /// lock that taps run under.
    pub(crate) fn release_ring(&self) {
        self.ring.release();
        if let Some(device) = &self.device {
            device.store(None);
        }
    }

    /// A `gds` capture's device slots while it runs.
    fn device_slots(&self) -> Option<Arc<gds::DeviceSlots>> {
        self.device.as_ref()?.load_full()
    }

    /// Copies the matching packets of a burst (application loop; never
    /// blocks); while delivery is `behind`, counts them as capture drops.
    pub(crate) fn tap(&self, burst: &Burst, behind: bool) {
        if self.stop.load(Relaxed)
            || burst.port_id() != self.port
            || self.plan.queue.is_some_and(|q| q != burst.queue_id())
            || self.plan.reorder.as_ref().is_some_and(|(plan, _)| burst.reorder_plan() != Some(*plan))
        {
            return;
        }
        if behind {
            let skipped = burst.packets().filter(|p| self.wants(p)).count();
            self.drops.fetch_add(skipped as u64, Relaxed);
            return;
        }
        if let Some(device) = &self.device {
            if let Some(slots) = device.load().as_ref() {
                self.tap_to_device(slots, burst);
            }
            return;
        }
        let now = SystemTime::now();
        for (packet, mut record) in self.records_for(burst, now) {
            let pieces = (0..MAX_SEGMENTS).filter_map(|s| packet.segment(s));
            let size = daqiri::headers::UDP_FRAME_HEADERS + pieces.clone().map(<[u8]>::len).sum::<usize>();
            if !self.ring.make_room(&mut record, size) {
                self.drops.fetch_add(1, Relaxed);
                self.ring.recycle(record);
                continue;
            }
            let framed = match self.frame(&packet) {
                Some((source, local)) => {
                    daqiri::headers::synthesize_udp_frame(&mut record.bytes, source, local, pieces.clone()).is_ok()
                }
                None => false,
            };
            if !framed {
                record.bytes.clear();
                pieces.for_each(|p| record.bytes.extend_from_slice(p));
            }
            record.orig_len = record.bytes.len();
            self.ring.submit(record);
        }
    }

    /// A `gds` capture's tap: GPU bytes are copied on the GPU, one launch
    /// per burst, and the records go to the writer once that copy is done.
    fn tap_to_device(&self, device: &gds::DeviceSlots, burst: &Burst) {
        for (packet, record) in self.records_for(burst, SystemTime::now()) {
            if let Err(record) = device.stage(record, &packet, self.frame(&packet)) {
                self.drops.fetch_add(1, Relaxed);
                self.ring.recycle(record);
            }
        }
        device.finish(burst, |record, copied| {
            if copied {
                self.ring.submit(record);
            } else {
                self.drops.fetch_add(1, Relaxed);
                self.ring.recycle(record);
            }
        });
    }

    /// The burst's packets that pass the flow filter, each with a ring slot
    /// stamped with `time` and the burst's batch id; a packet that finds the
    /// ring full is counted as a capture drop and skipped.
    fn records_for<'b>(
        &'b self,
        burst: &'b Burst,
        time: SystemTime,
    ) -> impl Iterator<Item = (daqiri::Packet<'b>, Record)> + 'b {
        burst.packets().filter(|p| self.wants(p)).filter_map(move |packet| {
            let Some(mut record) = self.ring.slot() else {
                self.drops.fetch_add(1, Relaxed);
                return None;
            };
            record.time = time;
            record.batch_id = burst.batch_id();
            record.missing.clear();
            if let Some(missing) = burst.reorder_missing() {
                record.slots = missing.slots();
                record.missing.extend(missing.iter());
            }
            Some((packet, record))
        })
    }

    /// Whether the packet passes the capture's flow filter.
    fn wants(&self, packet: &daqiri::Packet<'_>) -> bool {
        self.plan.flow.is_none() || packet.flow_id() == self.plan.flow
    }

    /// The addresses a socket datagram is framed with in a capture file.
    fn frame(&self, packet: &daqiri::Packet<'_>) -> Option<(std::net::SocketAddrV4, std::net::SocketAddrV4)> {
        match (self.local, packet.source()) {
            (Some(SocketAddr::V4(local)), Some(SocketAddr::V4(source))) => Some((source, local)),
            _ => None,
        }
    }

    /// Writes until a limit, a stop request, the free-space floor or an error.
    fn write_loop(&self, output: &mut Output, manager: &dyn Owner) -> anyhow::Result<String> {
        if let Some(device) = self.device_slots() {
            device.bind_writer_thread()?;
        }
        let mut pending = Pending::default();
        // Bytes written since the free space was last looked at.
        let mut unchecked = 0;
        loop {
            let Some(record) = self.ring.next() else {
                self.commit(output, &mut pending)?;
                if self.stop.load(Relaxed) {
                    output.check_in_place()?;
                    return Ok("stop requested".into());
                }
                if self.plan.duration.is_some_and(|d| self.started.elapsed() >= d) {
                    self.stop.store(true, Relaxed);
                    continue;
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            let written = output.write(self, &record);
            self.ring.recycle(record);
            let written = written?;
            pending.packets += 1;
            pending.bytes += written;
            unchecked += written;
            // A file per record is whole once written: counted at once, so a
            // failure later leaves no file uncounted.
            if !output.buffered() {
                self.commit(output, &mut pending)?;
            }
            let packets = self.packets.load(Relaxed) + pending.packets;
            let bytes = self.bytes.load(Relaxed) + pending.bytes;
            let limit = if self.plan.max_packets.is_some_and(|m| packets >= m) {
                Some(format!("max_packets ({packets}) reached"))
            } else if self.plan.max_bytes.is_some_and(|m| bytes >= m) {
                Some(format!("max_bytes reached ({bytes} bytes)"))
            } else {
                None
            };
            if let Some(reason) = limit {
                self.stop.store(true, Relaxed);
                self.commit(output, &mut pending)?;
                output.check_in_place()?;
                return Ok(reason);
            }
            if unchecked >= COMMIT_BYTES {
                unchecked = 0;
                self.commit(output, &mut pending)?;
                output.check_in_place()?;
                // Stop before the next chunk (and one record over it) could take
                // the filesystem below the floor.
                let margin = COMMIT_BYTES + u64::from(self.plan.snaplen) + 16;
                if manager.free_space().is_ok_and(|free| free < manager.free_space_floor().saturating_add(margin)) {
                    self.stop.store(true, Relaxed);
                    return Ok("free-space floor reached on the capture filesystem".into());
                }
            }
        }
    }

    /// Flushes the records written since the last commit and counts them.
    fn commit(&self, output: &mut Output, pending: &mut Pending) -> anyhow::Result<()> {
        if pending.packets == 0 {
            return Ok(());
        }
        output.flush()?;
        self.packets.fetch_add(pending.packets, Relaxed);
        self.bytes.fetch_add(pending.bytes, Relaxed);
        *pending = Pending::default();
        Ok(())
    }
}

/// Records written but not flushed yet: not counted until they are.
#[derive(Debug, Default)]
struct Pending {
    packets: u64,
    bytes: u64,
}

/// The files a capture writes to.
#[derive(Debug)]
enum Output {
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
}

/// One pcap file, written by the CPU or through cuFile (`gds`).
#[derive(Debug)]
enum PcapFile {
    Host(PcapWriter),
    Gds(gds::GdsWriter),
}

impl PcapFile {
    fn open(session: &Session, path: &Path) -> anyhow::Result<Self> {
        if session.plan.format == CaptureFormat::Gds {
            let (writer, mode) = gds::open_pcap(path, session.plan.snaplen)?;
            *session.gds_mode.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode);
            return Ok(PcapFile::Gds(writer));
        }
        Ok(PcapFile::Host(PcapWriter::create(path, PcapResolution::Micros, Some(session.plan.snaplen))?))
    }

    fn write(&mut self, session: &Session, record: &Record) -> anyhow::Result<u64> {
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
    fn open(session: &Session, manager: &dyn Owner) -> anyhow::Result<Self> {
        let dir = manager.dir().to_path_buf();
        Ok(match (session.plan.format, &session.plan.reorder) {
            (CaptureFormat::Raw, _) => Output::Raw { dir, next: 0 },
            (CaptureFormat::Gds, Some(_)) => Output::GdsAggregates { dir },
            _ => {
                let path = pcap_path(&session.plan, &dir, 1);
                let file = PcapFile::open(session, &path)?;
                session.files.lock().unwrap_or_else(|e| e.into_inner()).push(path);
                Output::Pcap { file, dir, file_bytes: 0, index: 1 }
            }
        })
    }

    /// Writes one record; returns the bytes it added to storage.
    fn write(&mut self, session: &Session, record: &Record) -> anyhow::Result<u64> {
        match self {
            Output::Pcap { file, dir, file_bytes, index } => {
                if session.plan.rotate_bytes.is_some_and(|limit| *file_bytes >= limit) {
                    file.flush()?;
                    *index += 1;
                    let path = pcap_path(&session.plan, dir, *index);
                    *file = PcapFile::open(session, &path)?;
                    *file_bytes = 0;
                    let mut files = session.files.lock().unwrap_or_else(|e| e.into_inner());
                    files.push(path);
                    if let Some(keep) = session.plan.rotate_files {
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
                // Aggregates are named by batch; packets by their order.
                let path = match record.batch_id {
                    Some(batch) => dir.join(format!("{}_{batch}", session.plan.name)),
                    None => dir.join(format!("{}_{next}", session.plan.name)),
                };
                write_new(&path, &record.bytes)?;
                *next += 1;
                list_written(session, path, record)?;
                Ok(record.bytes.len() as u64)
            }
            Output::GdsAggregates { dir } => {
                let path = dir.join(format!("{}_{}", session.plan.name, record.batch_id.unwrap_or_default()));
                let (written, mode) = gds::write_aggregate(&path, session.device_slots().as_deref(), record)?;
                *session.gds_mode.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode);
                list_written(session, path, record)?;
                Ok(written)
            }
        }
    }

    /// Whether written records wait for a flush (a pcap file's buffer);
    /// else each is a whole file once written.
    fn buffered(&self) -> bool {
        matches!(self, Output::Pcap { .. })
    }

    /// Pushes buffered records to disk (at each commit).
    fn flush(&mut self) -> anyhow::Result<()> {
        if let Output::Pcap { file, .. } = self {
            file.flush()?;
        }
        Ok(())
    }

    /// Cuts the current file back to its last flush, after a failure.
    fn discard_unflushed(&mut self) -> anyhow::Result<()> {
        if let Output::Pcap { file, .. } = self {
            file.discard_unflushed()?;
        }
        Ok(())
    }

    /// Fails when the file being written was removed (its directory deleted)
    /// or replaced: what was written to it is gone.
    fn check_in_place(&self) -> anyhow::Result<()> {
        let (removed, dir) = match self {
            // A pcap file unlinked with its directory still takes writes: ask the file.
            Output::Pcap { file, dir, .. } => (!file.path_in_place().unwrap_or(true), dir),
            Output::Raw { dir, .. } => (!dir.is_dir(), dir),
            Output::GdsAggregates { dir } => (!dir.is_dir(), dir),
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

/// `<name>.pcap`, or `<name>_<index>.pcap` when rotating.
fn pcap_path(plan: &Plan, dir: &Path, index: u32) -> PathBuf {
    if plan.rotate_bytes.is_some() {
        dir.join(format!("{}_{index:04}.pcap", plan.name))
    } else {
        dir.join(format!("{}.pcap", plan.name))
    }
}

/// Lists a record's file, written, among the capture's files; beside an
/// incomplete aggregate's it first writes `<file>.missing.json`: its batch
/// id, its slots and those no packet filled (zero-filled in the file),
/// listed apart so `files` holds one entry per record.
fn list_written(session: &Session, file: PathBuf, record: &Record) -> anyhow::Result<()> {
    if let Some(batch_id) = record.batch_id.filter(|_| !record.missing.is_empty()) {
        let path = PathBuf::from(format!("{}.missing.json", file.display()));
        let info = serde_json::json!({ "batch_id": batch_id, "slots": record.slots, "missing_slots": record.missing });
        write_new(&path, info.to_string().as_bytes())?;
        session.missing_slot_files.lock().unwrap_or_else(|e| e.into_inner()).push(path);
    }
    session.files.lock().unwrap_or_else(|e| e.into_inner()).push(file);
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
pub(super) fn existing_output(dir: &Path, name: &str) -> Option<PathBuf> {
    let ours = |file: &str| {
        let Some(rest) = file.strip_prefix(name) else { return false };
        rest == ".pcap" || numbered(rest.strip_suffix(".pcap").unwrap_or(rest))
    };
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(ours))
}

/// Whether captures named `a` and `b` could write the same file: the same
/// name, or one is the other's numbered file name (`col` rotates into
/// `col_0003.pcap`, which a capture named `col_0003` writes too).
pub(super) fn names_collide(a: &str, b: &str) -> bool {
    let numbered_from = |name: &str, base: &str| name.strip_prefix(base).is_some_and(numbered);
    a == b || numbered_from(a, b) || numbered_from(b, a)
}

/// `_<digits>`: the suffix of a rotated or raw capture file.
fn numbered(suffix: &str) -> bool {
    suffix.strip_prefix('_').is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}
