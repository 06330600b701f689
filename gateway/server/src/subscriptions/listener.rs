//! The consumer socket: a Unix `SOCK_SEQPACKET` socket where consumers
//! subscribe. Each connection gets a thread that answers its hello, then
//! waits for it to close: a consumer that exits or dies (the kernel closes
//! its socket) has its subscription ended and everything it held given
//! back at once; one that says anything after its hello is cut off.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use daqiri::config::model::Interface;
use daqiri_consumer::protocol::{Answer, Hello, MAX_SLOTS, RegionShape, Source, VERSION, Welcome};
use daqiri_consumer::ring::Producer;
use daqiri_consumer::wire;
use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::Hub;
use super::feed::Feed;
use super::filter::Filter;
use crate::live::LiveEngine;

/// How long a consumer has to say hello once connected.
const HELLO_WITHIN: Duration = Duration::from_secs(5);
/// How often the accepting thread looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// The consumer socket, listening; removed when dropped.
#[derive(Debug)]
pub(crate) struct Listener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Listens at `path` (a stale socket there is replaced), open to the
    /// owner and group only.
    pub(crate) fn start(path: &Path, hub: &Arc<Hub>, live: &Arc<LiveEngine>) -> anyhow::Result<Self> {
        let _ = std::fs::remove_file(path);
        let socket = rustix::net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        rustix::net::bind(&socket, &SocketAddrUnix::new(path)?)
            .map_err(|e| anyhow::anyhow!("cannot listen for consumers at {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o660))?;
        rustix::net::listen(&socket, 64)?;
        tracing::info!("consumers subscribe at {}", path.display());
        let stop = Arc::new(AtomicBool::new(false));
        let (hub, live, flag) = (Arc::clone(hub), Arc::clone(live), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("consumer-socket".into())
            .spawn(move || accept_until(&socket, &flag, &hub, &live))?;
        Ok(Self { path: path.to_owned(), stop, thread: Some(thread) })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_until(socket: &OwnedFd, stop: &AtomicBool, hub: &Arc<Hub>, live: &Arc<LiveEngine>) {
    while !stop.load(Ordering::Relaxed) {
        if !readable(socket, STOP_CHECK) {
            continue;
        }
        let connection = match rustix::net::accept_with(socket, SocketFlags::CLOEXEC) {
            Ok(connection) => connection,
            Err(e) => {
                tracing::warn!("consumer socket: accept: {e}");
                continue;
            }
        };
        let (hub, live) = (Arc::clone(hub), Arc::clone(live));
        let spawned = std::thread::Builder::new().name("consumer".into()).spawn(move || serve(connection, &hub, &live));
        if let Err(e) = spawned {
            tracing::warn!("consumer socket: cannot start a thread for a consumer: {e}");
        }
    }
}

/// Whether `fd` turns readable (or hung up) within `within`.
fn readable(fd: impl AsFd, within: Duration) -> bool {
    let timeout =
        rustix::event::Timespec { tv_sec: within.as_secs() as i64, tv_nsec: i64::from(within.subsec_nanos()) };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    rustix::event::poll(&mut fds, Some(&timeout)).is_ok_and(|n| n > 0)
}

/// One consumer: its hello answered, then its subscription kept until it
/// closes the socket or breaks the protocol.
pub(crate) fn serve(connection: OwnedFd, hub: &Arc<Hub>, live: &LiveEngine) {
    let hello = match read_hello(&connection) {
        Ok(hello) => hello,
        Err(reason) => return refuse(&connection, reason),
    };
    let id = match subscribe(&connection, &hello, hub, live) {
        Ok(id) => id,
        Err(reason) => return refuse(&connection, reason),
    };
    // Anything more from the consumer is a protocol error; its closing (or
    // dying) ends the subscription.
    let why = match wire::receive(&connection) {
        Ok(None) => "the consumer closed its socket".to_owned(),
        Ok(Some(_)) => "the consumer spoke after its hello, which the protocol does not allow".to_owned(),
        Err(e) => format!("the consumer's socket failed: {e}"),
    };
    hub.end(id, &why);
}

fn read_hello(connection: &OwnedFd) -> Result<Hello, String> {
    if !readable(connection, HELLO_WITHIN) {
        return Err(format!("no hello within {HELLO_WITHIN:?}"));
    }
    let (message, _) = wire::receive(connection)
        .map_err(|e| format!("unreadable hello: {e}"))?
        .ok_or_else(|| "closed before its hello".to_owned())?;
    let hello: Hello = serde_json::from_slice(&message).map_err(|e| format!("malformed hello: {e}"))?;
    if hello.version != VERSION {
        return Err(format!("protocol version {} (this gateway speaks {VERSION})", hello.version));
    }
    if !(1..=MAX_SLOTS).contains(&hello.slots) {
        return Err(format!("slots {} (1 to {MAX_SLOTS})", hello.slots));
    }
    Ok(hello)
}

/// Sets up the subscription `hello` asks for and welcomes the consumer.
fn subscribe(connection: &OwnedFd, hello: &Hello, hub: &Arc<Hub>, live: &LiveEngine) -> Result<u64, String> {
    hub.check_token(hello.token.as_deref())?;
    let engine = live.get().ok_or("no engine runs now (a config is being applied)")?;
    let target = &hello.target;
    let port = engine.get_port_id(&target.interface).ok_or_else(|| format!("no interface \"{}\"", target.interface))?;
    let config = engine.config();
    let Resolved { filter, regions, per_slot } =
        resolve(&config.config().interfaces[usize::from(port)], port, &target.source)?;
    let slots = granted_slots(config.config(), &regions, hello.slots);
    let mut names: Vec<&String> = regions.iter().map(|(name, _)| name).collect();
    names.sort();
    names.dedup();
    let regions = names
        .into_iter()
        .map(|name| {
            let index = engine.region_index(name).ok_or_else(|| format!("no region \"{name}\""))?;
            engine.share_region(index).map_err(|e| e.message)
        })
        .collect::<Result<Vec<_>, String>>()?;
    if let Some(region) = regions.iter().find(|r| r.gpu.is_some())
        && !hello.gpu_memory
    {
        return Err(format!(
            "region \"{}\" is GPU memory (kind device), and this consumer cannot import GPU memory (a client built with CUDA can: daqiri-consumer's cuda feature)",
            region.name
        ));
    }
    let (producer, ring) = Producer::create(slots, per_slot).map_err(|e| format!("cannot make a ring: {e}"))?;
    let doorbell =
        rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)
            .map_err(|e| format!("cannot make a doorbell: {e}"))?;
    let id = hub.next_id();
    let welcome = Welcome {
        subscription: id,
        ring: producer.shape(),
        regions: regions
            .iter()
            .map(|r| RegionShape { index: r.index, name: r.name.clone(), len: r.len as u64, gpu: r.gpu.clone() })
            .collect(),
    };
    let message = serde_json::to_vec(&Answer::Welcome(welcome)).expect("a welcome serialises");
    let mut fds = vec![ring.as_fd(), doorbell.as_fd()];
    fds.extend(regions.iter().map(|r| r.fd.as_fd()));
    let feed = Feed::new(
        (id, filter, engine.id()),
        (hello.group.clone(), hello.when_full),
        producer,
        doorbell.try_clone().map_err(|e| e.to_string())?,
    );
    // Listed before the welcome goes, so that no burst after it is missed.
    hub.add(feed, connection.try_clone().map_err(|e| e.to_string())?);
    if let Err(e) = wire::send(connection, &message, &fds) {
        hub.end(id, &format!("the welcome could not be sent: {e}"));
        return Err(format!("the welcome could not be sent: {e}"));
    }
    tracing::info!(subscription = id, interface = target.interface, source = ?target.source, group = ?hello.group, "a consumer subscribed");
    Ok(id)
}

/// A subscription's source, resolved against the engine's config.
struct Resolved {
    filter: Filter,
    /// The regions its bursts' packets lie in (shared with the consumer),
    /// each with the most buffers of it one burst may hold.
    regions: Vec<(String, u32)>,
    /// The most segment descriptors one burst needs.
    per_slot: u32,
}

/// What `source` of `interface` (port `port`) resolves to.
fn resolve(interface: &Interface, port: u16, source: &Source) -> Result<Resolved, String> {
    let name = &interface.name;
    let queues = interface.rx_queues();
    let plans = interface.rx.as_ref().map_or(&[][..], |rx| &rx.reorder_configs);
    let batch = |queue: &daqiri::config::model::Queue| queue.batch_size().max(1);
    let per_slot = |queue: &daqiri::config::model::Queue| batch(queue) * queue.memory_regions.len().max(1) as u32;
    // A plan's aggregate is one packet of one buffer of its region.
    let aggregates = plans.iter().map(|plan| (plan.memory_region.clone(), 1));
    match source {
        Source::Queue(id) => {
            let queue = queues
                .iter()
                .find(|q| q.id == *id)
                .ok_or_else(|| format!("interface \"{name}\" has no RX queue {id}"))?;
            // A plan on the queue delivers its aggregates there, from its own region.
            let regions = queue.memory_regions.iter().map(|r| (r.clone(), batch(queue))).chain(aggregates).collect();
            Ok(Resolved { filter: Filter::Queue { port, queue: *id }, regions, per_slot: per_slot(queue) })
        }
        Source::Flow(id) => {
            let flows = interface.rx.as_ref().map_or(&[][..], |rx| &rx.flows);
            if !flows.iter().any(|f| f.id == *id) {
                return Err(format!("interface \"{name}\" has no flow {id}"));
            }
            // Any queue may carry it after a flow reload.
            let regions =
                queues.iter().flat_map(|q| q.memory_regions.iter().map(move |r| (r.clone(), batch(q)))).collect();
            let per_slot = queues.iter().map(per_slot).max().unwrap_or(1);
            Ok(Resolved { filter: Filter::Flow { port, flow: *id }, regions, per_slot })
        }
        Source::Plan(plan) => {
            let index = plans
                .iter()
                .position(|p| &p.name == plan)
                .ok_or_else(|| format!("interface \"{name}\" has no reorder plan \"{plan}\""))?;
            let regions = vec![(plans[index].memory_region.clone(), 1)];
            Ok(Resolved { filter: Filter::Plan { port, plan: index as u16 }, regions, per_slot: 1 })
        }
    }
}

/// The slots a consumer gets of the `asked`: no more than would let its
/// bursts hold half the buffers of one of `regions` (each with the most
/// buffers of it one burst holds), so that no consumer can pin what
/// receive needs. The welcome's ring shape says what was granted.
fn granted_slots(config: &daqiri::config::model::EngineConfig, regions: &[(String, u32)], asked: u32) -> u32 {
    regions
        .iter()
        .filter_map(|(name, per_burst)| {
            let region = config.memory_regions.iter().find(|r| &r.name == name)?;
            Some((region.num_bufs / 2 / per_burst.max(&1)).max(1))
        })
        .fold(asked, u32::min)
}

fn refuse(connection: &OwnedFd, reason: String) {
    tracing::warn!("refused a consumer: {reason}");
    let message = serde_json::to_vec(&Answer::Refused { reason }).expect("a refusal serialises");
    let _ = wire::send(connection, &message, &[]);
}
