//! A queue's pool of burst metadata entries.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{Burst, BurstMeta, BurstShape, SegmentColumn};
use crate::memory::RegionTable;

/// A pool of burst metadata entries for one queue. Entries are reused last
/// in, first out, so a queue whose application keeps up touches only the
/// few it needs: the rest of `rx_meta_buffers` stays untouched, not resident.
#[derive(Debug)]
pub(crate) struct MetaPool {
    // Boxed so that taking and returning an entry moves a pointer, not the entry.
    #[allow(clippy::vec_box)]
    free: Mutex<Vec<Box<BurstMeta>>>,
    capacity: usize,
    pub(super) regions: Arc<RegionTable>,
}

impl MetaPool {
    pub(crate) fn new(entries: u32, shape: &BurstShape, regions: Arc<RegionTable>) -> Arc<Self> {
        let capacity = shape.batch_size;
        let free = (0..entries.max(1))
            .map(|_| {
                Box::new(BurstMeta {
                    engine: shape.engine,
                    port: shape.port,
                    queue: shape.queue,
                    flags: 0,
                    source_packets: 0,
                    batch_id: None,
                    timestamp_ns: None,
                    plan: None,
                    slots: 0,
                    filled_slots: Vec::new(),
                    total_bytes: 0,
                    capacity,
                    segments: shape
                        .segment_regions
                        .iter()
                        .map(|&region| SegmentColumn {
                            region,
                            buffers: Vec::with_capacity(capacity),
                            offsets: Vec::with_capacity(capacity),
                            lengths: Vec::with_capacity(capacity),
                        })
                        .collect(),
                    flow_ids: Vec::with_capacity(capacity),
                    sender_index: shape.fields.senders.then(|| Vec::with_capacity(capacity)),
                    senders: Vec::new(),
                    rx_timestamps: shape.fields.rx_timestamps.then(|| Vec::with_capacity(capacity)),
                    immediates: shape.fields.immediates.then(|| Vec::with_capacity(capacity)),
                    remote: shape.fields.remote.then(|| Vec::with_capacity(capacity)),
                    rdma_reads: shape.fields.rdma_reads,
                    completion: None,
                })
            })
            .collect::<Vec<_>>();
        Arc::new(Self { capacity: free.len(), free: Mutex::new(free), regions })
    }

    #[allow(clippy::vec_box)]
    fn lock(&self) -> MutexGuard<'_, Vec<Box<BurstMeta>>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An empty burst, or `None` when every entry is in flight.
    pub(crate) fn take(self: &Arc<Self>) -> Option<Burst> {
        let meta = self.lock().pop()?;
        debug_assert_eq!(meta.len(), 0);
        Some(Burst { meta: Some(meta), home: Arc::clone(self) })
    }

    /// Up to `n` empty bursts under one lock, the most recently returned
    /// entries first, appended to `into` so that its last is the one to use
    /// first.
    pub(crate) fn take_into(self: &Arc<Self>, n: usize, into: &mut Vec<Burst>) {
        let mut free = self.lock();
        let first = free.len().saturating_sub(n);
        into.extend(free.drain(first..).map(|meta| Burst { meta: Some(meta), home: Arc::clone(self) }));
    }

    /// Takes back a dropped burst's entry, its buffers given back first.
    pub(super) fn give_back(&self, mut meta: Box<BurstMeta>) {
        meta.clear(&self.regions);
        self.lock().push(meta);
    }

    /// Entries not in flight.
    pub(crate) fn available(&self) -> usize {
        self.lock().len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}
