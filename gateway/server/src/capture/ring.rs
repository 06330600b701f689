//! The bounded hand-over between the application loop and a capture's
//! writer: recycled byte slots, so copying a packet never allocates once the
//! ring is warm, and a full ring drops the copy instead of waiting. The
//! slots' bytes of every capture together stay within one [`MemoryBudget`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use crossbeam_queue::ArrayQueue;

/// One captured packet.
#[derive(Debug)]
pub(crate) struct Record {
    pub time: SystemTime,
    pub orig_len: usize,
    pub bytes: Vec<u8>,
    /// A reorder aggregate's batch id (names its raw file).
    pub batch_id: Option<u64>,
    /// An incomplete aggregate's slots in all, and those no packet filled
    /// (written beside its file); empty otherwise.
    pub slots: u32,
    pub missing: Vec<u32>,
    /// For a copy with bytes in GPU memory (format gds): the packet in
    /// order, as runs of `bytes` and of this record's device slot. Empty in
    /// a build without CUDA, which has no gds captures.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub pieces: Vec<Piece>,
    /// This record's device slot, fixed for its life in the ring.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub slot: usize,
}

/// A run of a record's bytes, by length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) enum Piece {
    /// The next bytes of `Record::bytes`.
    Host(usize),
    /// The next bytes of the record's device slot.
    Device(usize),
}

/// Bytes the capture rings of a gateway may hold together
/// (`--capture-memory-mb`); a copy that would take more is dropped and
/// counted as a capture drop.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    pub(crate) fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self { limit, used: AtomicU64::new(0) })
    }

    /// Takes `bytes` if they fit.
    fn take(&self, bytes: u64) -> bool {
        self.used.fetch_update(Relaxed, Relaxed, |used| used.checked_add(bytes).filter(|&u| u <= self.limit)).is_ok()
    }

    fn give(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Relaxed);
    }

    /// Bytes the rings hold now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }
}

/// Bytes taken from a [`MemoryBudget`] for as long as this lives.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Reservation {
    /// `bytes` of the budget, if they fit.
    pub(crate) fn take(budget: &Arc<MemoryBudget>, bytes: u64) -> Option<Self> {
        budget.take(bytes).then(|| Self { budget: Arc::clone(budget), bytes })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
    }
}

#[derive(Debug)]
pub(crate) struct Ring {
    /// The slots; gone once the capture ended, so a finished capture that
    /// stays listed keeps neither its copies nor the queues that held them.
    queues: ArcSwapOption<Queues>,
    budget: Arc<MemoryBudget>,
    /// What this ring's slots took from the budget.
    held: AtomicU64,
}

#[derive(Debug)]
struct Queues {
    free: ArrayQueue<Record>,
    filled: ArrayQueue<Record>,
}

impl Ring {
    pub(crate) fn new(slots: usize, budget: Arc<MemoryBudget>) -> Self {
        let free = ArrayQueue::new(slots);
        for slot in 0..slots {
            let _ = free.push(Record {
                time: SystemTime::UNIX_EPOCH,
                orig_len: 0,
                bytes: Vec::new(),
                batch_id: None,
                slots: 0,
                missing: Vec::new(),
                pieces: Vec::new(),
                slot,
            });
        }
        let queues = Queues { free, filled: ArrayQueue::new(slots) };
        Self { queues: ArcSwapOption::from_pointee(queues), budget, held: AtomicU64::new(0) }
    }

    /// Empties `record` and gives it room for `size` bytes, growing it
    /// within the budget; `false` when the budget has no room.
    pub(crate) fn make_room(&self, record: &mut Record, size: usize) -> bool {
        record.bytes.clear();
        let before = record.bytes.capacity();
        if before >= size {
            return true;
        }
        if !self.budget.take((size - before) as u64) {
            return false;
        }
        record.bytes.reserve_exact(size);
        // reserve_exact may round up: what it took beyond `size` is counted too.
        let extra = record.bytes.capacity().saturating_sub(size) as u64;
        self.budget.used.fetch_add(extra, Relaxed);
        self.held.fetch_add((record.bytes.capacity() - before) as u64, Relaxed);
        true
    }

    /// A slot to fill, or `None` when the writer is behind (or the capture ended).
    pub(crate) fn slot(&self) -> Option<Record> {
        self.queues.load().as_ref()?.free.pop()
    }

    pub(crate) fn submit(&self, record: Record) {
        // Cannot fail: a slot taken from `free` always has room in `filled`.
        if let Some(queues) = self.queues.load().as_ref() {
            let _ = queues.filled.push(record);
        }
    }

    pub(crate) fn next(&self) -> Option<Record> {
        self.queues.load().as_ref()?.filled.pop()
    }

    pub(crate) fn recycle(&self, record: Record) {
        if let Some(queues) = self.queues.load().as_ref() {
            let _ = queues.free.push(record);
        }
    }

    /// Frees the slots and their bytes once the capture has ended. After
    /// this `slot` finds nothing, as for a full ring.
    pub(crate) fn release(&self) {
        self.queues.store(None);
        self.budget.give(self.held.swap(0, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rings_copies_stay_within_their_shared_budget() {
        let budget = MemoryBudget::new(10_000);
        let (first, second) = (Ring::new(4, Arc::clone(&budget)), Ring::new(4, Arc::clone(&budget)));
        let mut a = first.slot().unwrap();
        assert!(first.make_room(&mut a, 4000));
        let mut b = second.slot().unwrap();
        assert!(second.make_room(&mut b, 4000));
        let mut c = second.slot().unwrap();
        assert!(!second.make_room(&mut c, 4000), "a third copy of 4000 bytes is past 10,000");
        assert!(second.make_room(&mut b, 3000), "a slot with room reuses it");
        assert!(budget.used() >= 8000 && budget.used() <= 10_000, "{}", budget.used());
        second.recycle(b);
        second.recycle(c);
        second.release();
        let mut d = first.slot().unwrap();
        assert!(first.make_room(&mut d, 4000), "an ended capture gives its copies' memory back");
        first.recycle(a);
        first.recycle(d);
        first.release();
        assert_eq!(budget.used(), 0);
    }
}
