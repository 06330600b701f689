//! The receive task of a RoCE server port, on its RX queue's core: it
//! answers the listener's connection events, keeps the connection's
//! receive queue stocked with region buffers, and hands each completed
//! receive to the queue's assembler as one packet of its received length.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::verbs::{self, CmId, CompletionQueue, EventChannel, MemoryRegistration, ProtectionDomain, ibv_wc};
use crate::delivery::{Assembler, FullRing};
use crate::memory::{LentBuffers, PoolCache, Region};
use crate::port::Port;
use crate::stats::DropReason;
use crate::task::QueueTask;

/// Completions taken per poll.
const RX_BATCH: usize = 64;
/// Most receives posted at once (a region smaller than this posts all of it).
const MAX_POSTED: u32 = 1024;
/// `IBV_WC_WR_FLUSH_ERR`: a receive the device gave back unfilled when the
/// queue pair went to the error state (a disconnect), not a lost message.
const FLUSHED: u32 = 5;

/// The connection as the receiver last saw it, for the status.
#[derive(Debug, Default)]
pub(super) struct ConnectionState {
    pub(super) peer: Option<std::net::SocketAddr>,
    pub(super) connected: bool,
}

/// One accepted connection: its id (and queue pair) before its completion
/// queue, the order they are freed in.
#[derive(Debug)]
pub(super) struct Connection {
    id: CmId,
    cq: CompletionQueue,
}

/// A listening port's RDMA objects, in the order they are freed: the
/// connection, then the registration, the domain, the listener, the channel.
#[derive(Debug)]
pub(super) struct Listening {
    pub(super) connection: Option<Connection>,
    pub(super) registration: MemoryRegistration,
    pub(super) pd: ProtectionDomain,
    /// Listens while held.
    #[expect(dead_code, reason = "held, not read: it listens until dropped")]
    pub(super) listener: CmId,
    pub(super) channel: EventChannel,
    pub(super) qp_type: u32,
}

pub(super) struct Receiver {
    listening: Listening,
    assembler: Assembler,
    /// Buffers posted as receives, by buffer index (the work request id).
    lent: LentBuffers,
    cache: PoolCache,
    posted: u32,
    state: Arc<Mutex<ConnectionState>>,
    completions: [ibv_wc; RX_BATCH],
}

impl Receiver {
    pub(super) fn new(port: &Port, listening: Listening, state: Arc<Mutex<ConnectionState>>) -> Self {
        let region = port.regions.get(port.rx[0].segment_regions[0]);
        Self {
            listening,
            assembler: Assembler::new(port, 0, FullRing::Drop),
            lent: LentBuffers::keyed(region.num_bufs()),
            cache: PoolCache::new(RX_BATCH),
            posted: region.num_bufs().min(MAX_POSTED),
            state,
            completions: verbs::completions(),
        }
    }

    fn region<'p>(&self, port: &'p Port) -> &'p Region {
        port.regions.get(port.rx[0].segment_regions[0])
    }

    /// Answers what the listener and the connection's id report.
    fn handle_events(&mut self, port: &Port) {
        loop {
            let event = match self.listening.channel.next() {
                Ok(Some(event)) => event,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(port = port.name, "rdma_cm channel: {e}");
                    return;
                }
            };
            if let Some(id) = event.request {
                self.accept(port, id);
                continue;
            }
            let (kind, id, status) = (event.kind, event.id, event.status);
            match kind {
                verbs::event::RDMA_CM_EVENT_ESTABLISHED => {
                    let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.connected = true;
                    state.peer = self.listening.connection.as_ref().and_then(|c| c.id.peer());
                    tracing::info!(port = port.name, peer = ?state.peer, "RoCE connection established");
                }
                verbs::event::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                    tracing::error!(port = port.name, "the RDMA device of the RoCE listener was removed");
                    self.close(port);
                }
                _ if self.listening.connection.as_ref().is_some_and(|c| c.id.is(id)) => {
                    tracing::info!(port = port.name, event = kind, status, "RoCE connection closed");
                    self.close(port);
                }
                _ => {}
            }
        }
    }

    /// Sets up the queue pair of a connect request, stocks its receive
    /// queue and accepts; a second peer while one is connected is refused.
    fn accept(&mut self, port: &Port, id: CmId) {
        if self.listening.connection.is_some() {
            tracing::warn!(port = port.name, peer = ?id.peer(), "refused a second RoCE connection: one peer at a time");
            verbs::reject(&id);
            return;
        }
        let Some(device) = id.verbs() else { return };
        let set_up = CompletionQueue::new(device, self.posted + 1).and_then(|cq| {
            verbs::create_queue_pair(&id, &self.listening.pd, &cq, self.listening.qp_type, self.posted)?;
            Ok(Connection { id, cq })
        });
        match set_up {
            Ok(connection) => self.listening.connection = Some(connection),
            Err(e) => {
                tracing::warn!(port = port.name, "cannot set up a RoCE connection: {e}");
                return;
            }
        }
        self.stock(port);
        let accepted = self.listening.connection.as_ref().map(|c| verbs::accept(&c.id));
        if let Some(Err(e)) = accepted {
            tracing::warn!(port = port.name, "{e}");
            self.close(port);
        }
    }

    /// Posts receives until `posted` region buffers are with the device.
    fn stock(&mut self, port: &Port) {
        let Some(connection) = &self.listening.connection else { return };
        let region = port.regions.get(port.rx[0].segment_regions[0]);
        let (len, lkey) = (region.buf_size() as u32, self.listening.registration.lkey());
        while (self.lent.lent() as u32) < self.posted {
            let Some(mut token) = region.take_cached(&mut self.cache) else { return };
            let index = token.index();
            let at = region.bytes_mut(&mut token).as_mut_ptr();
            if let Err(e) = verbs::post_receive(&connection.id, u64::from(index), at, len, lkey) {
                tracing::warn!(port = port.name, "ibv_post_recv: {e}");
                region.release(token);
                return;
            }
            if let Err(token) = self.lent.lend_as(index, token) {
                region.release(token);
            }
        }
    }

    /// Delivers completed receives; how many completions there were.
    fn receive(&mut self, port: &Port) -> usize {
        let Some(connection) = &self.listening.connection else { return 0 };
        let taken = match connection.cq.poll(&mut self.completions) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(port = port.name, "{e}");
                return 0;
            }
        };
        let queue = &port.rx[0];
        let region = self.region(port);
        for wc in &self.completions[..taken] {
            let Some(token) = self.lent.reclaim(wc.wr_id as u32) else {
                port.rx_drops.dropped(DropReason::NicRxError, 1);
                continue;
            };
            let received = wc.status == verbs::IBV_WC_SUCCESS
                && matches!(wc.opcode, verbs::IBV_WC_RECV | verbs::IBV_WC_RECV_RDMA_WITH_IMM);
            if !received {
                if wc.status != FLUSHED {
                    port.rx_drops.dropped(DropReason::NicRxError, 1);
                }
                region.release(token);
                continue;
            }
            self.assembler.push_frame(queue, (token, 0, wc.byte_len), None, None, &port.regions);
        }
        taken
    }

    /// Takes what completed, then frees the connection: its queue pair
    /// first, so the device writes no buffer that goes back to the region.
    fn close(&mut self, port: &Port) {
        while self.receive(port) > 0 {}
        if let Some(connection) = self.listening.connection.take() {
            verbs::disconnect(&connection.id);
        }
        let region = port.regions.get(port.rx[0].segment_regions[0]);
        region.release_all(self.lent.reclaim_all());
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ConnectionState::default();
    }
}

impl QueueTask for Receiver {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        self.handle_events(port);
        let asked = Instant::now();
        let received = self.receive(port);
        self.stock(port);
        self.assembler.flush_if_due(&port.rx[0], asked, &port.regions);
        received
    }

    fn finish(&mut self, port: &Port) {
        self.close(port);
        let queue = &port.rx[0];
        self.assembler.finish(queue, &port.regions);
        let region = port.regions.get(queue.segment_regions[0]);
        region.drain_cache(&mut self.cache);
    }
}
