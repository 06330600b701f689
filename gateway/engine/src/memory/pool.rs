//! Buffer pools: which buffers of a region are free.
//!
//! A pool hands out buffer indices in bulk, so its shared state is touched
//! once per batch, not once per packet: an RX worker refills its
//! [`PoolCache`] with one [`BufferPool::take_bulk`], and a dropped burst
//! returns each region's buffers with one [`BufferPool::release_bulk`]. The
//! trait leaves room for pools the engine does not own (a DPDK mempool).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// The free buffers of one region, by index.
pub(crate) trait BufferPool: Send + Sync + std::fmt::Debug {
    /// Moves up to `n` free indices onto `out`, the warmest last (so a stack
    /// popping from `out` reuses it first); returns how many it moved.
    fn take_bulk(&self, out: &mut Vec<u32>, n: usize) -> usize;
    /// Fills `out` with free indices, the warmest first; how many it filled
    /// (fewer than `out.len()` only when the pool ran out).
    fn take_into(&self, out: &mut [u32]) -> usize;
    /// One free index (the warmest), or `None` when the pool is empty.
    fn take_one(&self) -> Option<u32> {
        let mut one = [0u32];
        (self.take_into(&mut one) == 1).then_some(one[0])
    }
    /// Returns indices to the pool. Each must have been taken and not yet released.
    fn release_bulk(&self, indices: &[u32]);
    /// Indices free now (a snapshot), wherever they wait.
    fn available(&self) -> u32;
    /// Indices the calling thread could take now: [`available`](Self::available)
    /// less what other threads' private caches hold (a DPDK mempool's lcore caches).
    fn takeable(&self) -> u32 {
        self.available()
    }
}

/// A shared pool (a DPDK mempool that the backend also sets queues up on).
impl<T: BufferPool> BufferPool for std::sync::Arc<T> {
    fn take_bulk(&self, out: &mut Vec<u32>, n: usize) -> usize {
        (**self).take_bulk(out, n)
    }
    fn take_into(&self, out: &mut [u32]) -> usize {
        (**self).take_into(out)
    }
    fn release_bulk(&self, indices: &[u32]) {
        (**self).release_bulk(indices)
    }
    fn available(&self) -> u32 {
        (**self).available()
    }
    fn takeable(&self) -> u32 {
        (**self).takeable()
    }
}

/// A LIFO of free indices behind one lock. LIFO so the buffer freed last is
/// reused next while still in cache; one lock per bulk call costs less than
/// a compare-and-swap per buffer (the lock-free stack this replaced spent a
/// third of the receiving CPU in its CAS loops at 400 kpps).
#[derive(Debug)]
pub(crate) struct SharedStack {
    free: Mutex<Vec<u32>>,
    /// Mirror of `free.len()` for lock-free readers (stats, admin API).
    len: AtomicU32,
}

impl SharedStack {
    /// A stack holding every index `0..capacity`, lowest on top.
    pub(crate) fn full(capacity: u32) -> Self {
        Self { free: Mutex::new((0..capacity).rev().collect()), len: AtomicU32::new(capacity) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        // A panic while holding the lock cannot leave the Vec half-updated.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl BufferPool for SharedStack {
    fn take_bulk(&self, out: &mut Vec<u32>, n: usize) -> usize {
        let mut free = self.lock();
        let take = n.min(free.len());
        let from = free.len() - take;
        out.extend(free.drain(from..));
        self.len.store(free.len() as u32, Ordering::Relaxed);
        take
    }

    fn take_into(&self, out: &mut [u32]) -> usize {
        let mut free = self.lock();
        let take = out.len().min(free.len());
        let from = free.len() - take;
        for (slot, index) in out.iter_mut().zip(free.drain(from..).rev()) {
            *slot = index;
        }
        self.len.store(free.len() as u32, Ordering::Relaxed);
        take
    }

    fn release_bulk(&self, indices: &[u32]) {
        if indices.is_empty() {
            return;
        }
        let mut free = self.lock();
        free.extend_from_slice(indices);
        self.len.store(free.len() as u32, Ordering::Relaxed);
    }

    fn available(&self) -> u32 {
        self.len.load(Ordering::Relaxed)
    }
}

/// A worker's private stock of free indices in front of a shared pool: the
/// worker takes one at a time without touching shared state, and refills in
/// bulk. What is left goes back with [`PoolCache::drain_into`].
#[derive(Debug)]
pub(crate) struct PoolCache {
    stock: Vec<u32>,
    refill: usize,
}

impl PoolCache {
    /// A cache that refills `refill` indices at a time.
    pub(crate) fn new(refill: usize) -> Self {
        Self { stock: Vec::with_capacity(refill.max(1)), refill: refill.max(1) }
    }

    /// One free index, refilling from `pool` when empty.
    pub(crate) fn take(&mut self, pool: &dyn BufferPool) -> Option<u32> {
        if self.stock.is_empty() {
            pool.take_bulk(&mut self.stock, self.refill);
        }
        self.stock.pop()
    }

    /// Indices held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.stock.len()
    }

    /// Gives every held index back to `pool`.
    pub(crate) fn drain_into(&mut self, pool: &dyn BufferPool) {
        pool.release_bulk(&self.stock);
        self.stock.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn take_into_fills_the_warmest_first_and_stops_short_when_empty() {
        let pool = SharedStack::full(3);
        let mut out = [9u32; 2];
        assert_eq!(pool.take_into(&mut out), 2);
        assert_eq!(out, [0, 1], "index 0 is on top");
        let mut out = [9u32; 4];
        assert_eq!(pool.take_into(&mut out), 1, "one left");
        assert_eq!(out, [2, 9, 9, 9]);
        assert_eq!((pool.available(), pool.take_one()), (0, None));
    }

    #[test]
    fn last_released_is_first_taken() {
        let pool = SharedStack::full(4);
        let mut out = Vec::new();
        assert_eq!(pool.take_bulk(&mut out, 2), 2);
        assert_eq!(out, [1, 0], "index 0 is on top, so it comes last");
        pool.release_bulk(&[1]);
        out.clear();
        pool.take_bulk(&mut out, 1);
        assert_eq!(out, [1]);
        pool.release_bulk(&[1]);
        assert_eq!(pool.take_one(), Some(1), "one at a time, the warmest too");
        assert_eq!(pool.available(), 2);
    }

    #[test]
    fn take_bulk_stops_at_empty() {
        let pool = SharedStack::full(3);
        let mut out = Vec::new();
        assert_eq!(pool.take_bulk(&mut out, 10), 3);
        assert_eq!(pool.take_bulk(&mut out, 1), 0);
        assert_eq!(pool.available(), 0);
    }

    #[test]
    fn cache_refills_in_bulk_and_drains_back() {
        let pool = SharedStack::full(100);
        let mut cache = PoolCache::new(32);
        assert_eq!(cache.take(&pool), Some(0));
        assert_eq!((cache.len(), pool.available()), (31, 68));
        cache.drain_into(&pool);
        assert_eq!((cache.len(), pool.available()), (0, 99));
    }

    /// Threads that take through caches and release in bulk, in random-sized
    /// batches, never see an index twice while it is out, and lose none.
    #[test]
    fn concurrent_bulk_take_and_release_hand_out_each_index_once() {
        const N: u32 = 512;
        let pool = Arc::new(SharedStack::full(N));
        let owner: Arc<Vec<AtomicU32>> = Arc::new((0..N).map(|_| AtomicU32::new(0)).collect());
        let threads: Vec<_> = (1..=4u32)
            .map(|thread| {
                let (pool, owner) = (Arc::clone(&pool), Arc::clone(&owner));
                std::thread::spawn(move || {
                    let mut cache = PoolCache::new(16);
                    let mut rng = thread.wrapping_mul(2_654_435_761);
                    for _ in 0..20_000 {
                        rng ^= rng << 13;
                        rng ^= rng >> 17;
                        rng ^= rng << 5;
                        let mut held = Vec::new();
                        for _ in 0..(rng % 40) {
                            let Some(i) = cache.take(&*pool) else { break };
                            let was = owner[i as usize].swap(thread, Ordering::AcqRel);
                            assert_eq!(was, 0, "index {i} handed to thread {thread} while thread {was} held it");
                            held.push(i);
                        }
                        for &i in &held {
                            owner[i as usize].store(0, Ordering::Release);
                        }
                        pool.release_bulk(&held);
                    }
                    cache.drain_into(&*pool);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut all = Vec::new();
        pool.take_bulk(&mut all, N as usize + 1);
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), N as usize, "every index back exactly once");
    }
}
