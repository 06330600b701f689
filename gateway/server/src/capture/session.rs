//! One capture: the tap side (copy into the ring) and its writer thread.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use daqiri::{Burst, MAX_SEGMENTS};
use serde::Serialize;
use utoipa::ToSchema;

use super::device_side::DeviceSide;
use super::gds;
use super::output::{Capture, Listing, Output, Pending, S3Stores};
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
    /// Copies dropped, never RX drops: the sum of `capture_drops_by_reason`.
    pub capture_drops: u64,
    /// Capture drops by reason: `delivery_behind` (the RX ring past half
    /// full: delivery first), `writer_behind` (the ring full: the disk or
    /// the S3 store slower than the traffic), `memory_limit`
    /// (`--capture-memory-mb` reached), `device_copy` (a gds capture's GPU
    /// slots full or its copy failed).
    pub capture_drops_by_reason: CaptureDrops,
    /// `s3://bucket/prefix` for a capture to S3; absent for the capture directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Bytes the S3 store has acknowledged, parts of an object still open
    /// included (`bytes` counts completed objects only); absent for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uploaded_bytes: Option<u64>,
    /// Files written, oldest first: one per pcap file or raw record; for a
    /// capture to S3, their objects as `s3://bucket/key`.
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

/// Capture drops, by why the copy was not made.
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub(crate) struct CaptureDrops {
    pub delivery_behind: u64,
    pub writer_behind: u64,
    pub memory_limit: u64,
    pub device_copy: u64,
}

#[derive(Debug, Default)]
struct DropCounters {
    delivery_behind: AtomicU64,
    writer_behind: AtomicU64,
    memory_limit: AtomicU64,
    device_copy: AtomicU64,
}

impl DropCounters {
    fn snapshot(&self) -> CaptureDrops {
        CaptureDrops {
            delivery_behind: self.delivery_behind.load(Relaxed),
            writer_behind: self.writer_behind.load(Relaxed),
            memory_limit: self.memory_limit.load(Relaxed),
            device_copy: self.device_copy.load(Relaxed),
        }
    }
}

impl CaptureDrops {
    pub(crate) fn total(&self) -> u64 {
        self.delivery_behind + self.writer_behind + self.memory_limit + self.device_copy
    }
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
    /// Bytes the S3 store acknowledged (a capture to S3).
    uploaded: AtomicU64,
    drops: DropCounters,
    end: Mutex<Option<(CaptureState, String)>>,
    listing: Listing,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// A `gds` capture's device half of the ring, where it copies GPU bytes;
    /// emptied with the ring once the capture ended, which frees its GPU memory.
    device: Option<ArcSwapOption<gds::DeviceSlots>>,
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
    /// The memory every capture's ring (and S3 parts) share.
    fn ring_budget(&self) -> Arc<MemoryBudget>;
    /// The S3 buckets captures write to.
    fn s3_stores(&self) -> &S3Stores;
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
            uploaded: AtomicU64::new(0),
            drops: DropCounters::default(),
            end: Mutex::new(None),
            listing: Listing::default(),
            writer: Mutex::new(None),
            device,
        });
        let mut output = Output::open(&*session, manager.dir(), manager.s3_stores(), &manager.ring_budget())?;
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

    /// Where its files go.
    pub(crate) fn destination(&self) -> &super::request::Destination {
        &self.plan.destination
    }

    /// Port id of the captured interface.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn state(&self) -> CaptureState {
        self.end.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(CaptureState::Running, |(s, _)| *s)
    }

    pub(crate) fn files(&self) -> Vec<PathBuf> {
        self.listing.files.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn info(&self) -> CaptureInfo {
        let end = self.end.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (packets, bytes) = (self.packets.load(Relaxed), self.bytes.load(Relaxed));
        let drops = self.drops.snapshot();
        let destination = self.plan.destination.url();
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
            capture_drops: drops.total(),
            capture_drops_by_reason: drops,
            uploaded_bytes: destination.is_some().then(|| self.uploaded.load(Relaxed)),
            destination,
            files: self.files(),
            missing_slot_files: self.listing.missing_slot_files.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            elapsed_s: elapsed.as_secs_f64(),
            progress,
            gds_mode: *self.listing.gds_mode.lock().unwrap_or_else(|e| e.into_inner()),
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
            self.drops.delivery_behind.fetch_add(skipped as u64, Relaxed);
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
                self.drops.memory_limit.fetch_add(1, Relaxed);
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
                self.drops.device_copy.fetch_add(1, Relaxed);
                self.ring.recycle(record);
            }
        }
        device.finish(burst, |record, copied| {
            if copied {
                self.ring.submit(record);
            } else {
                self.drops.device_copy.fetch_add(1, Relaxed);
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
                self.drops.writer_behind.fetch_add(1, Relaxed);
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

    /// Writes until a limit, a stop request, the free-space floor or an
    /// error; then completes what is open (an S3 object) and counts it.
    fn write_loop(&self, output: &mut Output, manager: &dyn Owner) -> anyhow::Result<String> {
        if let Some(device) = self.device_slots() {
            device.bind_writer_thread()?;
        }
        let mut pending = Pending::default();
        let reason = self.write_until_end(output, manager, &mut pending)?;
        self.commit(output, &mut pending)?;
        output.close(self)?;
        self.commit(output, &mut pending)?;
        output.check_in_place()?;
        Ok(reason)
    }

    fn write_until_end(
        &self,
        output: &mut Output,
        manager: &dyn Owner,
        pending: &mut Pending,
    ) -> anyhow::Result<String> {
        // Bytes written since the free space was last looked at.
        let mut unchecked = 0;
        loop {
            let Some(record) = self.ring.next() else {
                self.commit(output, pending)?;
                if self.stop.load(Relaxed) {
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
            // What is durable is counted at once, so a failure later leaves
            // nothing in storage uncounted.
            if output.commit_due() {
                self.commit(output, pending)?;
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
                return Ok(reason);
            }
            if unchecked >= COMMIT_BYTES {
                unchecked = 0;
                self.commit(output, pending)?;
                output.check_in_place()?;
                // Stop before the next chunk (and one record over it) could take
                // the filesystem below the floor.
                let margin = COMMIT_BYTES + u64::from(self.plan.snaplen) + 16;
                let floor = manager.free_space_floor().saturating_add(margin);
                if output.on_capture_filesystem() && manager.free_space().is_ok_and(|free| free < floor) {
                    self.stop.store(true, Relaxed);
                    return Ok("free-space floor reached on the capture filesystem".into());
                }
            }
        }
    }

    /// Flushes the records written since the last commit and counts those
    /// now durable (an S3 pcap stream's only once their object is complete).
    fn commit(&self, output: &mut Output, pending: &mut Pending) -> anyhow::Result<()> {
        if pending.packets > 0 {
            let durable = output.flush(*pending)?;
            self.packets.fetch_add(durable.packets, Relaxed);
            self.bytes.fetch_add(durable.bytes, Relaxed);
            pending.packets -= durable.packets;
            pending.bytes -= durable.bytes;
        }
        if let Some(uploaded) = output.uploaded() {
            self.uploaded.store(uploaded, Relaxed);
        }
        Ok(())
    }
}

impl Capture for Session {
    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn device_slots(&self) -> Option<Arc<gds::DeviceSlots>> {
        Session::device_slots(self)
    }
}
