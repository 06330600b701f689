//! What a UDP socket's receive buffer dropped, in datagrams.
//!
//! The kernel counts drops per socket buffer it could not queue
//! (`SK_MEMINFO_DROPS`). Under UDP GRO one such buffer is a coalesced run of
//! up to 64 datagrams, so the raw count under-reports by the run length, and
//! no kernel counter has the datagrams (the SNMP `RcvbufErrors` counts the
//! same buffers). So each dropped buffer is counted as a run like its
//! neighbours in the stream: every received message carries the counter as
//! it was queued (`SO_RXQ_OVFL`), so the buffers dropped between two
//! messages are known, and each counts the mean of the two messages' runs.
//! A sender that switches from runs to single datagrams is then counted by
//! what it sent around the drop, not by what it sent before. Drops after the
//! last message are found by reading the counter, and count the last run.
//! Without coalescing every run is 1 and the count exact.
//!
//! Since a dropped run's length is a guess (a sender mixing single
//! datagrams with runs makes it a poor one), the exact part, one datagram
//! per dropped buffer, and the estimated rest are counted apart
//! (`socket_overflow` and `socket_overflow_estimated`): the first never
//! exceeds what was lost.

/// The drop counter of one socket, as far as it is counted.
#[derive(Debug, Default)]
pub(super) struct KernelDrops {
    /// The kernel's counter up to which drops are counted (it wraps).
    seen: u32,
    /// Datagrams the last received message held (0: none received yet).
    last_run: u32,
    /// Dropped buffers counted and not yet taken.
    buffers: u64,
    /// Estimated datagrams those buffers held beyond one each, not yet taken.
    beyond: u64,
}

/// Datagrams a socket dropped since the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Dropped {
    /// One per buffer the kernel dropped: exact, never more than was lost.
    pub(super) at_least: u64,
    /// The estimated rest in coalesced runs (0 without coalescing).
    pub(super) estimated_beyond: u64,
}

impl Dropped {
    #[cfg(test)]
    fn total(self) -> u64 {
        self.at_least + self.estimated_beyond
    }
}

impl KernelDrops {
    /// A received message that held `datagrams`, queued when the kernel's
    /// counter stood at `stamp`.
    pub(super) fn message(&mut self, stamp: u32, datagrams: u32) {
        if let Some(buffers) = self.fresh(stamp) {
            let run = match self.last_run {
                0 => u64::from(datagrams),
                last => u64::from(last + datagrams).div_ceil(2),
            };
            self.count(buffers, run);
        }
        self.last_run = datagrams;
    }

    /// The kernel's counter, read now: buffers dropped since the last
    /// message count as runs like it.
    pub(super) fn counter(&mut self, total: u32) {
        if let Some(buffers) = self.fresh(total) {
            self.count(buffers, u64::from(self.last_run));
        }
    }

    fn count(&mut self, buffers: u32, run: u64) {
        self.buffers += u64::from(buffers);
        self.beyond += u64::from(buffers) * run.saturating_sub(1);
    }

    /// Datagrams counted since the last take.
    pub(super) fn take(&mut self) -> Dropped {
        Dropped { at_least: std::mem::take(&mut self.buffers), estimated_beyond: std::mem::take(&mut self.beyond) }
    }

    /// Buffers dropped between what was counted and `total`, and counts
    /// them; `None` when `total` is not past it (a message queued before
    /// the counter was last read, or no drop).
    fn fresh(&mut self, total: u32) -> Option<u32> {
        let buffers = total.wrapping_sub(self.seen);
        if buffers == 0 || buffers > u32::MAX / 2 {
            return None;
        }
        self.seen = total;
        Some(buffers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_coalescing_drops_are_counted_one_for_one() {
        let mut drops = KernelDrops::default();
        for _ in 0..64 {
            drops.message(0, 1);
        }
        drops.message(7, 1);
        assert_eq!(drops.take().total(), 7);
        drops.counter(7);
        assert_eq!(drops.take().total(), 0);
    }

    #[test]
    fn a_dropped_run_counts_its_neighbours_mean_length() {
        let mut drops = KernelDrops::default();
        drops.message(0, 32);
        drops.message(10, 32);
        assert_eq!(drops.take(), Dropped { at_least: 10, estimated_beyond: 310 }, "10 dropped runs of 32");
        drops.message(12, 2);
        assert_eq!(drops.take().total(), 34, "2 runs between one of 32 and one of 2: 17 each");
        drops.counter(14);
        assert_eq!(drops.take().total(), 4, "after the last message: runs like it");
    }

    #[test]
    fn a_sender_that_stops_coalescing_is_counted_by_its_new_runs() {
        let mut drops = KernelDrops::default();
        // 16 receive calls of runs of 64, then the sender sends single
        // datagrams and the socket drops 1,000 of them among them.
        for _ in 0..16 * 8 {
            drops.message(0, 64);
        }
        drops.message(0, 1);
        for stamp in (100..=1000).step_by(100) {
            for _ in 0..50 {
                drops.message(stamp, 1);
            }
        }
        assert_eq!(drops.take().total(), 1000, "single datagrams counted one for one, not as runs of 64");
    }

    #[test]
    fn drops_read_from_the_counter_are_not_counted_again_by_a_later_stamp() {
        let mut drops = KernelDrops::default();
        drops.message(0, 1);
        drops.counter(5);
        assert_eq!(drops.take().total(), 5);
        // Queued before the read: its stamp is behind what was counted.
        drops.message(3, 1);
        drops.message(5, 1);
        assert_eq!(drops.take().total(), 0);
        drops.message(6, 1);
        assert_eq!(drops.take().total(), 1);
    }

    /// The probe's case: single datagrams dropped between runs of 64. The
    /// estimate is far off, the exact part is not, and they stay apart.
    #[test]
    fn dropped_singles_between_runs_leave_the_exact_part_exact() {
        let mut drops = KernelDrops::default();
        drops.message(0, 64);
        drops.message(100, 64);
        assert_eq!(drops.take(), Dropped { at_least: 100, estimated_beyond: 6300 });
    }

    #[test]
    fn the_counter_wraps() {
        let mut drops = KernelDrops { seen: u32::MAX - 1, last_run: 2, ..KernelDrops::default() };
        drops.counter(2);
        assert_eq!(drops.take(), Dropped { at_least: 4, estimated_beyond: 4 }, "4 runs of 2");
    }
}
