//! What a RoCE port's RX and TX tasks share: the device objects (the
//! protection domain and each region's registration), each queue pair's
//! live connection (its queue pair and completion queues), and what the
//! status shows.
//!
//! Ownership fixes the order the verbs free things in: a connection holds
//! the device and its event channel, so its queue pair goes before the
//! registrations and the domain, and its id before the channel.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::sysfs;
use super::verbs::{self, CmId, CompletionQueue, EventChannel, MemoryRegistration, ProtectionDomain};
use crate::backend::link::{LinkStats, RdmaConnection, RoceLink};
use crate::burst::RemoteMemory;
use crate::memory::{BufToken, LentBuffers};
use crate::port::Port;

/// Why a port whose RDMA device was removed is down.
pub(super) const DEVICE_REMOVED: &str = "its RDMA device was removed: the port let go of everything it had on it and stays down until the gateway restarts or a reload changes the port";

/// Whether the port's RDMA device was removed; once set, never cleared.
#[derive(Debug, Default)]
pub(super) struct Removal(AtomicBool);

impl Removal {
    pub(super) fn note(&self) {
        self.0.store(true, Relaxed);
    }

    pub(super) fn happened(&self) -> bool {
        self.0.load(Relaxed)
    }
}

/// What a RoCE port's status shows of its device: where the port is on
/// it, its counters while it is there, and why the port is down once it
/// was removed.
pub(super) fn device_stats(place: Option<&RoceLink>, removal: &Removal) -> LinkStats {
    let removed = removal.happened();
    LinkStats {
        nic_counters: place.filter(|_| !removed).map(|p| sysfs::hw_counters(&p.device, p.port)).unwrap_or_default(),
        roce: place.cloned(),
        down: removed.then(|| DEVICE_REMOVED.to_owned()),
        ..LinkStats::default()
    }
}

/// How long a queue pair in the error state is given to flush its work
/// requests: a closed connection's buffers are then given up on (kept out
/// of the pool, and said so); an ingest ring is brought back regardless.
pub(super) const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// A device's protection domain and the registrations of the port's
/// regions, freed in that order, then the id that keeps the device open
/// (rdma_cm closes a device its last id lets go of), then the channel.
#[derive(Debug)]
pub(super) struct Device {
    /// (region index, its registration).
    pub(super) registrations: Vec<(u16, MemoryRegistration)>,
    pub(super) pd: ProtectionDomain,
    /// The server's listener, or the first id bound to the local address
    /// (a client's, an ingest port's): it listens, or keeps the device
    /// open, until dropped.
    pub(super) anchor: CmId,
    pub(super) channel: Arc<EventChannel>,
}

impl Device {
    /// The local key of region `region`'s registration.
    pub(super) fn lkey(&self, region: u16) -> Option<u32> {
        self.registrations.iter().find(|(r, _)| *r == region).map(|(_, mr)| mr.lkey())
    }
}

/// One connected queue pair, in the order it is freed.
#[derive(Debug)]
pub(super) struct Connection {
    pub(super) id: CmId,
    pub(super) send_cq: CompletionQueue,
    pub(super) recv_cq: CompletionQueue,
    _device: Arc<Device>,
    /// The channel `id`'s events come on.
    _channel: Arc<EventChannel>,
}

impl Connection {
    pub(super) fn new(
        id: CmId,
        (send_cq, recv_cq): (CompletionQueue, CompletionQueue),
        device: &Arc<Device>,
        channel: &Arc<EventChannel>,
    ) -> Self {
        Self { id, send_cq, recv_cq, _device: Arc::clone(device), _channel: Arc::clone(channel) }
    }
}

/// The connection as the status shows it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ConnectionState {
    pub(super) peer: Option<SocketAddr>,
    pub(super) connected: bool,
}

/// One queue pair's connection, once established (swapped out when it
/// closes), shared by the RX and TX queue of one position.
#[derive(Debug, Default)]
pub(super) struct Link {
    current: ArcSwapOption<Connection>,
    state: Mutex<ConnectionState>,
    /// Set when the device went away under the port (one for all its links).
    pub(super) removal: Arc<Removal>,
    /// What the TX task's RDMA READs brought, for the RX task to deliver.
    pub(super) reads: ReadResults,
    /// Connections established so far.
    established: AtomicU64,
    /// The TX task's work requests that are done, and of them the failed.
    pub(super) finished: Finished,
}

/// Work requests done, counted as they finish, for a program that waits
/// on its own requests' completions ([`RdmaConnection`]).
#[derive(Debug, Default)]
pub(super) struct Finished {
    all: AtomicU64,
    failed: AtomicU64,
}

impl Finished {
    pub(super) fn ok(&self) {
        self.all.fetch_add(1, Relaxed);
    }

    pub(super) fn failed(&self, n: u64) {
        // Failed first: a reader that sees the total sees the failures in it.
        self.failed.fetch_add(n, Relaxed);
        self.all.fetch_add(n, Relaxed);
    }
}

/// An RDMA READ the TX task completed: its buffer (of its RX queue's
/// region), how many bytes it read into it, and from where.
#[derive(Debug)]
pub(super) struct ReadResult {
    pub(super) token: BufToken,
    pub(super) len: u32,
    pub(super) from: RemoteMemory,
}

/// READ results on their way from the TX task to the RX task, until the
/// RX task stops taking them (then the TX task releases what it read).
#[derive(Debug, Default)]
pub(super) struct ReadResults(Mutex<(bool, std::collections::VecDeque<ReadResult>)>);

impl ReadResults {
    /// Hands `result` over; gives it back once the RX task stopped.
    pub(super) fn hand(&self, result: ReadResult) -> Result<(), ReadResult> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if inner.0 {
            return Err(result);
        }
        inner.1.push_back(result);
        Ok(())
    }

    /// The oldest result handed over and not taken yet.
    pub(super) fn next(&self) -> Option<ReadResult> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).1.pop_front()
    }

    /// Takes no more; what was handed over and not taken.
    pub(super) fn close(&self) -> std::collections::VecDeque<ReadResult> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.0 = true;
        std::mem::take(&mut inner.1)
    }
}

impl Link {
    pub(super) fn new(removal: &Arc<Removal>) -> Self {
        Self { removal: Arc::clone(removal), ..Self::default() }
    }

    /// The established connection, if any.
    pub(super) fn connection(&self) -> Option<Arc<Connection>> {
        self.current.load_full()
    }

    pub(super) fn established(&self, connection: Arc<Connection>) {
        let peer = connection.id.peer();
        self.current.store(Some(connection));
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ConnectionState { peer, connected: true };
        self.established.fetch_add(1, Relaxed);
    }

    pub(super) fn closed(&self) {
        self.current.store(None);
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ConnectionState::default();
    }

    pub(super) fn state(&self) -> ConnectionState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection as a program driving it request by request reads it.
    pub(super) fn rdma_connection(&self) -> RdmaConnection {
        let ConnectionState { peer, connected } = self.state();
        // The total before the failures: never more failures than finished.
        let finished = self.finished.all.load(Relaxed);
        RdmaConnection {
            connected,
            peer,
            established: self.established.load(Relaxed),
            finished,
            failed: self.finished.failed.load(Relaxed).min(finished),
        }
    }
}

/// A task whose work requests lend its queue's buffers to the device until
/// they complete: how it lets go of a connection that closed.
pub(super) trait LendsToDevice {
    /// What the device does with the buffers, for the log.
    const WORK: &'static str;

    /// The buffers the device holds, by work request id.
    fn lent(&mut self) -> &mut LentBuffers;

    /// Takes `connection`'s completions, flushed ones included: how many.
    fn complete(&mut self, port: &Port, connection: &Connection) -> usize;

    /// Moves `old`'s queue pair to the error state and takes completions
    /// until the device flushed every buffer it held, for [`FLUSH_WAIT`] at
    /// most. The buffers it did not flush are forgotten, not released (the
    /// device may still touch them): how many.
    fn flush(&mut self, port: &Port, old: &Connection, num_bufs: u32) -> usize {
        verbs::to_error(&old.id);
        let deadline = Instant::now() + FLUSH_WAIT;
        while self.lent().lent() > 0 && Instant::now() < deadline {
            if self.complete(port, old) == 0 {
                std::thread::yield_now();
            }
        }
        let stuck = self.lent().lent();
        if stuck > 0 {
            tracing::error!(
                port = port.name,
                buffers = stuck,
                "the device did not flush these {} buffers within {FLUSH_WAIT:?}; they stay out of the pool",
                Self::WORK
            );
            *self.lent() = LentBuffers::keyed(num_bufs);
        }
        stuck
    }
}
