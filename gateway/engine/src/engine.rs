//! The engine: DAQIRI's lifecycle (`daqiri_init`, RX/TX burst calls,
//! utilities, `shutdown`) as methods of one value instead of globals.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use daqiri_config::{Document, InterfaceBackend, ValidConfig};

use crate::backend::{self, PortDriver};
use crate::burst::{Burst, EngineId};
use crate::direction::Direction;
use crate::error::{Error, Result, Status};
use crate::memory::{Region, RegionTable};
use crate::port::Port;
use crate::reload::ReloadChange;
use crate::runtime_flows::RuntimeFlows;
use crate::state::EngineState;
use crate::stats::{DropReason, QueueStatsSnapshot};
use crate::worker;

/// A running engine: memory regions allocated, sockets or devices open,
/// worker threads started. Dropping it shuts down.
///
/// ```no_run
/// # fn main() -> daqiri::Result<()> {
/// let engine = daqiri::Engine::from_file("configs/socket_udp_server.yaml")?;
/// let port = engine.get_port_id("udp_rx").expect("interface is configured");
/// loop {
///     if let Some(burst) = engine.get_rx_burst(port, 0)? {
///         for packet in burst.packets() {
///             let _payload: &[u8] = packet.data();
///         }
///     } // the burst drops here: its buffers go back to their pool
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Engine {
    inner: Arc<EngineState>,
    /// One live driver per port, in port order.
    drivers: Vec<Box<dyn PortDriver>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    stopped: AtomicBool,
    /// Flows added at runtime; its lock also keeps flow edits and reloads in turn.
    runtime_flows: Mutex<RuntimeFlows>,
    /// Regions handed to another process ([`share_region`](Self::share_region)), by index.
    shared_regions: Mutex<std::collections::BTreeSet<u16>>,
}

/// A TX burst the engine could not accept, handed back for a retry.
#[derive(Debug)]
pub struct SendError {
    /// Why it was refused.
    pub error: Error,
    /// The burst, untouched.
    pub burst: Burst,
}

impl Engine {
    /// The engine's regions, in config order.
    pub(crate) fn regions(&self) -> &Arc<RegionTable> {
        &self.inner.regions
    }

    /// The indexes of the regions handed to another process (see `sharing`).
    pub(crate) fn shared_regions(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<u16>> {
        self.shared_regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This engine's id, as its bursts carry it ([`Burst::engine_id`](crate::Burst::engine_id)).
    pub fn id(&self) -> crate::EngineId {
        self.inner.id
    }

    /// Reads, validates and starts a config file (DAQIRI's `daqiri_init(path)`).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let doc = Document::read(path.as_ref())?;
        Self::new(doc.validate()?)
    }

    /// Parses, validates and starts YAML text.
    pub fn from_yaml(text: &str) -> Result<Self> {
        Self::new(Document::parse(text)?.validate()?)
    }

    /// Starts a validated config (DAQIRI's `daqiri_init(config)`).
    /// A key this build cannot honour fails with `NOT_SUPPORTED` naming its
    /// YAML path (see [`crate::support`]), before anything is allocated; so
    /// does a core this process may not run on, unless unpinned threads are
    /// allowed ([`crate::preflight::allow_unpinned_cores`]).
    pub fn new(config: ValidConfig) -> Result<Self> {
        crate::support::require_supported(&config)?;
        crate::preflight::require_present_cores(&config)?;
        crate::preflight::check_memory(&config, crate::preflight::MemoryNeeds::default())?;
        let mut region_configs = config.config().memory_regions.clone();
        for raised in crate::preflight::raised_num_bufs(&config) {
            let region = &mut region_configs[raised.region];
            tracing::warn!(region = %region.name, "{}", raised.message());
            region.num_bufs = raised.to;
        }
        let mut regions = region_configs.iter().map(Region::new).collect::<Result<Vec<_>>>()?;
        backend::adopt_regions(&config, &mut regions)?;
        let id = EngineId::next();
        let regions = Arc::new(RegionTable::new(regions));
        let ports = (0..config.config().interfaces.len())
            .map(|i| Port::new(&config, i, &regions, id))
            .collect::<Result<Vec<_>>>()?;
        let mut drivers = ports.iter().map(|p| backend::open(&config, p, &regions)).collect::<Result<Vec<_>>>()?;
        let config = arc_swap::ArcSwap::from_pointee(config);
        let inner = Arc::new(EngineState { id, config, regions, ports, stopping: AtomicBool::new(false) });
        let tasks = drivers.iter_mut().zip(&inner.ports).flat_map(|(driver, port)| driver.tasks(port)).collect();
        // Built before the workers start, so a failed spawn still stops those already running.
        let engine = Engine {
            runtime_flows: Mutex::new(RuntimeFlows::new(inner.ports.len())),
            inner,
            drivers,
            workers: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
            shared_regions: Mutex::new(std::collections::BTreeSet::new()),
        };
        *engine.workers.lock().unwrap_or_else(|e| e.into_inner()) = worker::start(&engine.inner, tasks)?;
        Ok(engine)
    }

    /// The config the engine runs.
    pub fn config(&self) -> Arc<ValidConfig> {
        self.inner.config.load_full()
    }

    /// Number of ports (interfaces).
    pub fn num_ports(&self) -> usize {
        self.inner.ports.len()
    }

    /// Port id of an interface, looked up by name or address (`get_port_id`).
    pub fn get_port_id(&self, name_or_address: &str) -> Option<u16> {
        let ports = &self.inner.ports;
        ports
            .iter()
            .find(|p| p.name == name_or_address)
            .or_else(|| ports.iter().find(|p| p.address == name_or_address))
            .map(|p| p.id)
    }

    /// The Ethernet address of port `port`, as its device reports it
    /// (DAQIRI's `get_mac_addr`): a DPDK port's, an AF_XDP netdev's, the
    /// software loopback's own. A socket or RDMA port has none of its own
    /// (the kernel frames its packets): `NOT_SUPPORTED`.
    pub fn mac_address(&self, port: u16) -> Result<[u8; 6]> {
        let p = self.port(port)?;
        self.drivers[port as usize].mac_address().ok_or_else(|| {
            Error::new(
                Status::NotSupported,
                format!(
                    "port {port} (\"{}\") is a {} port, which has no Ethernet address of its own: the kernel frames what it sends",
                    p.name,
                    p.backend.as_str()
                ),
            )
        })
    }

    /// Sets option (`level`, `name`) to `value` (its bytes, as
    /// `setsockopt(2)` takes them) on the sockets of socket port `port`
    /// (DAQIRI's `socket_setsockopt`), and on those it opens later: a TCP
    /// connection accepted or made again, a UDP server's peer socket. A TCP
    /// port between connections keeps it for the next (DAQIRI answers
    /// `CONNECT_FAILURE`). Other ports have no socket: `NOT_SUPPORTED`.
    pub fn set_socket_option(&self, port: u16, level: i32, name: i32, value: &[u8]) -> Result<()> {
        let p = self.port(port)?;
        let set =
            self.drivers[port as usize].set_socket_option(level, name, value).ok_or_else(|| no_socket(port, p))?;
        set.map_err(|e| on_port(e, port, p))
    }

    /// Option (`level`, `name`) of socket port `port`'s socket (a TCP
    /// port's connection: `NOT_READY` between connections), as the kernel
    /// holds it; DAQIRI has no such call.
    pub fn socket_option(&self, port: u16, level: i32, name: i32) -> Result<Vec<u8>> {
        let p = self.port(port)?;
        let read = self.drivers[port as usize].socket_option(level, name).ok_or_else(|| no_socket(port, p))?;
        read.map_err(|e| on_port(e, port, p))
    }

    /// Connection `index` (its RX queue's position; TX queue `index` sends
    /// on it) of RoCE port `port`, for a program that waits on its own
    /// requests' completions (DAQIRI's `rdma_*` calls). Other ports:
    /// `NOT_SUPPORTED`; a position with no RX queue: `INVALID_PARAMETER`.
    pub fn rdma_connection(&self, port: u16, index: usize) -> Result<crate::backend::RdmaConnection> {
        let p = self.port(port)?;
        if p.backend != InterfaceBackend::Roce {
            return Err(Error::new(
                Status::NotSupported,
                format!("port {port} (\"{}\") is a {} port, not a RoCE one", p.name, p.backend.as_str()),
            ));
        }
        self.drivers[port as usize].rdma_connection(index).ok_or_else(|| {
            Error::invalid(format!(
                "port {port} (\"{}\") has {} connections (one per RX queue); {index} is none of them",
                p.name,
                p.rx.len()
            ))
        })
    }

    fn port(&self, port: u16) -> Result<&Port> {
        self.inner.ports.get(port as usize).ok_or_else(|| {
            Error::invalid(format!(
                "port {port} does not exist; valid: 0..{}",
                self.inner.ports.len().saturating_sub(1)
            ))
        })
    }

    fn queue(&self, port: u16, direction: Direction, queue: u16) -> Result<&crate::queue::Queue> {
        let p = self.port(port)?;
        p.queue(direction, queue).ok_or_else(|| {
            let ids: Vec<String> = p.queues(direction).iter().map(|q| q.id.to_string()).collect();
            Error::invalid(format!(
                "port {port} (\"{}\") has no {} queue {queue}; valid: {}",
                p.name,
                direction.as_str(),
                ids.join(", ")
            ))
        })
    }

    /// The next burst of one RX queue; `Ok(None)` when none is ready (DAQIRI's `NULL_PTR`).
    /// In `poll_mode: direct` this call receives on the caller's thread first.
    /// Once the engine is shut down and the queue drained: `NOT_READY`.
    pub fn get_rx_burst(&self, port: u16, queue: u16) -> Result<Option<Burst>> {
        let q = self.queue(port, Direction::Rx, queue)?;
        // Popped first: asking whether the ring is empty reads the index the
        // worker moves on every push, one more line from its core per call.
        let popped = q.ring.pop().or_else(|| {
            self.inner.ports[port as usize].poll_direct(self.inner.stopping());
            q.ring.pop()
        });
        match popped {
            None if self.has_stopped() => Err(self.not_ready()),
            burst => Ok(burst),
        }
    }

    fn not_ready(&self) -> Error {
        Error::new(Status::NotReady, "the engine is shut down; start a new one to receive or send")
    }

    /// The next burst of any RX queue of `port`, round-robin.
    pub fn get_rx_burst_from_port(&self, port: u16) -> Result<Option<Burst>> {
        let p = self.port(port)?;
        let n = p.rx.len();
        let start = p.next_queue.fetch_add(1, Ordering::Relaxed);
        let pop = || (0..n).find_map(|i| p.rx[(start + i) % n].ring.pop());
        Ok(pop().or_else(|| {
            p.poll_direct(self.inner.stopping());
            pop()
        }))
    }

    /// The next burst of any RX queue of any port, round-robin.
    pub fn get_rx_burst_any(&self) -> Option<Burst> {
        (0..self.inner.ports.len() as u16).find_map(|port| self.get_rx_burst_from_port(port).ok().flatten())
    }

    /// Whether `num_packets` buffers per segment are free for a TX burst.
    pub fn tx_burst_available(&self, port: u16, queue: u16, num_packets: usize) -> Result<bool> {
        let q = self.queue(port, Direction::Tx, queue)?;
        Ok(q.meta.available() > 0
            && q.segment_regions.iter().all(|r| self.inner.regions.get(*r).takeable() as usize >= num_packets))
    }

    /// A TX burst of `num_packets` packets with a buffer per segment each
    /// (DAQIRI's `get_tx_packet_burst`). Fill the packets, then
    /// [`send_tx_burst`](Self::send_tx_burst) it or drop it.
    pub fn get_tx_packet_burst(&self, port: u16, queue: u16, num_packets: usize) -> Result<Burst> {
        let q = self.queue(port, Direction::Tx, queue)?;
        if self.is_shut_down() {
            return Err(self.not_ready());
        }
        if num_packets > q.batch_size {
            return Err(Error::invalid(format!(
                "{num_packets} packets exceed TX queue \"{}\" batch_size {}",
                q.name, q.batch_size
            )));
        }
        let mut burst = q.meta.take().ok_or_else(|| {
            Error::new(
                Status::NoFreeBurstBuffers,
                format!("all {} tx_meta_buffers of queue \"{}\" are in flight", q.meta.capacity(), q.name),
            )
        })?;
        if let Err(region) = burst.push_fresh(num_packets) {
            let name = self.inner.regions.get(region).name();
            return Err(Error::new(
                Status::NoFreePacketBuffers,
                format!("memory region \"{name}\" has no free buffer; send or drop bursts sooner or raise num_bufs"),
            ));
        }
        Ok(burst)
    }

    /// Queues a filled TX burst for its queue's worker (DAQIRI's `send_tx_burst`).
    /// A burst of another engine (one kept across a reload) is refused; a
    /// UDP server that has heard no peer yet, or a shut-down engine, answers
    /// `NOT_READY` and hands the burst back.
    pub fn send_tx_burst(&self, mut burst: Burst) -> Result<(), SendError> {
        if burst.engine_id() != self.inner.id {
            return Err(SendError {
                error: Error::invalid(
                    "this burst belongs to another engine (one that was restarted or shut down); take a new burst from this engine with get_tx_packet_burst",
                ),
                burst,
            });
        }
        let q = match self.queue(burst.port_id(), Direction::Tx, burst.queue_id()) {
            Ok(q) => q,
            Err(error) => return Err(SendError { error, burst }),
        };
        if self.is_shut_down() {
            return Err(SendError { error: self.not_ready(), burst });
        }
        let p = &self.inner.ports[burst.port_id() as usize];
        if p.awaiting_peer.load(Ordering::Acquire) {
            return Err(SendError {
                error: Error::new(
                    Status::NotReady,
                    format!(
                        "UDP server \"{}\" has heard from no peer yet, so its TX has nowhere to go; retry once a datagram arrived",
                        p.name
                    ),
                ),
                burst,
            });
        }
        // A `device` segment sent through a CPU backend goes out from its
        // pinned twin: the copy starts here, and the sender waits for it.
        if let Err(error) = q.copier.copy(&mut burst) {
            return Err(SendError { error, burst });
        }
        if let Some(inline) = q.inline.get() {
            match inline.send_now(q, burst) {
                Ok(()) => return Ok(()),
                Err(queued) => burst = queued,
            }
        }
        q.ring.push(burst).map_err(|burst| SendError {
            error: Error::new(
                Status::NoSpaceAvailable,
                format!("TX queue \"{}\" ring is full; retry once the worker catches up", q.name),
            ),
            burst,
        })?;
        q.ring_doorbell();
        Ok(())
    }

    /// Discards every burst waiting in an RX queue; returns the packets discarded.
    pub fn flush_port_queue(&self, port: u16, queue: u16) -> Result<u64> {
        Ok(self.queue(port, Direction::Rx, queue)?.flush())
    }

    /// Drops all incoming packets of a port until [`allow_all_traffic`](Self::allow_all_traffic).
    pub fn drop_all_traffic(&self, port: u16) -> Result<()> {
        self.port(port)?.drop_all.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Restores normal receive after [`drop_all_traffic`](Self::drop_all_traffic).
    pub fn allow_all_traffic(&self, port: u16) -> Result<()> {
        self.port(port)?.drop_all.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Counters of one queue.
    pub fn queue_stats(&self, port: u16, direction: Direction, queue: u16) -> Result<QueueStatsSnapshot> {
        Ok(self.queue(port, direction, queue)?.stats.snapshot())
    }

    /// How full RX queue `queue`'s ring is: bursts waiting for the
    /// application, of how many it holds. An application that does extra
    /// work per burst (a capture's copy) can leave it out while the ring
    /// fills, before the queue has to drop.
    pub fn rx_backlog(&self, port: u16, queue: u16) -> Result<(usize, usize)> {
        let ring = &self.queue(port, Direction::Rx, queue)?.ring;
        Ok((ring.len(), ring.capacity()))
    }

    /// A snapshot of every counter, for status lines, the admin API and metrics.
    pub fn stats(&self) -> crate::EngineStats {
        crate::snapshot::take(&self.inner, &self.drivers)
    }

    /// Runs the kernels of GPU reorder plan `plan` (its `name`) of `port`
    /// on `stream` from the next batch on (DAQIRI's
    /// `set_reorder_cuda_stream`), so the application's own work on that
    /// stream follows each aggregate without a host wait. The stream must
    /// be on the plan's GPU ([`gpu::borrowed_stream`](crate::gpu::borrowed_stream)
    /// wraps one made with CUDA's runtime).
    #[cfg(feature = "cuda")]
    pub fn set_reorder_cuda_stream(
        &self,
        port: u16,
        plan: &str,
        stream: std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<()> {
        let p = self.port(port)?;
        let found = p.plans.iter().find(|candidate| candidate.name == plan).ok_or_else(|| {
            let names: Vec<_> = p.plans.iter().map(|c| format!("\"{}\"", c.name)).collect();
            Error::invalid(format!("port {port} has no reorder plan \"{plan}\"; its plans: [{}]", names.join(", ")))
        })?;
        let gpu = found.gpu.as_ref().ok_or_else(|| {
            Error::invalid(format!("reorder plan \"{plan}\" is reorder_type cpu: it runs no kernels"))
        })?;
        gpu.set_stream(stream)
    }

    /// The local address a socket port is bound to (`None` for other backends).
    pub fn local_addr(&self, port: u16) -> Result<Option<std::net::SocketAddr>> {
        Ok(self.port(port)?.local_addr.get().copied())
    }

    /// What applying `new` takes: nothing, a live swap of RX flows, or a
    /// restart (with the YAML path of the first change that needs one).
    pub fn reload_change(&self, new: &ValidConfig) -> ReloadChange {
        ReloadChange::between(self.inner.config.load().config(), new.config())
    }

    /// Applies a new config whose only changes are RX flows and
    /// `flow_isolation`, without stopping anything: each port's driver gets
    /// the new flow table whole, so no packet is lost and unchanged flows keep
    /// their counters. Flows added at runtime ([`add_flow`](Self::add_flow))
    /// are kept where the new config still allows them. Any other change is
    /// refused with the first YAML path that differs (see
    /// [`reload_change`](Self::reload_change)). If a driver cannot apply its
    /// table, the ports already changed get their old tables back, and the
    /// running config stays as it was.
    pub fn reload_flows(&self, new: ValidConfig) -> Result<()> {
        if let ReloadChange::Restart { path } = self.reload_change(&new) {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "{path} changed: only rx.flows and rx.flow_isolation can change on a running engine; restart the gateway for this config"
                ),
            ));
        }
        let mut runtime = self.runtime_flows.lock().unwrap_or_else(|e| e.into_inner());
        let (merged, kept) = runtime.carried_into(new);
        self.swap_flows(merged)?;
        *runtime = kept;
        Ok(())
    }

    /// Adds one RX flow to `port` while traffic runs (DAQIRI's dynamic
    /// flows): it is validated as a config entry would be (unique name and
    /// id, existing queues), counts against the interface's
    /// `rx.dynamic_flow_capacity`, and is programmed as the last rule, so
    /// flows already there keep matching first. On DPDK it becomes rte_flow
    /// rules; a PMD that refuses them fails the call with its reason and
    /// leaves the running rules untouched.
    pub fn add_flow(&self, port: u16, flow: daqiri_config::model::Flow) -> Result<()> {
        self.port(port)?;
        let mut runtime = self.runtime_flows.lock().unwrap_or_else(|e| e.into_inner());
        let new = runtime.with_added(&self.config(), port as usize, &flow)?;
        self.swap_flows(new)?;
        runtime.record(port as usize, flow);
        Ok(())
    }

    /// Deletes RX flow `flow_id` of `port`, whether it came from the config
    /// or from [`add_flow`](Self::add_flow), and returns it. Its packets
    /// fall to the rules after it (or the default queue, or are dropped
    /// under `flow_isolation`) from the next packet on.
    pub fn delete_flow(&self, port: u16, flow_id: u32) -> Result<daqiri_config::model::Flow> {
        self.port(port)?;
        let mut runtime = self.runtime_flows.lock().unwrap_or_else(|e| e.into_inner());
        let (new, removed) = RuntimeFlows::with_removed(&self.config(), port as usize, flow_id)?;
        self.swap_flows(new)?;
        runtime.forget(port as usize, flow_id);
        Ok(removed)
    }

    /// The flows added to `port` at runtime and still in place, oldest first.
    pub fn runtime_flows(&self, port: u16) -> Result<Vec<daqiri_config::model::Flow>> {
        self.port(port)?;
        Ok(self.runtime_flows.lock().unwrap_or_else(|e| e.into_inner()).of(port as usize).to_vec())
    }

    /// Gives every port the flow table of `new` and makes `new` the running
    /// config; on a driver's refusal, restores the ports already changed.
    fn swap_flows(&self, new: ValidConfig) -> Result<()> {
        let mut applied: Vec<(usize, Arc<crate::flow::FlowTable>)> = Vec::new();
        for (port, iface) in new.interfaces() {
            let p = &self.inner.ports[port];
            let old = p.flows.load_full();
            let table = crate::flow::FlowTable::replacing(&iface.rx.clone().unwrap_or_default(), Some(&old));
            if let Err(e) = self.drivers[port].apply_flows(p, Arc::new(table)) {
                for (port, old) in applied.into_iter().rev() {
                    let p = &self.inner.ports[port];
                    if let Err(undo) = self.drivers[port].apply_flows(p, old) {
                        tracing::error!(interface = %p.name, "cannot restore the previous flows after a failed reload: {undo}");
                    }
                }
                return Err(e);
            }
            applied.push((port, old));
        }
        self.inner.config.store(Arc::new(new));
        Ok(())
    }

    /// The backend driving a port.
    pub fn backend(&self, port: u16) -> Result<InterfaceBackend> {
        Ok(self.port(port)?.backend)
    }

    /// Stops the workers and waits for them (DAQIRI's `shutdown`). No packet
    /// arrives afterwards, but bursts already delivered stay readable, so an
    /// application can drain the rings before it drops the engine. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stopping.store(true, Ordering::Relaxed);
        // Joined under the lock: a concurrent caller returns only once every worker is gone.
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        for worker in workers.drain(..) {
            if worker.join().is_err() {
                tracing::error!("a worker thread panicked during shutdown");
            }
        }
        // What the application sent and no worker took before it stopped is
        // counted, never silently gone.
        for port in &self.inner.ports {
            for q in &port.tx {
                q.discard(DropReason::Unsent);
            }
        }
        // Drivers close what the workers used, once and only after the last worker is gone.
        if !self.stopped.load(Ordering::Acquire) {
            for driver in &self.drivers {
                driver.stop();
            }
        }
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether [`shutdown`](Self::shutdown) has begun.
    pub fn is_shut_down(&self) -> bool {
        self.inner.stopping()
    }

    /// Whether [`shutdown`](Self::shutdown) has finished: no worker will
    /// deliver another burst, so an empty poll now means drained.
    pub fn has_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn no_socket(port: u16, p: &Port) -> Error {
    Error::new(
        Status::NotSupported,
        format!("port {port} (\"{}\") is a {} port: it has no socket to set options on", p.name, p.backend.as_str()),
    )
}

/// `error`, its message saying which port (its OS error kept).
fn on_port(mut error: Error, port: u16, p: &Port) -> Error {
    error.message = format!("port {port} (\"{}\"): {}", p.name, error.message);
    error
}
