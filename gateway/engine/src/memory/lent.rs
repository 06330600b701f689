//! Buffers lent out and reclaimed by index.
//!
//! Kernel-bypass backends hand buffers to someone else for a while: AF_XDP
//! fill and TX rings, a NIC's TX descriptors until completion, RDMA work
//! requests until their completion entry. What comes back is a number (a
//! frame address, a descriptor index, a `wr_id`), not the buffer. This table
//! parks each lent [`BufToken`] under a slot number to hand out as that
//! cookie, and gives the token back exactly once when the cookie returns, so
//! ownership survives the round trip and a stale or repeated completion
//! cannot free a buffer twice.

use super::BufToken;

/// Lent buffers of one ring or queue, at most `capacity` at a time.
#[derive(Debug)]
pub(crate) struct LentBuffers {
    slots: Vec<Option<BufToken>>,
    free_slots: Vec<u32>,
}

impl LentBuffers {
    /// A table for up to `capacity` buffers out at once (a ring's size).
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        Self { slots: (0..capacity).map(|_| None).collect(), free_slots: (0..capacity).rev().collect() }
    }

    /// Parks `token` and returns its cookie; a full table hands the token back.
    pub(crate) fn lend(&mut self, token: BufToken) -> Result<u32, BufToken> {
        let Some(slot) = self.free_slots.pop() else { return Err(token) };
        self.slots[slot as usize] = Some(token);
        Ok(slot)
    }

    /// The token lent under `cookie`; `None` for a cookie that is not out
    /// (out of range, already reclaimed).
    pub(crate) fn reclaim(&mut self, cookie: u32) -> Option<BufToken> {
        let token = self.slots.get_mut(cookie as usize)?.take()?;
        self.free_slots.push(cookie);
        Some(token)
    }

    /// Every token still out, for a stop that will see no more completions.
    pub(crate) fn reclaim_all(&mut self) -> impl Iterator<Item = BufToken> + '_ {
        self.free_slots.clear();
        self.free_slots.extend((0..self.slots.len() as u32).rev());
        self.slots.iter_mut().filter_map(Option::take)
    }

    /// Buffers out now.
    pub(crate) fn lent(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::pool::{BufferPool, SharedStack};

    fn tokens(n: u32) -> Vec<BufToken> {
        (0..n).map(BufToken::for_test).collect()
    }

    #[test]
    fn a_token_comes_back_once_under_its_cookie() {
        let mut table = LentBuffers::with_capacity(4);
        let cookies: Vec<u32> = tokens(3).into_iter().map(|t| table.lend(t).unwrap()).collect();
        assert_eq!(table.lent(), 3);
        assert_eq!(table.reclaim(cookies[1]), Some(BufToken::for_test(1)));
        assert_eq!(table.reclaim(cookies[1]), None, "a repeated completion frees nothing");
        assert_eq!(table.reclaim(99), None, "a cookie never handed out frees nothing");
        assert_eq!(table.lent(), 2);
    }

    #[test]
    fn a_full_table_hands_the_token_back_and_stop_reclaims_everything() {
        let mut table = LentBuffers::with_capacity(2);
        let mut all = tokens(3).into_iter();
        table.lend(all.next().unwrap()).unwrap();
        table.lend(all.next().unwrap()).unwrap();
        assert_eq!(table.lend(all.next().unwrap()), Err(BufToken::for_test(2)));
        let back: Vec<BufToken> = table.reclaim_all().collect();
        assert_eq!(back.len(), 2);
        assert_eq!(table.lent(), 0);
        assert!(table.lend(BufToken::for_test(7)).is_ok(), "slots are free again");
    }

    /// Lending through the table and reclaiming in a scrambled order, as
    /// completions arrive, returns every buffer to its pool exactly once.
    #[test]
    fn scrambled_completions_return_every_buffer_once() {
        let pool = SharedStack::full(64);
        let mut taken = Vec::new();
        pool.take_bulk(&mut taken, 64);
        let mut table = LentBuffers::with_capacity(64);
        let cookies: Vec<u32> = taken.into_iter().map(|i| table.lend(BufToken::for_test(i)).unwrap()).collect();
        let mut order: Vec<u32> = cookies.iter().rev().step_by(2).chain(cookies.iter().step_by(2)).copied().collect();
        order.extend(cookies.iter().copied()); // completions seen twice
        let mut returned = Vec::new();
        for cookie in order {
            if let Some(token) = table.reclaim(cookie) {
                returned.push(token.index());
            }
        }
        returned.sort_unstable();
        assert_eq!(returned, (0..64).collect::<Vec<_>>());
        pool.release_bulk(&returned);
        assert_eq!(pool.available(), 64);
    }
}
