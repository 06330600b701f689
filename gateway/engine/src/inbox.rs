//! A queue's inbox: packets that another queue's worker landed and steered
//! here, waiting for this queue's own worker.
//!
//! Every RX queue is assembled (bursts, reorder, timeouts) on its own
//! `cpu_core`. Where the packet is landed on another thread, an AF_XDP
//! socket whose XDP program steered a frame to another queue, or the
//! software loop's TX side, the landing thread posts it here and the
//! queue's worker takes it in arrival order, so a flow keeps its order.
//! Posting never blocks: a full inbox drops the packet, counted on the
//! target queue as `ring_full`, as a full burst ring does. A poster that
//! lands many packets at once (the loop's GPU wire) posts them as one run,
//! one queue operation for all of them; a poster uses runs or single
//! packets, never both, so each poster's packets keep their order.

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_queue::{ArrayQueue, SegQueue};

use crate::burst::PacketSlot;
use crate::delivery::Assembler;
use crate::memory::RegionTable;
use crate::queue::Queue;
use crate::stats::DropReason;

/// The inboxes of a port's RX queues, shared by the workers that post and
/// take. The last of those workers to finish empties them all, so nothing
/// posted after its queue's last drain stays out of its pool.
#[derive(Debug)]
pub(crate) struct Inboxes {
    boxes: Vec<Inbox>,
    running: AtomicUsize,
    /// Bursts a poster is part-way through posting (the software loop's
    /// TX bursts, which arrive whole as on a wire).
    in_transit: AtomicUsize,
}

impl Inboxes {
    /// One inbox of `capacity` packets per RX queue, for `workers` tasks
    /// that post or take.
    pub(crate) fn new(queues: usize, capacity: usize, workers: usize) -> Self {
        Self {
            boxes: (0..queues).map(|_| Inbox::new(capacity)).collect(),
            running: AtomicUsize::new(workers),
            in_transit: AtomicUsize::new(0),
        }
    }

    /// Posts a whole burst through `post`: until it returns, takers see the
    /// burst as still arriving ([`Self::arriving`]), so none times out a
    /// batch of it half-way.
    pub(crate) fn whole_burst<T>(&self, post: impl FnOnce() -> T) -> T {
        self.in_transit.fetch_add(1, Ordering::AcqRel);
        let posted = post();
        self.in_transit.fetch_sub(1, Ordering::AcqRel);
        posted
    }

    /// Whether a burst is part-way posted.
    pub(crate) fn arriving(&self) -> bool {
        self.in_transit.load(Ordering::Acquire) > 0
    }

    /// The inbox of RX queue `queue` (its position in the port).
    pub(crate) fn of(&self, queue: usize) -> &Inbox {
        &self.boxes[queue]
    }

    /// Called once by each task as it finishes; the last one discards
    /// what is left in every inbox (`rx`: the port's RX queues).
    pub(crate) fn task_finished(&self, rx: &[Queue], regions: &RegionTable) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            for (inbox, queue) in self.boxes.iter().zip(rx) {
                inbox.discard(queue, regions);
            }
        }
    }
}

/// Packets waiting for one RX queue's worker.
#[derive(Debug)]
pub(crate) struct Inbox {
    slots: ArrayQueue<PacketSlot>,
    /// Runs of packets posted at once, oldest first.
    runs: SegQueue<Vec<PacketSlot>>,
    /// Packets waiting in `runs`, counted against the capacity with `slots`.
    in_runs: AtomicUsize,
    /// Emptied runs, for posters to fill again without allocating.
    spares: ArrayQueue<Vec<PacketSlot>>,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    capacity: usize,
}

/// Emptied runs an inbox keeps for reuse.
const SPARE_RUNS: usize = 8;

impl Inbox {
    /// An inbox holding up to `capacity` packets.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            slots: ArrayQueue::new(capacity.max(1)),
            runs: SegQueue::new(),
            in_runs: AtomicUsize::new(0),
            spares: ArrayQueue::new(SPARE_RUNS),
            capacity: capacity.max(1),
        }
    }

    /// An empty run to fill and [`post_run`](Self::post_run): one the
    /// worker emptied, or a new one.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn spare_run(&self) -> Vec<PacketSlot> {
        self.spares.pop().unwrap_or_default()
    }

    /// Posts packets landed for `queue` as one run, in order; what does
    /// not fit the inbox goes back to its pool and is counted.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn post_run(&self, queue: &Queue, mut run: Vec<PacketSlot>, regions: &RegionTable) {
        let waiting = self.slots.len() + self.in_runs.load(Ordering::Acquire);
        let room = self.capacity.saturating_sub(waiting);
        if run.len() > room {
            let over = run.len() - room;
            run.drain(room..).for_each(|slot| slot.release(regions, &queue.segment_regions));
            queue.stats.dropped(DropReason::RingFull, over as u64);
        }
        if run.is_empty() {
            let _ = self.spares.push(run);
            return;
        }
        self.in_runs.fetch_add(run.len(), Ordering::AcqRel);
        self.runs.push(run);
    }

    /// Posts a packet landed for `queue`; when the inbox is full its buffers
    /// go back and it is counted. Whether it was posted.
    pub(crate) fn post(&self, queue: &Queue, slot: PacketSlot, regions: &RegionTable) -> bool {
        match self.slots.push(slot) {
            Ok(()) => true,
            Err(slot) => {
                slot.release(regions, &queue.segment_regions);
                queue.stats.dropped(DropReason::RingFull, 1);
                false
            }
        }
    }

    /// Hands what is waiting to the queue's assembler, oldest first; the
    /// packets taken.
    pub(crate) fn drain_into(&self, assembler: &mut Assembler, queue: &Queue, regions: &RegionTable) -> usize {
        let mut taken = 0;
        while let Some(slot) = self.slots.pop() {
            assembler.push(queue, slot, regions);
            taken += 1;
        }
        while let Some(mut run) = self.runs.pop() {
            self.in_runs.fetch_sub(run.len(), Ordering::AcqRel);
            taken += run.len();
            run.drain(..).for_each(|slot| assembler.push(queue, slot, regions));
            let _ = self.spares.push(run);
        }
        taken
    }

    /// After every worker stopped: what was posted too late for its queue's
    /// last drain goes back to its pool, counted as flushed.
    fn discard(&self, queue: &Queue, regions: &RegionTable) {
        let mut packets = 0;
        while let Some(slot) = self.slots.pop() {
            slot.release(regions, &queue.segment_regions);
            packets += 1;
        }
        while let Some(run) = self.runs.pop() {
            self.in_runs.fetch_sub(run.len(), Ordering::AcqRel);
            packets += run.len() as u64;
            run.into_iter().for_each(|slot| slot.release(regions, &queue.segment_regions));
        }
        if packets > 0 {
            queue.stats.dropped(DropReason::Flushed, packets);
        }
    }
}
