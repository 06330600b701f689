//! The connections of a RoCE port, one per queue position (RX queue j
//! and TX queue j share one), each driven by the `rdma_cm` events of its
//! own channel on its RX queue's worker. A server's listener is queue 0's:
//! it hands each connect request to the first queue without a peer, and
//! refuses one when every queue has its peer. A client's queues each
//! resolve the server, connect, and try again a second after any failure
//! or disconnect. A new connection's queue pair is handed out before it
//! starts, so its receives are posted before the first message can arrive.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::connection::{Connection, Device, Link};
use super::verbs::{self, CmEvent, CmId, CompletionQueue, EventChannel, event};

/// How long address and route resolution may take.
const RESOLVE_TIMEOUT_MS: i32 = 2000;
/// A client's pause between a failed or closed connection and the next try.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// A server port's queue positions, each taking one peer at a time.
#[derive(Debug)]
pub(super) struct Seats(Vec<Seat>);

#[derive(Debug)]
struct Seat {
    /// Set when the listener hands the seat a request, cleared when that
    /// connection ends.
    taken: AtomicBool,
    /// A request handed over and not picked up yet, on `channel`.
    request: Mutex<Option<CmId>>,
    channel: Arc<EventChannel>,
}

impl Seats {
    /// One seat per channel; the first channel is the listener's.
    pub(super) fn new(channels: &[Arc<EventChannel>]) -> Self {
        Self(
            channels
                .iter()
                .map(|channel| Seat {
                    taken: AtomicBool::new(false),
                    request: Mutex::new(None),
                    channel: Arc::clone(channel),
                })
                .collect(),
        )
    }

    /// Claims the first free seat for a request.
    fn claim(&self) -> Option<usize> {
        self.0
            .iter()
            .position(|seat| seat.taken.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok())
    }

    fn free(&self, seat: usize) {
        self.0[seat].taken.store(false, Ordering::Release);
    }

    /// The request handed to `seat`, if one waits.
    fn pick_up(&self, seat: usize) -> Option<CmId> {
        self.0[seat].request.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Moves `id` onto `seat`'s channel and leaves it there.
    fn hand(&self, seat: usize, id: CmId) -> std::io::Result<()> {
        id.migrate(&self.0[seat].channel)?;
        *self.0[seat].request.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
        Ok(())
    }
}

/// Which end of the connection this queue position is.
#[derive(Debug)]
pub(super) enum Role {
    /// Seat `seat` of the port's seats; seat 0 listens (the device's
    /// anchor is the listener, on seat 0's channel).
    Server {
        seat: usize,
        seats: Arc<Seats>,
    },
    Client {
        local: IpAddr,
        remote: SocketAddr,
        resolving: Option<CmId>,
        retry_at: Instant,
        failures: u64,
    },
}

/// One connection's life: what is set up, what is live (in [`Link`]).
#[derive(Debug)]
pub(super) struct Manager {
    port: String,
    role: Role,
    /// Made, its receives posted, not established yet.
    pending: Option<Arc<Connection>>,
    link: Arc<Link>,
    qp_type: u32,
    /// (send, receive) work requests the queue pair holds.
    depths: (u32, u32),
    device: Arc<Device>,
    /// Where this connection's events come (the device's own channel for queue 0).
    channel: Arc<EventChannel>,
}

impl Manager {
    pub(super) fn new(
        port: &str,
        (role, link): (Role, Arc<Link>),
        (qp_type, depths): (u32, (u32, u32)),
        (device, channel): (Arc<Device>, Arc<EventChannel>),
    ) -> Self {
        Self { port: port.to_owned(), role, pending: None, link, qp_type, depths, device, channel }
    }

    /// Answers what the channel reports; returns a new connection whose
    /// receives the caller posts before calling [`start`](Self::start).
    pub(super) fn poll(&mut self) -> Option<Arc<Connection>> {
        let mut made = self.try_connect().or_else(|| self.handed());
        loop {
            let event = match self.channel.next() {
                Ok(Some(event)) => event,
                Ok(None) => return made,
                Err(e) => {
                    tracing::error!(port = self.port, "rdma_cm channel: {e}");
                    return made;
                }
            };
            if let Some(connection) = self.handle(event) {
                made = Some(connection);
            }
        }
    }

    /// Accepts (server) or connects (client) a connection from [`poll`](Self::poll).
    pub(super) fn start(&mut self, connection: &Arc<Connection>) {
        let started = match self.role {
            Role::Server { .. } => verbs::accept(&connection.id),
            Role::Client { .. } => connection.id.connect(),
        };
        match started {
            Ok(()) => self.pending = Some(Arc::clone(connection)),
            Err(e) => self.failed(&e.to_string()),
        }
    }

    /// The connection set up and started, not established yet.
    pub(super) fn pending(&self) -> Option<Arc<Connection>> {
        self.pending.clone()
    }

    /// Closes whatever is set up or live, at stop.
    pub(super) fn close(&mut self) {
        self.pending = None;
        if let Some(live) = self.link.connection() {
            verbs::disconnect(&live.id);
        }
        self.link.closed();
        match &mut self.role {
            Role::Client { resolving, .. } => *resolving = None,
            Role::Server { seat, seats } => {
                drop(seats.pick_up(*seat));
                seats.free(*seat);
            }
        }
    }

    fn handle(&mut self, event: CmEvent) -> Option<Arc<Connection>> {
        tracing::debug!(port = self.port, kind = event.kind, status = event.status, "rdma_cm event");
        if let Some(id) = event.request {
            return self.requested(id);
        }
        let ours = |c: &Option<Arc<Connection>>| c.as_ref().is_some_and(|c| c.id.is(event.id));
        let resolving = matches!(&self.role, Role::Client { resolving: Some(id), .. } if id.is(event.id));
        match event.kind {
            event::RDMA_CM_EVENT_ADDR_RESOLVED if resolving => {
                if let Err(e) = self.resolving().map_or(Ok(()), |id| id.resolve_route(RESOLVE_TIMEOUT_MS)) {
                    self.failed(&e.to_string());
                }
                None
            }
            event::RDMA_CM_EVENT_ROUTE_RESOLVED if resolving => {
                let Role::Client { resolving, .. } = &mut self.role else { return None };
                let id = resolving.take()?;
                self.made(id)
            }
            event::RDMA_CM_EVENT_ESTABLISHED if ours(&self.pending) => {
                let live = self.pending.take()?;
                tracing::info!(port = self.port, peer = ?live.id.peer(), "RoCE connection established");
                self.link.established(live);
                self.failures_reset();
                None
            }
            event::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                // The removal waits for every object on the device to go:
                // the receive task lets go of the rest once it sees this.
                self.close();
                self.link.removal.note();
                None
            }
            kind if resolving || ours(&self.pending) || self.link.connection().is_some_and(|c| c.id.is(event.id)) => {
                self.failed(&format!("rdma_cm event {kind} (status {})", event.status));
                None
            }
            _ => None,
        }
    }

    fn resolving(&self) -> Option<&CmId> {
        match &self.role {
            Role::Client { resolving, .. } => resolving.as_ref(),
            Role::Server { .. } => None,
        }
    }

    /// A connect request on the listener: to the first queue without a
    /// peer (this one's made here), refused when there is none.
    fn requested(&mut self, id: CmId) -> Option<Arc<Connection>> {
        let Role::Server { seat, seats } = &self.role else { return None };
        let Some(free) = seats.claim() else {
            tracing::warn!(port = self.port, peer = ?id.peer(), "refused a RoCE connection: every queue has its peer");
            verbs::reject(&id);
            return None;
        };
        if free == *seat {
            return self.made(id);
        }
        if let Err(e) = seats.hand(free, id) {
            // The id is gone with the error (its peer's connect fails).
            tracing::error!(port = self.port, "cannot hand a RoCE connection to queue position {free}: {e}");
            seats.free(free);
        }
        None
    }

    /// A request the listener handed to this queue.
    fn handed(&mut self) -> Option<Arc<Connection>> {
        let Role::Server { seat, seats } = &self.role else { return None };
        let id = seats.pick_up(*seat)?;
        self.made(id)
    }

    /// The queue pair of `id`, on completion queues of its own.
    fn made(&mut self, id: CmId) -> Option<Arc<Connection>> {
        let device = id.verbs()?;
        let (send, receive) = self.depths;
        let cqs =
            CompletionQueue::new(device, send + 1).and_then(|s| Ok((s, CompletionQueue::new(device, receive + 1)?)));
        let made = cqs.and_then(|(send_cq, recv_cq)| {
            verbs::create_queue_pair(&id, &self.device.pd, (&send_cq, &recv_cq), self.qp_type, self.depths)?;
            Ok(Connection::new(id, (send_cq, recv_cq), &self.device, &self.channel))
        });
        match made {
            Ok(connection) => Some(Arc::new(connection)),
            Err(e) => {
                self.failed(&format!("cannot set up a queue pair: {e}"));
                None
            }
        }
    }

    /// A client with nothing set up starts resolving its server, when due.
    fn try_connect(&mut self) -> Option<Arc<Connection>> {
        if self.pending.is_some() || self.link.connection().is_some() {
            return None;
        }
        let Role::Client { local, remote, resolving, retry_at, .. } = &mut self.role else { return None };
        if resolving.is_some() || Instant::now() < *retry_at {
            return None;
        }
        let started = CmId::bound(&self.channel, *local, self.qp_type).and_then(|id| {
            id.resolve_addr(*remote, RESOLVE_TIMEOUT_MS)?;
            Ok(id)
        });
        match started {
            Ok(id) => *resolving = Some(id),
            Err(e) => self.failed(&e.to_string()),
        }
        None
    }

    /// Lets go of what was set up or live, saying why; a client tries
    /// again later, and says so again only once it has connected between.
    fn failed(&mut self, why: &str) {
        self.close();
        match &mut self.role {
            Role::Client { retry_at, failures, remote, .. } => {
                if *failures == 0 {
                    tracing::warn!(port = self.port, %remote, "RoCE connection down ({why}); retrying every {RETRY_AFTER:?}");
                }
                *failures += 1;
                *retry_at = Instant::now() + RETRY_AFTER;
            }
            Role::Server { .. } => tracing::info!(port = self.port, "RoCE connection closed ({why})"),
        }
    }

    fn failures_reset(&mut self) {
        if let Role::Client { failures, .. } = &mut self.role {
            *failures = 0;
        }
    }
}
