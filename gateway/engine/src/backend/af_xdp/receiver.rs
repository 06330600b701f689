//! The receive side of an AF_XDP port: a task per RX socket, on its RX
//! queue's core, turns each frame address back into the region buffer it
//! is and hands it to the queue the XDP program chose, zero-copy.
//!
//! The kernel delivers a frame only to the socket of the NIC queue it
//! arrived on, so the program's choice of queue travels in the frame's
//! metadata and the frame moves here: to the same region it lies in
//! without a copy, to another region by one copy. A frame for another
//! queue goes to that queue's [`Inbox`](crate::inbox::Inbox), which its
//! own task drains. Without metadata (a generic-mode driver) the frame is
//! steered in software, as on sockets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use xdpilone::{FillQueue, RingRx};

use super::program::{NO_FLOW, SteerMeta};
use super::xsk::{SocketCounters, SocketHandle};
use crate::burst::PacketSlot;
use crate::delivery::{Assembler, FullRing, RuleTally, Steer, Steered};
use crate::flow::{FlowTable, Steering};
use crate::inbox::Inboxes;
use crate::memory::{BufToken, LentBuffers, PoolCache, Region, RegionTable};
use crate::port::Port;
use crate::queue::Queue;
use crate::stats::DropReason;
use crate::task::QueueTask;

/// Most frames read from one RX ring per poll.
const RX_BATCH: u32 = 64;
/// How often the sockets' kernel counters become drops.
const COUNTER_PERIOD: Duration = Duration::from_millis(100);

/// One RX socket: its rings and the buffers lent to its fill ring.
pub(super) struct RxSocket {
    /// The engine RX queue (and NIC queue) the socket serves.
    pub(super) queue: usize,
    pub(super) fill: FillQueue,
    pub(super) rx: RingRx,
    pub(super) handle: SocketHandle,
    /// Whether each poll drives the socket's NAPI itself (`busy_poll_us`).
    busy_poll: bool,
    /// Buffers the kernel holds, by buffer index (the frame's address).
    lent: LentBuffers,
    /// Buffers the fill ring should hold: all it takes, so a worker
    /// delayed by the scheduler does not run the kernel out of frames.
    target: u32,
    cache: PoolCache,
    counted: SocketCounters,
}

impl RxSocket {
    /// The socket of RX queue `queue`, its fill ring filled from `region`.
    pub(super) fn new(
        queue: usize,
        fill: FillQueue,
        rx: RingRx,
        handle: SocketHandle,
        region: &Region,
        busy_poll: bool,
    ) -> Self {
        let mut socket = Self {
            queue,
            fill,
            rx,
            handle,
            busy_poll,
            lent: LentBuffers::keyed(region.num_bufs()),
            target: super::xsk::ring_size(region.num_bufs()),
            cache: PoolCache::new(RX_BATCH as usize),
            counted: SocketCounters::default(),
        };
        socket.refill(region);
        socket
    }

    /// Tops the fill ring up from the region's free buffers.
    fn refill(&mut self, region: &Region) {
        let want = self.target.saturating_sub(self.lent.lent() as u32);
        if want == 0 {
            return;
        }
        let frame = region.buf_size() as u64;
        let mut writer = self.fill.fill(want);
        let (lent, cache) = (&mut self.lent, &mut self.cache);
        // No more than the ring took: a buffer taken past its room would stay
        // lent without the kernel ever having it.
        let room = writer.capacity() as usize;
        let addresses = std::iter::from_fn(|| {
            let token = region.take_cached(cache)?;
            let index = token.index();
            match lent.lend_as(index, token) {
                Ok(()) => Some(u64::from(index) * frame),
                Err(token) => {
                    region.release(token);
                    None
                }
            }
        });
        writer.insert(addresses.take(room));
        writer.commit();
        drop(writer);
        if self.fill.needs_wakeup() {
            self.fill.wake();
        }
    }
}

pub(super) struct Receiver {
    socket: RxSocket,
    /// The assembler of the socket's own RX queue.
    assembler: Assembler,
    tally: RuleTally,
    /// Every RX queue's inbox, for frames steered to another queue.
    inboxes: Arc<Inboxes>,
    /// The tag the program writes in metadata it wrote.
    tag: u32,
    next_count: Instant,
}

impl Receiver {
    pub(super) fn new(port: &crate::port::Port, socket: RxSocket, inboxes: Arc<Inboxes>, tag: u32) -> Self {
        let assembler = Assembler::new(port, socket.queue, FullRing::Drop);
        Self { socket, assembler, tally: RuleTally::default(), inboxes, tag, next_count: Instant::now() }
    }

    /// Reads up to a batch from the socket and delivers it; frames received.
    fn receive(&mut self, port: &Port) -> usize {
        let p = port;
        let mut steer = Steer::new(port, &mut self.tally);
        let socket = &mut self.socket;
        let arrival = socket.queue;
        let region_index = p.rx[arrival].segment_regions[0];
        let region = port.regions.get(region_index);
        let frame = region.buf_size() as u64;
        if socket.busy_poll {
            socket.handle.busy_poll();
        }
        let mut read = socket.rx.receive(RX_BATCH);
        let mut received = 0;
        while let Some(desc) = read.read() {
            received += 1;
            let index = (desc.addr / frame) as u32;
            let offset = (desc.addr % frame) as usize;
            let Some(token) = socket.lent.reclaim(index) else {
                // An address we never lent: the kernel's word against ours.
                p.rx_drops.dropped(DropReason::NicRxError, 1);
                continue;
            };
            let bytes = region.bytes(&token);
            let meta = offset.checked_sub(SteerMeta::LEN).and_then(|at| SteerMeta::read(&bytes[at..offset], self.tag));
            let frame_bytes = &bytes[offset..offset + desc.len as usize];
            let steered = match program_steering(steer.table(), meta, p.rx.len()) {
                Some(steering) => steer.decide(steering, desc.len),
                None => steer.frame(frame_bytes, desc.len),
            };
            let Some(Steered { queue, flow_id }) = steered else {
                region.release(token);
                continue;
            };
            let target = &p.rx[queue];
            let Some((token, offset)) = land(token, offset, desc.len, region, region_index, target, &port.regions)
            else {
                target.stats.dropped(DropReason::NoFreePacketBuffers, 1);
                continue;
            };
            if queue == arrival {
                self.assembler.push_frame(target, (token, offset as u16, desc.len), flow_id, None, &port.regions);
            } else {
                let mut slot = PacketSlot::single(token, desc.len, flow_id);
                slot.set_segment_offset(0, offset as u16);
                self.inboxes.of(queue).post(target, slot, &port.regions);
            }
        }
        read.release();
        drop(read);
        socket.refill(region);
        received
    }

    /// Adds what the kernel dropped on the socket since the last look.
    fn count_kernel_drops(&mut self, port: &Port) {
        let drops = &port.rx_drops;
        let socket = &mut self.socket;
        let now = socket.handle.counters();
        let before = std::mem::replace(&mut socket.counted, now);
        drops.dropped(DropReason::NoFreePacketBuffers, now.rx_dropped.saturating_sub(before.rx_dropped));
        drops.dropped(DropReason::NicMissed, now.rx_ring_full.saturating_sub(before.rx_ring_full));
    }
}

/// What our XDP program decided for a frame, from the record it wrote
/// before it: the queue it redirected to, and the flow whose rule matched
/// (or none, for the default queue). `None` without a record of ours, or
/// naming a flow the table no longer has (a reload in between): then the
/// frame's headers decide.
fn program_steering(flows: &FlowTable, meta: Option<SteerMeta>, queues: usize) -> Option<Steering> {
    let meta = meta.filter(|m| (m.queue as usize) < queues)?;
    let queue = meta.queue as usize;
    if meta.flow_id == NO_FLOW && !flows.isolation() {
        return Some(Steering::Default { queue });
    }
    flows.rule_of(meta.flow_id).map(|rule| Steering::Flow { rule, queue })
}

/// The frame as a buffer of `target`'s region: itself where it already
/// lies there, else a copy (the arrival buffer goes back). `None` when the
/// target region has no free buffer.
fn land(
    token: BufToken,
    offset: usize,
    len: u32,
    region: &Region,
    region_index: u16,
    target: &Queue,
    regions: &RegionTable,
) -> Option<(BufToken, usize)> {
    let into = target.segment_regions[0];
    if into == region_index {
        return Some((token, offset));
    }
    let destination = regions.get(into);
    let copied = destination.take().map(|mut copy| {
        let len = len as usize;
        destination.bytes_mut(&mut copy)[..len].copy_from_slice(&region.bytes(&token)[offset..offset + len]);
        (copy, 0)
    });
    region.release(token);
    copied
}

impl QueueTask for Receiver {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let mut received = self.receive(port);
        let own = &port.rx[self.socket.queue];
        received += self.inboxes.of(self.socket.queue).drain_into(&mut self.assembler, own, &port.regions);
        let now = Instant::now();
        self.assembler.flush_if_due(own, now, &port.regions);
        if now >= self.next_count {
            self.count_kernel_drops(port);
            self.next_count = now + COUNTER_PERIOD;
        }
        received
    }

    fn finish(&mut self, port: &Port) {
        self.count_kernel_drops(port);
        let p = port;
        let own = &p.rx[self.socket.queue];
        self.inboxes.of(self.socket.queue).drain_into(&mut self.assembler, own, &port.regions);
        self.assembler.finish(own, &port.regions);
        // The socket closes with this task; what its fill ring held comes back.
        let region = port.regions.get(own.segment_regions[0]);
        region.release_all(self.socket.lent.reclaim_all());
        region.drain_cache(&mut self.socket.cache);
        self.inboxes.task_finished(&p.rx, &port.regions);
    }
}
