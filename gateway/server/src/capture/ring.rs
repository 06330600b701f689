//! The bounded hand-over between the application loop and a capture's
//! writer: recycled byte slots, so copying a packet never allocates once the
//! ring is warm, and a full ring drops the copy instead of waiting.

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
    #[cfg(feature = "cuda")]
    /// For a copy with bytes in GPU memory (format gds): the packet in
    /// order, as runs of `bytes` and of this record's device slot.
    pub pieces: Vec<Piece>,
    /// This record's device slot, fixed for its life in the ring.
    #[cfg(feature = "cuda")]
    pub slot: usize,
}

/// A run of a record's bytes, by length.
#[cfg(feature = "cuda")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece {
    /// The next bytes of `Record::bytes`.
    Host(usize),
    /// The next bytes of the record's device slot.
    Device(usize),
}

#[derive(Debug)]
pub(crate) struct Ring {
    /// The slots; gone once the capture ended, so a finished capture that
    /// stays listed keeps neither its copies nor the queues that held them.
    queues: ArcSwapOption<Queues>,
}

#[derive(Debug)]
struct Queues {
    free: ArrayQueue<Record>,
    filled: ArrayQueue<Record>,
}

impl Ring {
    pub(crate) fn new(slots: usize) -> Self {
        let free = ArrayQueue::new(slots);
        for _slot in 0..slots {
            let _ = free.push(Record {
                time: SystemTime::UNIX_EPOCH,
                orig_len: 0,
                bytes: Vec::new(),
                batch_id: None,
                #[cfg(feature = "cuda")]
                pieces: Vec::new(),
                #[cfg(feature = "cuda")]
                slot: _slot,
            });
        }
        let queues = Queues { free, filled: ArrayQueue::new(slots) };
        Self { queues: ArcSwapOption::from_pointee(queues) }
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
    }
}
