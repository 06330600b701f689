//! The consumer socket: a Unix `SOCK_SEQPACKET` socket where consumers
//! subscribe. Each connection gets a thread that answers its hello, then
//! waits for it to close: a consumer that exits or dies (the kernel closes
//! its socket) has its subscription ended and everything it held given
//! back at once; one that says anything after its hello is cut off.
//!
//! Connections are bounded before anyone authenticates: past
//! `max_connections` a new one is refused at once, with no thread; when
//! the process runs out of descriptors the accepting thread waits before
//! it tries again, rather than spinning.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use daqiri::config::model::Interface;
use daqiri_consumer::protocol::{Answer, Hello, MAX_SLOTS, RegionShape, Source, VERSION, Welcome};
use daqiri_consumer::ring::Producer;
use daqiri_consumer::wire;
use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::feed::Feed;
use super::filter::Filter;
use super::{Hub, Refusal};
use crate::live::LiveEngine;

/// How long a consumer has to say hello once connected.
const HELLO_WITHIN: Duration = Duration::from_secs(5);
/// How often the accepting thread looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);
/// How long the accepting thread waits after `accept` failed (out of
/// descriptors or memory), and how often such failures are logged at most.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
const ACCEPT_FAILURE_LOG: Duration = Duration::from_secs(10);

/// The consumer socket, listening; removed when dropped.
#[derive(Debug)]
pub(crate) struct Listener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Listens at `path`, open to the owner and group only, for at most
    /// `max_connections` connections at once. A stale socket there (no one
    /// listens) is replaced; a live one, or anything that is not a socket,
    /// is left alone and refused.
    pub(crate) fn start(
        path: &Path,
        max_connections: usize,
        hub: &Arc<Hub>,
        live: &Arc<LiveEngine>,
    ) -> anyhow::Result<Self> {
        clear_stale_socket(path)?;
        let socket = rustix::net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        rustix::net::bind(&socket, &SocketAddrUnix::new(path)?)
            .map_err(|e| anyhow::anyhow!("cannot listen for consumers at {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o660))?;
        rustix::net::listen(&socket, 64)?;
        tracing::info!("consumers subscribe at {}", path.display());
        let stop = Arc::new(AtomicBool::new(false));
        let (hub, live, flag) = (Arc::clone(hub), Arc::clone(live), Arc::clone(&stop));
        let limit = ConnectionLimit { max: max_connections, open: Arc::default() };
        let thread = std::thread::Builder::new()
            .name("consumer-socket".into())
            .spawn(move || accept_until(&socket, &flag, &limit, &hub, &live))?;
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

/// Makes way for a new socket at `path`: removes a socket no one listens
/// on; refuses a live one (another gateway's) and anything else there.
fn clear_stale_socket(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    anyhow::ensure!(
        meta.file_type().is_socket(),
        "--consumer-socket {}: something that is not a socket is there; remove it or choose another path",
        path.display()
    );
    let probe = rustix::net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
    match rustix::net::connect(&probe, &SocketAddrUnix::new(path)?) {
        Ok(()) => anyhow::bail!(
            "--consumer-socket {}: another process (a gateway?) is listening there; stop it or choose another path",
            path.display()
        ),
        Err(rustix::io::Errno::CONNREFUSED) => Ok(std::fs::remove_file(path)?),
        Err(e) => anyhow::bail!("--consumer-socket {}: cannot tell whether it is in use: {e}", path.display()),
    }
}

/// Connections served now, and how many may be.
struct ConnectionLimit {
    max: usize,
    open: Arc<AtomicUsize>,
}

/// One connection's place under the limit, given back when its thread ends.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn accept_until(socket: &OwnedFd, stop: &AtomicBool, limit: &ConnectionLimit, hub: &Arc<Hub>, live: &Arc<LiveEngine>) {
    let mut last_failure_logged: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        if !readable(socket, STOP_CHECK) {
            continue;
        }
        let connection = match rustix::net::accept_with(socket, SocketFlags::CLOEXEC) {
            Ok(connection) => connection,
            Err(e) => {
                hub.count_refusal(Refusal::AcceptFailed);
                if last_failure_logged.is_none_or(|at| at.elapsed() >= ACCEPT_FAILURE_LOG) {
                    tracing::warn!("consumer socket: accept: {e} (waiting {ACCEPT_BACKOFF:?} between tries)");
                    last_failure_logged = Some(Instant::now());
                }
                std::thread::sleep(ACCEPT_BACKOFF);
                continue;
            }
        };
        if limit.open.fetch_add(1, Ordering::AcqRel) >= limit.max {
            limit.open.fetch_sub(1, Ordering::AcqRel);
            hub.count_refusal(Refusal::TooManyConnections);
            refuse_quietly(&connection, format!("too many consumer connections ({} at once)", limit.max));
            continue;
        }
        let place = Place(Arc::clone(&limit.open));
        let (served, live) = (Arc::clone(hub), Arc::clone(live));
        let spawned = std::thread::Builder::new().name("consumer".into()).spawn(move || {
            let _place = place;
            serve(connection, &served, &live);
        });
        if let Err(e) = spawned {
            hub.count_refusal(Refusal::NoThread);
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
    let Resolved { filter, regions, per_slot, aggregate_slots } =
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
    if let Some(region) = regions.iter().find(|r| r.gpu.is_some()) {
        let refused = match (hub.host_memory_only, hello.gpu_memory) {
            (true, _) => Some("this gateway shares host memory only (--consumer-host-memory-only)"),
            (false, false) => Some(
                "this consumer cannot import GPU memory (a client built with CUDA can: daqiri-consumer's cuda feature)",
            ),
            (false, true) => None,
        };
        if let Some(why) = refused {
            return Err(format!("region \"{}\" is GPU memory (kind device), and {why}", region.name));
        }
    }
    let (producer, ring) =
        Producer::create(slots, per_slot, aggregate_slots).map_err(|e| format!("cannot make a ring: {e}"))?;
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
    hub.know_engine(&engine);
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
    /// The most slots a reorder aggregate it gets may have (0 for none).
    aggregate_slots: u32,
}

/// What `source` of `interface` (port `port`) resolves to.
fn resolve(interface: &Interface, port: u16, source: &Source) -> Result<Resolved, String> {
    let name = &interface.name;
    let queues = interface.rx_queues();
    let plans = interface.rx.as_ref().map_or(&[][..], |rx| &rx.reorder_configs);
    let batch = |queue: &daqiri::config::model::Queue| queue.batch_size().max(1);
    let per_slot = |queue: &daqiri::config::model::Queue| batch(queue) * queue.memory_regions.len().max(1) as u32;
    // A plan's aggregate is one packet of one buffer of its region, of at
    // most its queue's batch_size slots (validation holds it to that).
    let aggregates = plans.iter().map(|plan| (plan.memory_region.clone(), 1));
    let aggregate_slots = if plans.is_empty() { 0 } else { queues.iter().map(batch).max().unwrap_or(0) };
    match source {
        Source::Queue(id) => {
            let queue = queues
                .iter()
                .find(|q| q.id == *id)
                .ok_or_else(|| format!("interface \"{name}\" has no RX queue {id}"))?;
            // A plan on the queue delivers its aggregates there, from its own region.
            let regions = queue.memory_regions.iter().map(|r| (r.clone(), batch(queue))).chain(aggregates).collect();
            let filter = Filter::Queue { port, queue: *id };
            Ok(Resolved { filter, regions, per_slot: per_slot(queue), aggregate_slots })
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
            Ok(Resolved { filter: Filter::Flow { port, flow: *id }, regions, per_slot, aggregate_slots })
        }
        Source::Plan(plan) => {
            let index = plans
                .iter()
                .position(|p| &p.name == plan)
                .ok_or_else(|| format!("interface \"{name}\" has no reorder plan \"{plan}\""))?;
            let regions = vec![(plans[index].memory_region.clone(), 1)];
            let filter = Filter::Plan { port, plan: index as u16 };
            Ok(Resolved { filter, regions, per_slot: 1, aggregate_slots })
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
    refuse_quietly(connection, reason);
}

/// Tells a consumer why it is refused, without a log line: a flood of
/// connections must not become a flood of log.
fn refuse_quietly(connection: &OwnedFd, reason: String) {
    let message = serde_json::to_vec(&Answer::Refused { reason }).expect("a refusal serialises");
    let _ = wire::send(connection, &message, &[]);
}
