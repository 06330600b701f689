//! What a UDP socket's receive buffer dropped, in datagrams.
//!
//! The kernel counts drops per socket buffer it could not queue
//! (`SK_MEMINFO_DROPS`). Under UDP GRO one such buffer is a coalesced run of
//! up to 64 datagrams, so the raw count under-reports by the run length. No
//! kernel counter has the datagrams (the SNMP `RcvbufErrors` counts the same
//! buffers), so each fresh drop is scaled by the mean datagrams per message
//! received since the previous look: the runs that were dropped came from
//! the same senders at the same moment. Without coalescing the mean is 1 and
//! the count exact.

/// The drop counter of one socket, and what was received since it was last read.
#[derive(Debug, Default)]
pub(super) struct KernelDrops {
    /// The kernel's counter at the last look (it wraps).
    seen: u32,
    /// Messages and the datagrams they held since the last look.
    messages: u64,
    datagrams: u64,
    /// Mean datagrams per message of the last interval that received any, in 1/1024ths.
    last_mean: u64,
}

/// Fixed-point scale of [`KernelDrops::last_mean`].
const ONE: u64 = 1024;

impl KernelDrops {
    /// Notes one receive call's messages and the datagrams they held.
    pub(super) fn received(&mut self, messages: usize, datagrams: usize) {
        self.messages += messages as u64;
        self.datagrams += datagrams as u64;
    }

    /// Takes the kernel's counter `total` and returns the datagrams dropped
    /// since the last look.
    pub(super) fn fresh(&mut self, total: u32) -> u64 {
        let buffers = u64::from(total.wrapping_sub(self.seen));
        self.seen = total;
        if let Some(mean) = (self.datagrams * ONE).checked_div(self.messages) {
            self.last_mean = mean;
        }
        (self.messages, self.datagrams) = (0, 0);
        let mean = if self.last_mean == 0 { ONE } else { self.last_mean };
        (buffers * mean).div_ceil(ONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_coalescing_drops_are_counted_one_for_one() {
        let mut drops = KernelDrops::default();
        assert_eq!(drops.fresh(0), 0);
        drops.received(64, 64);
        assert_eq!(drops.fresh(7), 7);
        assert_eq!(drops.fresh(7), 0);
    }

    #[test]
    fn a_dropped_run_counts_its_mean_length() {
        let mut drops = KernelDrops::default();
        drops.received(8, 256);
        assert_eq!(drops.fresh(10), 320, "10 dropped runs of 32");
        // No receive in between (the receiver was stalled): the last mean holds.
        assert_eq!(drops.fresh(12), 64);
        drops.received(4, 6);
        assert_eq!(drops.fresh(14), 3, "runs of 1.5 datagrams: 3");
    }

    #[test]
    fn the_counter_wraps() {
        let mut drops = KernelDrops { seen: u32::MAX - 1, ..KernelDrops::default() };
        assert_eq!(drops.fresh(2), 4);
    }
}
