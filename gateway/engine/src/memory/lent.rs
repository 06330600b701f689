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
//!
//! Where the device hands back an address the buffer itself determines (an
//! AF_XDP frame offset in its UMEM), the table is [`keyed`](LentBuffers::keyed):
//! the caller names the cookie, the buffer's index, instead of taking a slot.

use super::BufToken;

/// Lent buffers of one ring or queue, at most `capacity` at a time.
#[derive(Debug)]
pub(crate) struct LentBuffers {
    slots: Vec<Option<BufToken>>,
    /// Slots to hand out; empty and unused in a keyed table.
    free_slots: Vec<u32>,
    keyed: bool,
    out: u32,
}

impl LentBuffers {
    /// A table for up to `capacity` buffers out at once (a ring's size),
    /// for devices that take any cookie (an RDMA `wr_id`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        Self {
            slots: (0..capacity).map(|_| None).collect(),
            free_slots: (0..capacity).rev().collect(),
            keyed: false,
            out: 0,
        }
    }

    /// A table whose cookies the caller chooses, below `capacity`
    /// ([`lend_as`](Self::lend_as)).
    pub(crate) fn keyed(capacity: u32) -> Self {
        Self { slots: (0..capacity).map(|_| None).collect(), free_slots: Vec::new(), keyed: true, out: 0 }
    }

    /// Parks `token` and returns its cookie; a full table hands the token back.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn lend(&mut self, token: BufToken) -> Result<u32, BufToken> {
        debug_assert!(!self.keyed, "a keyed table takes its cookies from lend_as");
        let Some(slot) = self.free_slots.pop() else { return Err(token) };
        self.slots[slot as usize] = Some(token);
        self.out += 1;
        Ok(slot)
    }

    /// Parks `token` under `cookie` in a keyed table; a cookie out of range
    /// or already out hands the token back.
    pub(crate) fn lend_as(&mut self, cookie: u32, token: BufToken) -> Result<(), BufToken> {
        debug_assert!(self.keyed, "lend_as is for keyed tables");
        match self.slots.get_mut(cookie as usize) {
            Some(slot @ None) => {
                *slot = Some(token);
                self.out += 1;
                Ok(())
            }
            _ => Err(token),
        }
    }

    /// The token lent under `cookie`; `None` for a cookie that is not out
    /// (out of range, already reclaimed).
    pub(crate) fn reclaim(&mut self, cookie: u32) -> Option<BufToken> {
        let token = self.slots.get_mut(cookie as usize)?.take()?;
        if !self.keyed {
            self.free_slots.push(cookie);
        }
        self.out -= 1;
        Some(token)
    }

    /// Every token still out, for a stop that will see no more completions.
    #[cfg_attr(not(feature = "af_xdp"), allow(dead_code))]
    pub(crate) fn reclaim_all(&mut self) -> impl Iterator<Item = BufToken> + '_ {
        if !self.keyed {
            self.free_slots.clear();
            self.free_slots.extend((0..self.slots.len() as u32).rev());
        }
        self.out = 0;
        self.slots.iter_mut().filter_map(Option::take)
    }

    /// Buffers out now.
    pub(crate) fn lent(&self) -> usize {
        self.out as usize
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

    #[test]
    fn a_keyed_table_parks_each_buffer_under_its_own_index_once() {
        let mut table = LentBuffers::keyed(8);
        assert_eq!(table.lend_as(5, BufToken::for_test(5)), Ok(()));
        assert_eq!(table.lend_as(5, BufToken::for_test(6)), Err(BufToken::for_test(6)), "cookie 5 is out");
        assert_eq!(table.lend_as(8, BufToken::for_test(8)), Err(BufToken::for_test(8)), "beyond the capacity");
        assert_eq!(table.lent(), 1);
        assert_eq!(table.reclaim(5), Some(BufToken::for_test(5)));
        assert_eq!(table.reclaim(5), None, "a repeated completion frees nothing");
        assert_eq!(table.lend_as(5, BufToken::for_test(5)), Ok(()), "the cookie is free again");
        assert_eq!(table.reclaim_all().count(), 1);
        assert_eq!(table.lent(), 0);
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
