//! What a RoCE port's RX and TX tasks share: the device objects (the
//! protection domain and each region's registration), the live connection
//! (its queue pair and completion queues), and what the status shows.
//!
//! Ownership fixes the order the verbs free things in: a connection holds
//! the device (which holds the event channel), so its queue pair goes
//! before the registrations and the domain, and its id before the channel.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;

use super::verbs::{CmId, CompletionQueue, EventChannel, MemoryRegistration, ProtectionDomain};

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
}

impl Connection {
    pub(super) fn new(id: CmId, (send_cq, recv_cq): (CompletionQueue, CompletionQueue), device: &Arc<Device>) -> Self {
        Self { id, send_cq, recv_cq, _device: Arc::clone(device) }
    }
}

/// The connection as the status shows it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ConnectionState {
    pub(super) peer: Option<SocketAddr>,
    pub(super) connected: bool,
}

/// The port's connection, once established; swapped out when it closes.
#[derive(Debug, Default)]
pub(super) struct Link {
    current: ArcSwapOption<Connection>,
    state: Mutex<ConnectionState>,
}

impl Link {
    /// The established connection, if any.
    pub(super) fn connection(&self) -> Option<Arc<Connection>> {
        self.current.load_full()
    }

    pub(super) fn established(&self, connection: Arc<Connection>) {
        let peer = connection.id.peer();
        self.current.store(Some(connection));
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ConnectionState { peer, connected: true };
    }

    pub(super) fn closed(&self) {
        self.current.store(None);
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ConnectionState::default();
    }

    pub(super) fn state(&self) -> ConnectionState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
