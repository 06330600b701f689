//! The engine's queue path, the same for every backend: a landed packet is
//! assembled into bursts with DAQIRI's `batch_size` / `timeout_us`
//! semantics (a reordered flow's packets go to their plan instead), and each
//! burst is handed to its queue's ring.

use std::time::Instant;

use crate::burst::{Burst, PacketSlot};
use crate::memory::RegionTable;
use crate::port::Port;
use crate::queue::Queue;
use crate::reorder::Reorderer;
use crate::stats::DropReason;

/// Collects packets for one RX queue into bursts of `batch_size`, delivering
/// a partial burst once `timeout_us` has passed since its first packet. It
/// holds no borrow of its queue, so a poller that outlives one call (direct
/// mode) can keep it.
#[derive(Debug)]
pub(crate) struct Assembler {
    pending: Option<Burst>,
    started: Instant,
    /// Byte streams: a full burst the ring had no room for, handed over first.
    stalled: Option<Burst>,
    /// The queue's reorder plans, which take their flows' packets.
    reorder: Option<Reorderer>,
}

impl Assembler {
    /// The assembler of the RX queue at position `queue` of `port`.
    pub(crate) fn new(port: &Port, queue: usize) -> Self {
        let plans = port.plans_of(port.rx[queue].id);
        let reorder = (!plans.is_empty()).then(|| Reorderer::new(&plans));
        Self { pending: None, started: Instant::now(), stalled: None, reorder }
    }

    /// Adds a packet for `queue`; a full burst is delivered at once. Without
    /// a free metadata entry the packet is dropped and counted. A packet of
    /// a reordered flow goes to its plan instead.
    pub(crate) fn push(&mut self, queue: &Queue, slot: PacketSlot, regions: &RegionTable) {
        let slot = match &mut self.reorder {
            Some(reorder) => match reorder.accept(queue, slot, regions) {
                Some(slot) => slot,
                None => return,
            },
            None => slot,
        };
        if self.pending.is_none() {
            match queue.meta.take() {
                Some(burst) => {
                    self.pending = Some(burst);
                    self.started = Instant::now();
                }
                None => {
                    slot.release(regions, &queue.segment_regions);
                    queue.stats.dropped(DropReason::NoFreeBurstBuffers, 1);
                    return;
                }
            }
        }
        let burst = self.pending.as_mut().expect("set above");
        burst.push(slot);
        if burst.is_full() {
            queue.deliver(self.pending.take().expect("set above"));
        }
    }

    /// Delivers a partial burst, and emits batches, whose timeout has passed.
    pub(crate) fn flush_if_due(&mut self, queue: &Queue, now: Instant, regions: &RegionTable) {
        if let (Some(timeout), Some(_)) = (queue.timeout, &self.pending)
            && now.duration_since(self.started) >= timeout
        {
            self.flush(queue);
        }
        if let Some(reorder) = &mut self.reorder {
            reorder.flush_due(queue, now, regions);
        }
    }

    /// Delivers whatever is pending (direct mode after each poll).
    pub(crate) fn flush(&mut self, queue: &Queue) {
        if let Some(burst) = self.pending.take() {
            queue.deliver(burst);
        }
    }

    /// At stop: delivers the partial burst and every open batch, so what
    /// arrived before the stop stays readable.
    pub(crate) fn finish(&mut self, queue: &Queue, regions: &RegionTable) {
        self.flush(queue);
        if let Some(reorder) = &mut self.reorder {
            reorder.flush_all(queue, regions);
        }
    }

    /// Byte streams never drop: whether a packet can be taken now. A burst
    /// the ring had no room for is retried first, then a metadata entry must
    /// be at hand. While this says no the stream is not read, and TCP flow
    /// control slows the sender.
    pub(crate) fn ready_lossless(&mut self, queue: &Queue) -> bool {
        if !self.retry_stalled(queue) {
            return false;
        }
        if self.pending.is_none() {
            let Some(burst) = queue.meta.take() else { return false };
            self.pending = Some(burst);
            self.started = Instant::now();
        }
        true
    }

    /// Adds a packet of a byte stream; call only after [`ready_lossless`](Self::ready_lossless).
    pub(crate) fn push_lossless(&mut self, queue: &Queue, slot: PacketSlot) {
        let burst = self.pending.as_mut().expect("ready_lossless took a metadata entry");
        burst.push(slot);
        if burst.is_full() {
            self.hand_over_lossless(queue);
        }
    }

    /// Hands over what is pending, keeping it for a retry if the ring is full.
    pub(crate) fn flush_lossless(&mut self, queue: &Queue) {
        if self.retry_stalled(queue) {
            self.hand_over_lossless(queue);
        }
    }

    /// Hands over a partial burst of a stream once its timeout has passed.
    pub(crate) fn flush_if_due_lossless(&mut self, queue: &Queue, now: Instant) {
        if let (Some(timeout), Some(_)) = (queue.timeout, &self.pending)
            && now.duration_since(self.started) >= timeout
        {
            self.flush_lossless(queue);
        }
    }

    /// At stop: what no ring had room for is dropped and counted.
    pub(crate) fn abandon(&mut self, queue: &Queue) {
        let packets: usize = self.stalled.take().into_iter().chain(self.pending.take()).map(|b| b.num_packets()).sum();
        if packets > 0 {
            queue.stats.dropped(DropReason::RingFull, packets as u64);
        }
    }

    fn hand_over_lossless(&mut self, queue: &Queue) {
        if let Some(burst) = self.pending.take() {
            self.stalled = queue.try_deliver(burst).err();
        }
    }

    /// Retries a stalled burst; whether none is left.
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
