//! A lock-free LIFO of buffer indices.
//!
//! LIFO, not FIFO, so the buffer freed last is handed out next while it is
//! still in cache; a FIFO would cycle through the whole pool and touch every
//! buffer's cache lines once per pass. This is a Treiber stack over a fixed
//! array of `next` links with a generation tag in the head against ABA.
//! Written here because crossbeam offers queues but no index stack.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const EMPTY: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct FreeList {
    /// Low 32 bits: index on top (or EMPTY); high 32 bits: generation tag.
    head: AtomicU64,
    next: Box<[AtomicU32]>,
    len: AtomicU32,
}

fn pack(tag: u32, index: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(index)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

impl FreeList {
    /// A list holding every index `0..capacity`, lowest on top.
    pub(crate) fn full(capacity: u32) -> Self {
        assert!(capacity < EMPTY, "too many buffers for one region");
        let next: Box<[AtomicU32]> =
            (0..capacity).map(|i| AtomicU32::new(if i + 1 < capacity { i + 1 } else { EMPTY })).collect();
        let top = if capacity == 0 { EMPTY } else { 0 };
        Self { head: AtomicU64::new(pack(0, top)), next, len: AtomicU32::new(capacity) }
    }

    pub(crate) fn pop(&self) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let (tag, top) = unpack(head);
            if top == EMPTY {
                return None;
            }
            // May read a link that changes under us; the tag makes the CAS fail then.
            let below = self.next[top as usize].load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(tag.wrapping_add(1), below),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    return Some(top);
                }
                Err(now) => head = now,
            }
        }
    }

    pub(crate) fn push(&self, index: u32) {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let (tag, top) = unpack(head);
            self.next[index as usize].store(top, Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(tag.wrapping_add(1), index),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.len.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(now) => head = now,
            }
        }
    }

    /// Indices on the list (a snapshot; exact when no one is pushing or popping).
    pub(crate) fn len(&self) -> u32 {
        self.len.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn last_freed_is_first_reused() {
        let list = FreeList::full(4);
        assert_eq!((list.pop(), list.pop()), (Some(0), Some(1)));
        list.push(0);
        assert_eq!(list.pop(), Some(0));
        assert_eq!((list.pop(), list.pop(), list.pop()), (Some(2), Some(3), None));
        assert_eq!(list.len(), 0);
    }

    #[test]
    fn concurrent_pop_and_push_lose_and_duplicate_nothing() {
        let list = Arc::new(FreeList::full(1024));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let list = Arc::clone(&list);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut held = Vec::new();
                        for _ in 0..8 {
                            if let Some(i) = list.pop() {
                                held.push(i);
                            }
                        }
                        for i in held {
                            list.push(i);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut seen = HashSet::new();
        while let Some(i) = list.pop() {
            assert!(seen.insert(i), "index {i} was on the list twice");
        }
        assert_eq!(seen.len(), 1024);
    }
}
