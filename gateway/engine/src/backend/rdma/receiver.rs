//! The receive task of a RoCE port's RX queue, on the queue's core: it
//! runs the queue's connection ([`Manager`]), keeps its receive queue
//! stocked with region buffers, and hands each completed receive to the
//! queue's assembler as one packet of its received length, with the
//! immediate its message carried (a peer's WRITE with immediate arrives as
//! an empty packet with its immediate: its bytes went where it wrote them).
//!
//! While the queue's ring is full, an RC receiver stops taking completions
//! and posting receives, so its sender waits (RNR). UC has no RNR: a
//! message that finds no receive posted is lost unseen, so a UC receiver
//! keeps receiving and drops what the ring has no room for, counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::{Connection, DEVICE_REMOVED, Device, LendsToDevice, Link};
use super::manager::Manager;
use super::verbs::{self, ibv_wc};
use crate::burst::PacketSlot;
use crate::delivery::{Assembler, FullRing};
use crate::memory::{LentBuffers, PoolCache, Region};
use crate::port::Port;
use crate::stats::DropReason;
use crate::task::QueueTask;

/// Completions taken per poll.
const RX_BATCH: usize = 64;

pub(super) struct Receiver {
    /// The RX queue's position in the port.
    queue: usize,
    /// The connection's manager and the device, until the device is removed.
    manager: Option<Manager>,
    link: Arc<Link>,
    device: Option<Arc<Device>>,
    /// Its full-ring policy is `HoldBack` for RC, `Drop` for UC.
    assembler: Assembler,
    /// The connection our receives are posted on (pending or live).
    posted_on: Option<Arc<Connection>>,
    /// Buffers posted as receives, by buffer index (the work request id).
    lent: LentBuffers,
    cache: PoolCache,
    depth: u32,
    completions: [ibv_wc; RX_BATCH],
}

impl Receiver {
    pub(super) fn new(
        (port, queue): (&Port, usize),
        (manager, link, device): (Manager, Arc<Link>, Arc<Device>),
        full_ring: FullRing,
        depth: u32,
    ) -> Self {
        Self {
            queue,
            manager: Some(manager),
            link,
            device: Some(device),
            assembler: Assembler::new(port, queue, full_ring),
            posted_on: None,
            lent: LentBuffers::keyed(region(port, queue).num_bufs()),
            cache: PoolCache::new(RX_BATCH),
            depth,
            completions: verbs::completions(),
        }
    }

    /// Posts receives on `connection` until `depth` region buffers are with the device.
    fn stock(&mut self, port: &Port, connection: &Connection) {
        let region = region(port, self.queue);
        let index = port.rx[self.queue].segment_regions[0];
        let lkey = self.device.as_ref().and_then(|device| device.lkey(index));
        let (len, Some(lkey)) = (region.buf_size() as u32, lkey) else { return };
        while (self.lent.lent() as u32) < self.depth {
            let Some(token) = region.take_cached(&mut self.cache) else { return };
            let buffer = token.index();
            let at = verbs::buffer_address(region, &token);
            if let Err(e) = verbs::post_receive(&connection.id, u64::from(buffer), at, len, lkey) {
                tracing::warn!(port = port.name, "ibv_post_recv: {e}");
                region.release(token);
                return;
            }
            if let Err(token) = self.lent.lend_as(buffer, token) {
                region.release(token);
            }
        }
    }

    /// Delivers what completed on `connection`; how many completions there
    /// were. While the queue's ring is full and the assembler holds back
    /// (`hold`; a UC assembler drops and is always ready), nothing is taken:
    /// the receives are not posted again, and the sender waits (RNR), as a
    /// TCP sender waits for its window; a closing connection is taken regardless.
    fn receive(&mut self, port: &Port, connection: &Connection, hold: bool) -> usize {
        let queue = &port.rx[self.queue];
        if hold && !self.assembler.ready(queue) {
            return 0;
        }
        let taken = match connection.recv_cq.poll(&mut self.completions) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(port = port.name, "{e}");
                return 0;
            }
        };
        let region = region(port, self.queue);
        for wc in &self.completions[..taken] {
            let Some(token) = self.lent.reclaim(wc.wr_id as u32) else {
                port.rx_drops.dropped(DropReason::NicRxError, 1);
                continue;
            };
            let received = wc.status == verbs::IBV_WC_SUCCESS
                && matches!(wc.opcode, verbs::IBV_WC_RECV | verbs::IBV_WC_RECV_RDMA_WITH_IMM);
            if received {
                // A WRITE with immediate put its bytes where the peer wrote
                // them: the receive it completed holds none of them.
                let length = if wc.opcode == verbs::IBV_WC_RECV_RDMA_WITH_IMM { 0 } else { wc.byte_len };
                match verbs::immediate(wc) {
                    None => self.assembler.push_frame(queue, (token, 0, length), None, None, &port.regions),
                    Some(immediate) => {
                        let mut slot = PacketSlot::single(token, length, None);
                        slot.set_immediate(Some(immediate));
                        self.assembler.push(queue, slot, &port.regions);
                    }
                }
                continue;
            }
            // A flushed receive held no message: the connection closed.
            if wc.status != verbs::IBV_WC_WR_FLUSH_ERR {
                port.rx_drops.dropped(DropReason::NicRxError, 1);
            }
            region.release(token);
        }
        taken
    }

    /// Delivers what the TX task's RDMA READs brought, each in the buffer
    /// it was read into (of this queue's region), while the ring has room.
    fn deliver_reads(&mut self, port: &Port) {
        let queue = &port.rx[self.queue];
        while self.assembler.ready(queue)
            && let Some(result) = self.link.reads.next()
        {
            let mut slot = PacketSlot::single(result.token, result.len, None);
            slot.set_remote(result.from);
            self.assembler.push(queue, slot, &port.regions);
        }
    }

    /// Lets go of everything on a device that was removed: the connection,
    /// the receives (their buffers back), the manager's ids and channel,
    /// the registrations and the domain.
    fn let_go_of_device(&mut self, port: &Port) {
        self.retire(port);
        self.manager = None;
        self.device = None;
        region(port, self.queue).drain_cache(&mut self.cache);
        tracing::error!(port = port.name, "RoCE port down: {DEVICE_REMOVED}");
    }

    /// Lets go of a connection that is no longer pending or live: its queue
    /// pair to the error state, what completed delivered, every posted
    /// buffer back once the device has flushed it.
    fn retire(&mut self, port: &Port) {
        let Some(old) = self.posted_on.take() else { return };
        self.flush(port, &old, region(port, self.queue).num_bufs());
    }
}

impl LendsToDevice for Receiver {
    const WORK: &'static str = "receive";

    fn lent(&mut self) -> &mut LentBuffers {
        &mut self.lent
    }

    fn complete(&mut self, port: &Port, connection: &Connection) -> usize {
        self.receive(port, connection, false)
    }
}

/// The region of RX queue `queue` (its one region, checked at open).
fn region(port: &Port, queue: usize) -> &Region {
    port.regions.get(port.rx[queue].segment_regions[0])
}

impl QueueTask for Receiver {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let asked = Instant::now();
        let queue = &port.rx[self.queue];
        let Some(manager) = self.manager.as_mut() else {
            self.assembler.flush_if_due(queue, asked, &port.regions);
            return 0;
        };
        if let Some(made) = manager.poll() {
            self.retire(port);
            self.stock(port, &made);
            self.posted_on = Some(Arc::clone(&made));
            self.manager.as_mut().expect("polled above").start(&made);
        }
        if self.link.removal.happened() {
            self.let_go_of_device(port);
            return 0;
        }
        let live = self.link.connection();
        let pending = self.manager.as_ref().and_then(Manager::pending);
        let current = |c: &Arc<Connection>| [&live, &pending].into_iter().flatten().any(|l| Arc::ptr_eq(l, c));
        if self.posted_on.as_ref().is_some_and(|on| !current(on)) {
            self.retire(port);
        }
        self.deliver_reads(port);
        let mut received = 0;
        if let Some(on) = self.posted_on.clone() {
            received = self.receive(port, &on, true);
            self.stock(port, &on);
        }
        self.assembler.flush_if_due(queue, asked, &port.regions);
        received
    }

    fn finish(&mut self, port: &Port) {
        if let Some(manager) = self.manager.as_mut() {
            manager.close();
        }
        self.retire(port);
        let region = region(port, self.queue);
        region.release_all(self.link.reads.close().into_iter().map(|r| r.token));
        self.assembler.finish(&port.rx[self.queue], &port.regions);
        region.drain_cache(&mut self.cache);
    }
}
