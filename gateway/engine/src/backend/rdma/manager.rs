//! A RoCE port's connection, driven by its `rdma_cm` events: a server
//! listens and accepts one peer at a time; a client resolves its server,
//! connects, and tries again a second after any failure or disconnect.
//! A new connection's queue pair is handed out before it starts, so its
//! receives are posted before the first message can arrive.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::{Connection, Device, Link};
use super::verbs::{self, CmEvent, CmId, CompletionQueue, event};

/// How long address and route resolution may take.
const RESOLVE_TIMEOUT_MS: i32 = 2000;
/// A client's pause between a failed or closed connection and the next try.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Which end of the connection this port is.
#[derive(Debug)]
pub(super) enum Role {
    /// Listens through the device's anchor (its listener).
    Server,
    Client {
        local: IpAddr,
        remote: SocketAddr,
        resolving: Option<CmId>,
        retry_at: Instant,
        failures: u64,
    },
}

/// The connection's life: what is set up, what is live (in [`Link`]).
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
}

impl Manager {
    pub(super) fn new(
        port: &str,
        role: Role,
        link: Arc<Link>,
        (qp_type, depths): (u32, (u32, u32)),
        device: Arc<Device>,
    ) -> Self {
        Self { port: port.to_owned(), role, pending: None, link, qp_type, depths, device }
    }

    /// Answers what the channel reports; returns a new connection whose
    /// receives the caller posts before calling [`start`](Self::start).
    pub(super) fn poll(&mut self) -> Option<Arc<Connection>> {
        let mut made = self.try_connect();
        loop {
            let event = match self.device.channel.next() {
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
            Role::Server => verbs::accept(&connection.id),
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
        if let Role::Client { resolving, .. } = &mut self.role {
            *resolving = None;
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
            Role::Server => None,
        }
    }

    /// A server's connect request: one peer at a time.
    fn requested(&mut self, id: CmId) -> Option<Arc<Connection>> {
        if self.pending.is_some() || self.link.connection().is_some() {
            tracing::warn!(port = self.port, peer = ?id.peer(), "refused a second RoCE connection: one peer at a time");
            verbs::reject(&id);
            return None;
        }
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
            Ok(Connection::new(id, (send_cq, recv_cq), &self.device))
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
        let started = CmId::bound(&self.device.channel, *local, self.qp_type).and_then(|id| {
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
            Role::Server => tracing::info!(port = self.port, "RoCE connection closed ({why})"),
        }
    }

    fn failures_reset(&mut self) {
        if let Role::Client { failures, .. } = &mut self.role {
            *failures = 0;
        }
    }
}
