//! The engine's queue path, the same for every backend. A backend lands a
//! frame and says what it knows of it (its headers, a mark set below us, a
//! socket's addresses); from there [`Steer`] decides its queue and flow, or
//! drops and counts it, and the queue's [`Assembler`] builds bursts with
//! DAQIRI's `batch_size` / `timeout_us` semantics (a reordered flow's
//! packets go to their plan instead) and hands them to the queue's ring.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::burst::{Burst, PacketSlot};
use crate::flow::{FlowTable, Steering};
use crate::headers::FlowKey;
use crate::memory::{BufToken, RegionTable};
use crate::port::Port;
use crate::queue::Queue;
use crate::reorder::Reorderer;
use crate::stats::DropReason;

/// Where steering sends a packet: the RX queue (its position in the port)
/// that software steering picks, and the flow id its burst carries. A
/// backend whose NIC or socket already chose the queue keeps its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Steered {
    pub(crate) queue: usize,
    pub(crate) flow_id: Option<u32>,
}

/// Per-rule matches of one poll, added to the rules' counters once at its
/// end: one shared write per rule per poll, not per packet. A receiver
/// keeps one and lends it to each poll's [`Steer`].
#[derive(Debug, Default)]
pub(crate) struct RuleTally(Vec<(u64, u64)>);

/// One poll's steering of a port: its flow table and `drop_all_traffic`,
/// read once. Packets it refuses are counted on the port, by reason.
pub(crate) struct Steer<'p> {
    port: &'p Port,
    flows: arc_swap::Guard<Arc<FlowTable>>,
    dropping: bool,
    /// No rule and no isolation: every packet goes to the default queue
    /// unread (its headers stay out of this core's cache).
    unread: bool,
    tally: &'p mut RuleTally,
}

impl<'p> Steer<'p> {
    /// Steering for one poll of `port`.
    pub(crate) fn new(port: &'p Port, tally: &'p mut RuleTally) -> Self {
        let flows = port.flows.load();
        tally.0.clear();
        tally.0.resize(flows.rules.len(), (0, 0));
        let unread = flows.steers_nothing();
        Self { port, dropping: port.drop_all.load(Ordering::Relaxed), unread, flows, tally }
    }

    /// Whether every packet of this poll goes to its queue's default flow
    /// unread and uncounted (no rule, no isolation, no `drop_all_traffic`).
    #[cfg(feature = "dpdk")]
    pub(crate) fn passes_everything(&self) -> bool {
        self.unread && !self.dropping
    }

    /// Whether this poll reads a frame's headers to steer it.
    #[cfg(feature = "cuda")]
    pub(crate) fn reads_headers(&self) -> bool {
        !self.unread && !self.dropping
    }

    /// The port it steers for.
    pub(crate) fn port(&self) -> &'p Port {
        self.port
    }

    /// The table this poll steers by.
    pub(crate) fn table(&self) -> &FlowTable {
        &self.flows
    }

    /// Steers a frame of `len` bytes by its headers, read only when a rule
    /// could need them.
    #[inline]
    pub(crate) fn frame(&mut self, frame: &[u8], len: u32) -> Option<Steered> {
        self.by_headers(|| frame, len)
    }

    /// [`frame`](Self::frame), with the headers found only when read.
    #[inline]
    fn by_headers<'f>(&mut self, frame: impl FnOnce() -> &'f [u8], len: u32) -> Option<Steered> {
        if self.dropping || self.unread {
            return self.decide(Steering::Default { queue: 0 }, len);
        }
        self.decide(self.flows.steer_frame(frame()), len)
    }

    /// Steers a datagram of `len` payload bytes by its addresses.
    #[inline]
    pub(crate) fn key(&mut self, key: &FlowKey, len: u32) -> Option<Steered> {
        if self.dropping {
            return self.decide(Steering::Unmatched, len);
        }
        self.decide(self.flows.steer(key), len)
    }

    /// Steers a packet that a device below us marked with `flow_id` (an
    /// rte_flow MARK): that flow's rule, else by its headers, which `frame`
    /// finds only when a rule needs them.
    #[inline]
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn marked<'f>(
        &mut self,
        flow_id: Option<u32>,
        frame: impl FnOnce() -> &'f [u8],
        len: u32,
    ) -> Option<Steered> {
        match flow_id.and_then(|id| self.flows.rule_of(id)) {
            Some(rule) => {
                let queue = self.flows.rules[rule].queues().first().copied().unwrap_or(0);
                self.decide(Steering::Flow { rule, queue }, len)
            }
            None => self.by_headers(frame, len),
        }
    }

    /// A decision an older table made (a reload in between): delivered to
    /// `queue` with its flow id, not counted against the current rules.
    #[inline]
    pub(crate) fn kept(&mut self, queue: usize, flow_id: Option<u32>) -> Option<Steered> {
        if self.dropping {
            self.port.rx_drops.dropped(DropReason::DropAllTraffic, 1);
            return None;
        }
        Some(Steered { queue, flow_id })
    }

    /// Applies a decision: counts the rule's match, or drops the packet
    /// (the caller gives its buffers back) and counts why.
    #[inline]
    pub(crate) fn decide(&mut self, steering: Steering, len: u32) -> Option<Steered> {
        if self.dropping {
            self.port.rx_drops.dropped(DropReason::DropAllTraffic, 1);
            return None;
        }
        match steering {
            Steering::Flow { rule, queue } => {
                let counts = &mut self.tally.0[rule];
                counts.0 += 1;
                counts.1 += u64::from(len);
                Some(Steered { queue, flow_id: Some(self.flows.rules[rule].flow_id) })
            }
            Steering::Default { queue } => Some(Steered { queue, flow_id: None }),
            Steering::Unmatched => {
                self.port.rx_drops.dropped(DropReason::UnmatchedFlow, 1);
                None
            }
        }
    }
}

impl Drop for Steer<'_> {
    fn drop(&mut self) {
        for (rule, &(packets, bytes)) in self.flows.rules.iter().zip(&self.tally.0) {
            if packets > 0 {
                rule.stats.matched(packets, bytes);
            }
        }
    }
}

/// What an assembler does when its queue's ring has no room for a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FullRing {
    /// Drop the burst and count it (`ring_full`): datagrams and frames,
    /// which a sender does not wait for anyway.
    Drop,
    /// Keep it and retry before taking more (byte streams, which must not
    /// lose a byte): while [`Assembler::ready`] says no, the stream is not
    /// read, and TCP flow control slows the sender.
    HoldBack,
}

/// Collects packets for one RX queue into bursts, delivering a partial
/// burst once `timeout_us` has passed since its first packet. It holds no
/// borrow of its queue, so a poller that outlives one call (direct mode)
/// can keep it.
#[derive(Debug)]
pub(crate) struct Assembler {
    pending: Option<Burst>,
    started: Instant,
    full_ring: FullRing,
    /// [`FullRing::HoldBack`]: a full burst the ring had no room for, handed over first.
    stalled: Option<Burst>,
    /// The queue's reorder plans, which take their flows' packets.
    reorder: Option<Reorderer>,
    /// Empty bursts taken ahead, the next one last.
    at_hand: Vec<Burst>,
    /// Metadata entries taken from the queue's pool per lock.
    entries_per_take: usize,
}

/// Metadata entries the only assembler of a queue takes at once while
/// packets flow; they go back once no burst started for [`PAUSE`].
#[cfg(feature = "dpdk")]
const AHEAD: usize = 8;
const PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

impl Assembler {
    /// The assembler of the RX queue at position `queue` of `port`.
    pub(crate) fn new(port: &Port, queue: usize, full_ring: FullRing) -> Self {
        let plans = port.plans_of(port.rx[queue].id);
        let reorder = (!plans.is_empty()).then(|| Reorderer::new(&plans));
        Self {
            pending: None,
            started: Instant::now(),
            full_ring,
            stalled: None,
            reorder,
            at_hand: Vec::new(),
            entries_per_take: 1,
        }
    }

    /// For a queue this assembler alone fills (a DPDK RX queue): it takes
    /// [`AHEAD`] metadata entries per lock of the queue's pool, not one.
    /// Each lock reaches for lines the application's core wrote last, when
    /// it gave an entry back; where several assemblers fill one queue
    /// (software steering), entries held ahead by one would starve another.
    #[cfg(feature = "dpdk")]
    pub(crate) fn taking_entries_ahead(mut self) -> Self {
        self.entries_per_take = AHEAD;
        self
    }

    /// Whether a packet can be taken now. Always, when full bursts are
    /// dropped; when they are held back, once a held burst went out and a
    /// metadata entry is at hand.
    pub(crate) fn ready(&mut self, queue: &Queue) -> bool {
        if self.full_ring == FullRing::Drop {
            return true;
        }
        if !self.retry_stalled(queue) {
            return false;
        }
        self.pending.is_some() || self.start_burst(queue)
    }

    /// Whether a burst waits for ring space: the application makes room
    /// without notice, so the task must keep looking.
    pub(crate) fn holds_back(&self) -> bool {
        self.stalled.is_some()
    }

    /// Adds a packet for `queue`; a full burst is handed over at once.
    /// Without a free metadata entry the packet is dropped and counted. A
    /// packet of a reordered flow goes to its plan instead.
    pub(crate) fn push(&mut self, queue: &Queue, slot: PacketSlot, regions: &RegionTable) {
        let slot = match &mut self.reorder {
            Some(reorder) => match reorder.accept(queue, slot, regions) {
                Some(slot) => slot,
                None => return,
            },
            None => slot,
        };
        if self.pending.is_none() && !self.start_burst(queue) {
            slot.release(regions, &queue.segment_regions);
            queue.stats.dropped(DropReason::NoFreeBurstBuffers, 1);
            return;
        }
        let burst = self.pending.as_mut().expect("started above");
        // A burst `ready` began ahead of its packets times out from its first.
        if burst.num_packets() == 0 && self.full_ring == FullRing::HoldBack {
            self.started = Instant::now();
        }
        burst.push(slot);
        if burst.is_full() {
            self.hand_over(queue);
        }
    }

    /// Adds a one-buffer frame (`token`, where its bytes start, their
    /// length) as [`push`](Self::push) does, without building a slot where
    /// no reorder plan needs one: the raw backends' hot path.
    #[inline]
    #[cfg_attr(not(any(feature = "dpdk", feature = "af_xdp", feature = "rdma")), allow(dead_code))]
    pub(crate) fn push_frame(
        &mut self,
        queue: &Queue,
        frame: (BufToken, u16, u32),
        flow_id: Option<u32>,
        stamp: Option<u64>,
        regions: &RegionTable,
    ) {
        if self.reorder.is_some() {
            let (token, offset, len) = frame;
            let mut slot = PacketSlot::single(token, len, flow_id);
            slot.set_segment_offset(0, offset);
            slot.set_rx_timestamp(stamp);
            return self.push(queue, slot, regions);
        }
        if self.pending.is_none() && !self.start_burst(queue) {
            regions.get(queue.segment_regions[0]).release(frame.0);
            queue.stats.dropped(DropReason::NoFreeBurstBuffers, 1);
            return;
        }
        let burst = self.pending.as_mut().expect("started above");
        burst.push_frame(frame, flow_id, stamp);
        if burst.is_full() {
            self.hand_over(queue);
        }
    }

    /// Adds one-buffer frames of the queue's first region with no flow, in
    /// order, as [`push_frame`](Self::push_frame) does each: a receiver
    /// whose packets need no steering, on a queue without reorder plans.
    /// They arrived by `now`, which a burst they start counts from.
    #[cfg(feature = "dpdk")]
    pub(crate) fn push_frames(
        &mut self,
        queue: &Queue,
        mut frames: &[crate::burst::Frame],
        regions: &RegionTable,
        now: Instant,
    ) {
        debug_assert!(self.reorder.is_none(), "a reordered queue's packets go to their plans");
        let region = regions.get(queue.segment_regions[0]);
        while !frames.is_empty() {
            if self.pending.is_none() && !self.start_burst_at(queue, now) {
                region.release_all(frames.iter().map(|&(index, ..)| region.adopt(index)));
                queue.stats.dropped(DropReason::NoFreeBurstBuffers, frames.len() as u64);
                return;
            }
            let burst = self.pending.as_mut().expect("started above");
            let (taken, later) = frames.split_at(frames.len().min(burst.capacity() - burst.num_packets()));
            burst.extend_frames(region, taken);
            if burst.is_full() {
                self.hand_over(queue);
            }
            frames = later;
        }
    }

    /// Whether the queue's packets go to reorder plans.
    #[cfg(feature = "dpdk")]
    pub(crate) fn reorders(&self) -> bool {
        self.reorder.is_some()
    }

    /// Hands over a partial burst, and emits batches, whose timeout has
    /// passed. Once packets pause, the entries at hand go back to the pool.
    pub(crate) fn flush_if_due(&mut self, queue: &Queue, now: Instant, regions: &RegionTable) {
        if let (Some(timeout), Some(pending)) = (queue.timeout, &self.pending)
            && pending.num_packets() > 0
            && now.duration_since(self.started) >= timeout
        {
            self.flush(queue);
        }
        if !self.at_hand.is_empty() && self.pending.is_none() && now.duration_since(self.started) >= PAUSE {
            self.at_hand.clear();
        }
        if let Some(reorder) = &mut self.reorder {
            reorder.flush_due(queue, now, regions);
        }
    }

    /// Hands over whatever is pending (direct mode after each poll).
    pub(crate) fn flush(&mut self, queue: &Queue) {
        if self.full_ring == FullRing::Drop || self.retry_stalled(queue) {
            self.hand_over(queue);
        }
    }

    /// At stop: hands over the partial burst and every open batch, so what
    /// arrived before the stop stays readable; what no ring had room for is
    /// dropped and counted.
    pub(crate) fn finish(&mut self, queue: &Queue, regions: &RegionTable) {
        self.flush(queue);
        if let Some(reorder) = &mut self.reorder {
            reorder.flush_all(queue, regions);
        }
        self.at_hand.clear();
        let packets: usize = self.stalled.take().into_iter().chain(self.pending.take()).map(|b| b.num_packets()).sum();
        if packets > 0 {
            queue.stats.dropped(DropReason::RingFull, packets as u64);
        }
    }

    fn start_burst(&mut self, queue: &Queue) -> bool {
        self.start_burst_at(queue, Instant::now())
    }

    fn start_burst_at(&mut self, queue: &Queue, now: Instant) -> bool {
        if self.at_hand.is_empty() {
            queue.meta.take_into(self.entries_per_take, &mut self.at_hand);
        }
        self.pending = self.at_hand.pop();
        if let Some(burst) = &self.pending {
            burst.prefetch_for_write();
        }
        self.started = now;
        self.pending.is_some()
    }

    fn hand_over(&mut self, queue: &Queue) {
        // An empty burst (begun by `ready`, no packet came) is no burst: the
        // application would get one with nothing in it.
        let Some(burst) = self.pending.take_if(|b| b.num_packets() > 0) else { return };
        match self.full_ring {
            FullRing::Drop => {
                queue.deliver(burst);
            }
            FullRing::HoldBack => self.stalled = queue.try_deliver(burst).err(),
        }
    }

    /// Retries a held burst; whether none is left.
    fn retry_stalled(&mut self, queue: &Queue) -> bool {
        match self.stalled.take() {
            None => true,
            Some(burst) => {
                self.stalled = queue.try_deliver(burst).err();
                self.stalled.is_none()
            }
        }
    }
}

/// Hands over what each of a port's RX assemblers has due (partial bursts,
/// batches) at `now`.
pub(crate) fn flush_due(assemblers: &mut [Assembler], rx: &[Queue], now: Instant, regions: &RegionTable) {
    for (assembler, queue) in assemblers.iter_mut().zip(rx) {
        assembler.flush_if_due(queue, now, regions);
    }
}

/// At stop: hands over everything a port's RX assemblers hold.
pub(crate) fn finish_all(assemblers: &mut [Assembler], rx: &[Queue], regions: &RegionTable) {
    for (assembler, queue) in assemblers.iter_mut().zip(rx) {
        assembler.finish(queue, regions);
    }
}
