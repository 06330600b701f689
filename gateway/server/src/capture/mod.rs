//! REST-triggered captures: copies of the packets of one interface (and
//! optionally one queue or flow) written to pcap or raw files, or through
//! GPUDirect Storage (`gds`) where they live in GPU memory; pcap and raw
//! captures may go to an S3 bucket instead of the capture directory.
//!
//! The application loop hands each burst to [`CaptureManager::tap`]. A
//! running capture copies matching packets into recycled slots of a bounded
//! ring; its writer thread empties the ring to disk. When the ring is full the
//! copy is dropped and counted as a capture drop: a slow disk never stalls
//! receive and never shows up as an RX drop.

mod device_side;
mod error;
// GPUDirect Storage captures; a build without CUDA has the same shape, refusing them.
#[cfg_attr(not(feature = "cuda"), path = "gds_absent.rs")]
mod gds;
mod output;
mod request;
mod ring;
mod session;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use daqiri::{Burst, Engine};

pub(crate) use device_side::DeviceSide;
pub(crate) use error::CaptureError;
pub(crate) use output::S3Settings;
use output::S3Stores;
pub(crate) use request::CaptureRequest;
use request::Destination;
use ring::MemoryBudget;
pub(crate) use session::{CaptureInfo, CaptureState};
use session::{Owner, Session};

/// Captures that may run at once unless `--max-captures` says otherwise.
pub(crate) const DEFAULT_MAX_CAPTURES: u16 = 8;
/// MiB the capture rings may hold together unless `--capture-memory-mb` says otherwise.
pub(crate) const DEFAULT_CAPTURE_MEMORY_MB: u64 = 512;

/// What running captures may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CaptureLimits {
    /// Captures running at once (`--max-captures`).
    pub max_running: usize,
    /// Bytes of packet copies all rings hold together (`--capture-memory-mb`).
    pub ring_memory: u64,
}

impl Default for CaptureLimits {
    fn default() -> Self {
        Self { max_running: usize::from(DEFAULT_MAX_CAPTURES), ring_memory: DEFAULT_CAPTURE_MEMORY_MB << 20 }
    }
}

/// Every capture of a gateway.
#[derive(Debug)]
pub(crate) struct CaptureManager {
    dir: PathBuf,
    free_space_floor: u64,
    /// Most captures running at once: each holds a ring of packet copies
    /// (up to 8,192 of them) and a writer thread.
    max_running: usize,
    ring_budget: Arc<MemoryBudget>,
    sessions: Mutex<BTreeMap<u64, Arc<Session>>>,
    /// Running sessions: the tap's fast path checks this one atomic.
    running: AtomicUsize,
    next_id: AtomicU64,
    /// Per port: its name, and its local address for socket streams.
    ports: RwLock<Vec<PortInfo>>,
    /// The S3 store captures with an `s3://` destination go to.
    s3: S3Stores,
}

/// What a capture's download reads: its newest file, or its newest object.
pub(crate) enum Download {
    File(PathBuf),
    S3 { name: String, object: daqiri::writer::S3Download },
}

/// What a capture request is checked against, per port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PortInfo {
    name: String,
    /// RX queue ids, and the flow ids of the config's RX flows.
    rx_queues: Vec<u16>,
    flows: Vec<u32>,
    /// A socket port's local address (captured datagrams are framed with it).
    local: Option<SocketAddr>,
    /// Reorder plan names, in `reorder_configs` order.
    plans: Vec<String>,
    /// RX queues with a segment in GPU memory, and plans whose output is there.
    gpu_queues: Vec<(u16, DeviceSide)>,
    gpu_plans: Vec<(u16, DeviceSide)>,
}

impl PortInfo {
    /// Refuses a queue or flow filter this interface cannot match.
    fn check_filters(&self, plan: &request::Plan, runtime_flows: &[u32]) -> Result<(), CaptureError> {
        let list = |ids: &mut dyn Iterator<Item = String>| {
            let ids: Vec<String> = ids.collect();
            if ids.is_empty() { "it has none".to_owned() } else { format!("valid: {}", ids.join(", ")) }
        };
        if let Some(queue) = plan.queue
            && !self.rx_queues.contains(&queue)
        {
            let valid = list(&mut self.rx_queues.iter().map(u16::to_string));
            return Err(CaptureError::Invalid(
                "queue",
                format!("interface \"{}\" has no RX queue {queue}; {valid}", self.name),
            ));
        }
        if let Some(flow) = plan.flow
            && !self.flows.contains(&flow)
            && !runtime_flows.contains(&flow)
        {
            let valid = list(&mut self.flows.iter().chain(runtime_flows).map(u32::to_string));
            return Err(CaptureError::Invalid(
                "flow",
                format!("interface \"{}\" has no RX flow with id {flow}; {valid}", self.name),
            ));
        }
        Ok(())
    }

    /// What of a capture `plan` lives in GPU memory, which captures copy
    /// with the CPU cannot read, and where; `None` when all is host memory.
    fn device_resident(&self, plan: &request::Plan) -> Option<(String, DeviceSide)> {
        if let Some((index, name)) = &plan.reorder {
            let side = self.gpu_plans.iter().find(|(p, _)| p == index)?.1;
            return Some((format!("reorder plan \"{name}\"'s output"), side));
        }
        let mut queues = self.gpu_queues.iter().filter(|(q, _)| plan.queue.is_none_or(|wanted| wanted == *q));
        let &(first, mut side) = queues.next()?;
        // A capture of every queue takes slots as large as the largest.
        for (_, other) in queues {
            side.bytes = side.bytes.max(other.bytes);
        }
        Some((format!("RX queue {first}'s packets"), side))
    }
}

fn port_infos(engine: &Engine) -> Vec<PortInfo> {
    let config = engine.config();
    let in_gpu_memory = |region: &str| {
        config
            .config()
            .memory_region(region)
            .filter(|r| r.kind == daqiri::config::model::MemoryKind::Device)
            .map(|r| DeviceSide { gpu: r.affinity, bytes: r.buf_size as usize })
    };
    engine
        .stats()
        .ports
        .iter()
        .map(|p| {
            let rx = config.config().interfaces.get(usize::from(p.id)).and_then(|i| i.rx.as_ref());
            let queues = rx.map(|rx| rx.queues.as_slice()).unwrap_or_default();
            let plans = rx.map(|rx| rx.reorder_configs.as_slice()).unwrap_or_default();
            PortInfo {
                name: p.name.clone(),
                rx_queues: queues.iter().map(|q| q.id).collect(),
                flows: rx.map(|rx| rx.flows.iter().map(|f| f.id).collect()).unwrap_or_default(),
                local: engine.local_addr(p.id).ok().flatten(),
                plans: p.reorder.iter().map(|plan| plan.name.clone()).collect(),
                gpu_queues: queues
                    .iter()
                    .filter_map(|q| {
                        // A packet has a segment per region; its device bytes are their sum.
                        let sides: Vec<DeviceSide> = q.memory_regions.iter().filter_map(|r| in_gpu_memory(r)).collect();
                        let bytes = sides.iter().map(|s| s.bytes).sum();
                        sides.first().map(|s| (q.id, DeviceSide { gpu: s.gpu, bytes }))
                    })
                    .collect(),
                gpu_plans: plans
                    .iter()
                    .enumerate()
                    .filter_map(|(i, plan)| Some((i as u16, in_gpu_memory(&plan.memory_region)?)))
                    .collect(),
            }
        })
        .collect()
}

impl CaptureManager {
    /// The directory is created when the first capture starts.
    /// Without an engine there are no interfaces until [`follow`](Self::follow).
    pub(crate) fn new(
        engine: Option<&Engine>,
        dir: PathBuf,
        free_space_floor: u64,
        limits: CaptureLimits,
        s3: S3Settings,
    ) -> anyhow::Result<Arc<Self>> {
        let ports = RwLock::new(engine.map(port_infos).unwrap_or_default());
        Ok(Arc::new(Self {
            dir,
            free_space_floor,
            max_running: limits.max_running,
            ring_budget: MemoryBudget::new(limits.ring_memory),
            sessions: Mutex::new(BTreeMap::new()),
            running: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            ports,
            s3: S3Stores::new(s3),
        }))
    }

    /// The capture directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts a capture; `runtime_flows` are the interface's flows added
    /// through the API, which a flow filter may name too. It blocks (an S3
    /// destination is asked whether the capture's objects exist): call it
    /// from a plain thread.
    pub(crate) fn start(
        self: &Arc<Self>,
        request: CaptureRequest,
        runtime_flows: &[u32],
    ) -> Result<CaptureInfo, CaptureError> {
        let ports = self.ports.read().unwrap_or_else(|e| e.into_inner()).clone();
        let port = ports.iter().position(|p| p.name == request.interface).ok_or_else(|| {
            let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
            CaptureError::Invalid(
                "interface",
                format!("no interface \"{}\"; valid: {}", request.interface, names.join(", ")),
            )
        })?;
        let plan = request.validate(&ports[port].plans)?;
        ports[port].check_filters(&plan, runtime_flows)?;
        let device = ports[port].device_resident(&plan);
        match (&device, plan.format) {
            (_, request::CaptureFormat::Gds) => gds::gds_available()?,
            (Some((what, _)), format) => {
                return Err(CaptureError::NotImplemented(format!(
                    "{what} live in GPU memory, which {} captures (host copies) cannot read; use format gds",
                    format.as_str()
                )));
            }
            (None, _) => {}
        }
        let existing = match &plan.destination {
            Destination::Directory => {
                std::fs::create_dir_all(&self.dir).map_err(|e| {
                    CaptureError::Failed(format!("cannot create capture directory {}: {e}", self.dir.display()))
                })?;
                self.check_space()?;
                None
            }
            // Asked before the sessions' lock: the store may take its time.
            Destination::S3 { bucket, prefix } => self.s3.existing_output(bucket, prefix, &plan.name)?,
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let running = sessions.values().filter(|s| s.state() == CaptureState::Running).count();
        if running >= self.max_running {
            return Err(CaptureError::TooMany(format!(
                "{running} captures are running, the most this gateway allows (--max-captures {}); stop one first",
                self.max_running
            )));
        }
        let running_names = sessions
            .values()
            .filter(|s| s.state() == CaptureState::Running && s.destination() == &plan.destination)
            .map(|s| s.name());
        if let Some(other) = running_names.into_iter().find(|other| output::names_collide(other, &plan.name)) {
            let why = if other == plan.name {
                format!("a running capture is already called \"{other}\"")
            } else {
                format!("the running capture \"{other}\" may write files of that name (\"{other}_<number>\")")
            };
            return Err(CaptureError::Conflict("name", why));
        }
        let existing = match plan.destination {
            Destination::Directory => output::existing_output(&self.dir, &plan.name).map(|p| p.display().to_string()),
            Destination::S3 { .. } => existing,
        };
        if let Some(existing) = existing {
            return Err(CaptureError::Conflict(
                "name",
                format!(
                    "{existing} exists from an earlier capture; pick another name or remove its files (captures never append)"
                ),
            ));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let local = ports[port].local;
        let s3 = matches!(plan.destination, Destination::S3 { .. });
        let session =
            Session::start(id, port as u16, local, plan, device.map(|d| d.1), Arc::clone(self) as Arc<dyn Owner>)
                .map_err(|e| {
                    let status = e.chain().find_map(|c| c.downcast_ref::<daqiri::Error>()).map(|d| d.status);
                    match status {
                        _ if out_of_space(&e) => CaptureError::NoSpace(format!("{e:#}")),
                        Some(daqiri::Status::NoSpaceAvailable) => CaptureError::NoSpace(format!("{e:#}")),
                        // The S3 store refused the object's upload or did not answer.
                        Some(daqiri::Status::GenericFailure) if s3 => CaptureError::Store(format!("{e:#}")),
                        _ => CaptureError::Failed(format!("{e:#}")),
                    }
                })?;
        self.running.fetch_add(1, Ordering::Relaxed);
        let info = session.info();
        sessions.insert(id, session);
        forget_oldest_ended(&mut sessions);
        Ok(info)
    }

    /// All captures, oldest first.
    pub(crate) fn list(&self) -> Vec<CaptureInfo> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).values().map(|s| s.info()).collect()
    }

    fn session(&self, id: u64) -> Result<Arc<Session>, CaptureError> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned().ok_or(CaptureError::NotFound(id))
    }

    /// One capture.
    pub(crate) fn get(&self, id: u64) -> Result<CaptureInfo, CaptureError> {
        Ok(self.session(id)?.info())
    }

    /// Stops a capture and waits until its files are complete.
    pub(crate) fn stop(&self, id: u64) -> Result<CaptureInfo, CaptureError> {
        let session = self.session(id)?;
        session.stop_and_wait("stopped by request");
        Ok(session.info())
    }

    /// What to download: the newest file of the capture (of a rotating
    /// one, the file being written), or its newest object in S3, which
    /// exists once complete. Blocks (asks the store): call it from a plain thread.
    pub(crate) fn download(&self, id: u64) -> Result<Download, CaptureError> {
        let session = self.session(id)?;
        let newest = session
            .files()
            .last()
            .cloned()
            .ok_or_else(|| CaptureError::Invalid("id", format!("capture {id} has written no file yet")))?;
        let Destination::S3 { bucket, .. } = session.destination() else { return Ok(Download::File(newest)) };
        let url = newest.display().to_string();
        let key = url.strip_prefix(&format!("s3://{bucket}/")).unwrap_or(&url).to_owned();
        let name = key.rsplit('/').next().unwrap_or(&key).to_owned();
        let store = self.s3.bucket(bucket).map_err(|e| CaptureError::Invalid("destination", e.message))?;
        let object = store.download(&key).map_err(|e| match e.status {
            daqiri::Status::InvalidParameter => {
                CaptureError::Invalid("id", format!("capture {id}'s {url} is not complete yet (or was removed)"))
            }
            _ => CaptureError::Store(e.message),
        })?;
        Ok(Download::S3 { name, object })
    }

    /// Stops every capture (gateway shutdown).
    pub(crate) fn stop_all(&self) {
        let sessions: Vec<Arc<Session>> =
            self.sessions.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for s in sessions {
            s.stop_and_wait("gateway shutting down");
        }
    }

    /// Follows a restarted engine: captures whose interface kept its port id
    /// and address go on; the others stop, their files complete.
    pub(crate) fn follow(&self, engine: &Engine) {
        let now = port_infos(engine);
        let before = std::mem::replace(&mut *self.ports.write().unwrap_or_else(|e| e.into_inner()), now.clone());
        let sessions: Vec<Arc<Session>> =
            self.sessions.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for session in sessions.iter().filter(|s| s.state() == CaptureState::Running) {
            let port = usize::from(session.port());
            if before.get(port) != now.get(port) {
                let name = before.get(port).map_or("?", |p| p.name.as_str());
                session.stop_and_wait(&format!("interface \"{name}\" changed in a config reload"));
            }
        }
    }

    /// Copies the burst's matching packets into every running capture.
    /// `backlog` tells how full the burst's RX ring is (waiting, capacity),
    /// asked only while a capture runs: past half, delivery comes first and
    /// the captures count their copies of this burst as capture drops
    /// instead of making them.
    pub(crate) fn tap(&self, burst: &Burst, backlog: impl FnOnce() -> Option<(usize, usize)>) {
        if self.running.load(Ordering::Relaxed) == 0 {
            return;
        }
        let behind = backlog().is_some_and(|(waiting, capacity)| waiting * 2 > capacity);
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        for session in sessions.values() {
            session.tap(burst, behind);
        }
    }

    pub(crate) fn session_ended(&self, session: &Session) {
        {
            // Taps run under this lock, and see the session stopped once it is released.
            let _sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            session.release_ring();
            self.running.fetch_sub(1, Ordering::Relaxed);
        }
        daqiri::give_back_freed_heap();
    }

    /// Refuses to start when the capture filesystem is below its floor.
    fn check_space(&self) -> Result<(), CaptureError> {
        let free = self
            .free_space()
            .map_err(|e| CaptureError::Failed(format!("cannot read free space of {}: {e}", self.dir.display())))?;
        if free < self.free_space_floor {
            return Err(CaptureError::NoSpace(format!(
                "{} has {} MiB free, below the {} MiB floor (--capture-free-space-floor-mb)",
                self.dir.display(),
                free >> 20,
                self.free_space_floor >> 20
            )));
        }
        Ok(())
    }

    pub(crate) fn free_space(&self) -> std::io::Result<u64> {
        fs4::available_space(&self.dir)
    }

    pub(crate) fn free_space_floor(&self) -> u64 {
        self.free_space_floor
    }
}

/// Whether a capture could not start for want of room: no space or no
/// inode left (`ENOSPC`), or a quota reached (`EDQUOT`).
fn out_of_space(e: &anyhow::Error) -> bool {
    let full =
        |io: &std::io::Error| matches!(io.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded);
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(full)
            || cause.downcast_ref::<daqiri::Error>().and_then(daqiri::Error::io_error).is_some_and(full)
    })
}

impl Owner for CaptureManager {
    fn dir(&self) -> &Path {
        CaptureManager::dir(self)
    }

    fn free_space(&self) -> std::io::Result<u64> {
        CaptureManager::free_space(self)
    }

    fn free_space_floor(&self) -> u64 {
        CaptureManager::free_space_floor(self)
    }

    fn session_ended(&self, session: &Session) {
        CaptureManager::session_ended(self, session);
    }

    fn ring_budget(&self) -> Arc<MemoryBudget> {
        Arc::clone(&self.ring_budget)
    }

    fn s3_stores(&self) -> &S3Stores {
        &self.s3
    }
}

/// Ended captures kept listed (and in the metrics); their files stay on disk.
const ENDED_CAPTURES_LISTED: usize = 64;

/// Forgets the oldest ended captures beyond [`ENDED_CAPTURES_LISTED`], so a
/// gateway that captures every minute for months does not grow its list,
/// its memory and its metric series without end.
fn forget_oldest_ended(sessions: &mut BTreeMap<u64, Arc<Session>>) {
    let ended: Vec<u64> =
        sessions.iter().filter(|(_, s)| s.state() != CaptureState::Running).map(|(&id, _)| id).collect();
    for id in ended.iter().take(ended.len().saturating_sub(ENDED_CAPTURES_LISTED)) {
        sessions.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: &str) -> request::Plan {
        let plans = ["cpu_plan".to_string(), "gpu_plan".to_string()];
        serde_json::from_str::<CaptureRequest>(json).unwrap().validate(&plans).unwrap()
    }

    #[test]
    fn a_duration_that_cannot_be_a_span_is_refused_by_field() {
        for duration in ["1e300", "-1", "0"] {
            let json = format!(r#"{{"format":"pcap","interface":"p","name":"a","duration_s":{duration}}}"#);
            let request: CaptureRequest = serde_json::from_str(&json).unwrap();
            match request.validate(&[]) {
                Err(CaptureError::Invalid("duration_s", message)) => assert!(message.contains("seconds"), "{message}"),
                other => panic!("{duration}: {other:?}"),
            }
        }
    }

    #[test]
    fn captures_that_would_read_gpu_memory_say_what_lives_there() {
        let (small, large) = (DeviceSide { gpu: 0, bytes: 2048 }, DeviceSide { gpu: 0, bytes: 9000 });
        let port = PortInfo {
            name: "p".into(),
            rx_queues: vec![0, 2, 3],
            flows: vec![],
            local: None,
            plans: vec!["cpu_plan".into(), "gpu_plan".into()],
            gpu_queues: vec![(2, small), (3, large)],
            gpu_plans: vec![(1, DeviceSide { gpu: 0, bytes: 1 << 20 })],
        };
        let resident = |json| port.device_resident(&request(json));
        assert_eq!(resident(r#"{"format":"pcap","interface":"p","name":"a","queue":0}"#), None);
        assert_eq!(
            resident(r#"{"format":"pcap","interface":"p","name":"a","queue":2}"#),
            Some(("RX queue 2's packets".into(), small))
        );
        assert_eq!(
            resident(r#"{"format":"raw","interface":"p","name":"a"}"#),
            Some(("RX queue 2's packets".into(), large)),
            "a capture of every queue includes the GPU ones, with slots for the largest"
        );
        assert_eq!(resident(r#"{"format":"raw","interface":"p","name":"a","reorder":"cpu_plan"}"#), None);
        assert_eq!(
            resident(r#"{"format":"gds","interface":"p","name":"a","reorder":"gpu_plan"}"#),
            Some(("reorder plan \"gpu_plan\"'s output".into(), DeviceSide { gpu: 0, bytes: 1 << 20 }))
        );
    }

    #[test]
    fn queue_and_flow_filters_must_exist_on_the_interface() {
        let port = PortInfo {
            name: "p".into(),
            rx_queues: vec![0, 1],
            flows: vec![10],
            local: None,
            plans: vec![],
            gpu_queues: vec![],
            gpu_plans: vec![],
        };
        let check = |json: &str, runtime: &[u32]| port.check_filters(&request(json), runtime);
        assert!(check(r#"{"format":"pcap","interface":"p","name":"a","queue":1,"flow":10}"#, &[]).is_ok());
        match check(r#"{"format":"pcap","interface":"p","name":"a","queue":7}"#, &[]) {
            Err(CaptureError::Invalid("queue", message)) => assert!(message.contains("valid: 0, 1"), "{message}"),
            other => panic!("{other:?}"),
        }
        match check(r#"{"format":"pcap","interface":"p","name":"a","flow":11}"#, &[]) {
            Err(CaptureError::Invalid("flow", message)) => assert!(message.contains("valid: 10"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert!(check(r#"{"format":"pcap","interface":"p","name":"a","flow":11}"#, &[11]).is_ok(), "a runtime flow");
    }

    #[test]
    fn names_collide_where_one_captures_numbered_files_are_the_others() {
        assert!(output::names_collide("col", "col"));
        assert!(output::names_collide("col", "col_0003"), "col's fourth rotated file is col_0003.pcap");
        assert!(output::names_collide("col_7", "col"));
        assert!(!output::names_collide("col", "col_x1"));
        assert!(!output::names_collide("col", "cola"));
        assert!(!output::names_collide("col", "col_"));
    }

    #[test]
    fn earlier_outputs_of_a_name_are_found_and_others_are_not() {
        let dir = std::env::temp_dir().join(format!("daqiri-existing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["a_b.pcap", "ab.pcap", "a_x1", "ab.raw", "a.raw.x"] {
            std::fs::write(dir.join(file), b"").unwrap();
        }
        assert_eq!(output::existing_output(&dir, "a"), None, "other captures' files are not a's");
        for file in ["a.pcap", "a_0003.pcap", "a_17", "a.raw", "a_0002.raw"] {
            std::fs::write(dir.join(file), b"").unwrap();
            assert_eq!(output::existing_output(&dir, "a"), Some(dir.join(file)));
            std::fs::remove_file(dir.join(file)).unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pcap_file_options_are_refused_where_no_pcap_file_is_written() {
        let plans = ["agg".to_string()];
        let refused = |json: &str| match serde_json::from_str::<CaptureRequest>(json).unwrap().validate(&plans) {
            Err(CaptureError::Invalid(field, message)) => Some((field, message)),
            _ => None,
        };
        let (field, message) = refused(r#"{"format":"raw","interface":"p","name":"a","snaplen":64}"#).unwrap();
        assert_eq!(field, "snaplen");
        assert!(message.contains("one raw file per packet"), "{message}");
        let (field, message) =
            refused(r#"{"format":"gds","interface":"p","name":"a","reorder":"agg","rotate_bytes":9}"#).unwrap();
        assert_eq!(field, "rotate_bytes");
        assert!(message.contains("per aggregate"), "{message}");
        assert!(refused(r#"{"format":"gds","interface":"p","name":"a","snaplen":64,"rotate_bytes":9}"#).is_none());
        assert!(refused(r#"{"format":"pcap","interface":"p","name":"a","reorder":"agg"}"#).is_some());
        // A raw capture to S3 streams into objects, which rotate; it has no snap length.
        assert!(
            refused(r#"{"format":"raw","interface":"p","name":"a","rotate_bytes":9,"destination":"s3://bkt"}"#)
                .is_none()
        );
        let (field, message) =
            refused(r#"{"format":"raw","interface":"p","name":"a","snaplen":64,"destination":"s3://bkt"}"#).unwrap();
        assert_eq!(field, "snaplen");
        assert!(message.contains("back to back"), "{message}");
        let (field, message) = refused(
            r#"{"format":"raw","interface":"p","name":"a","reorder":"agg","rotate_bytes":9,"destination":"s3://bkt"}"#,
        )
        .unwrap();
        assert_eq!(field, "rotate_bytes");
        assert!(message.contains("per aggregate"), "{message}");
    }
}
