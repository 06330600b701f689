//! Software TX pacing (`pacing_mbps`): a TX worker takes its next burst
//! from the queue's ring only once the queue's rate has paid for the last
//! one, so the bytes a queue sends (as its `tx_bytes` counts them) average
//! the configured rate. DAQIRI warns and sends at line rate where the NIC
//! has no rate limit; every backend here honours the key instead.
//!
//! A burst goes out whole once the credit is not negative and is charged in
//! full, so the credit may run into debt: the next burst waits until the
//! rate has paid it back. While bursts wait, credit grows without bound, so
//! a worker that was descheduled catches up and the long-run rate holds;
//! once the ring is empty, saved credit is cut to a millisecond's worth, so
//! a queue that was idle does not send a backlog at line rate.

use std::time::{Duration, Instant};

use crate::burst::Burst;
use crate::queue::Queue;

/// Credit a paced queue may save up while idle.
const MAX_SAVED: Duration = Duration::from_millis(1);

/// The pacing state of one TX queue.
#[derive(Debug)]
pub(crate) struct Pacer {
    bytes_per_second: f64,
    /// Bytes the queue may still send; negative while it pays off a burst.
    credit: f64,
    last: Instant,
}

impl Pacer {
    /// A pacer for `mbps` megabits (10^6 bits) per second.
    pub(crate) fn new(mbps: u64) -> Self {
        Self { bytes_per_second: mbps as f64 * 1e6 / 8.0, credit: 0.0, last: Instant::now() }
    }

    /// The pacer of TX queue `queue`, when it sets `pacing_mbps`.
    pub(crate) fn for_queue(queue: &Queue) -> Option<Self> {
        queue.pacing_mbps.map(Self::new)
    }

    /// Adds what the rate earned since the last call; whether a burst may go.
    fn ready(&mut self, now: Instant) -> bool {
        self.credit += now.saturating_duration_since(self.last).as_secs_f64() * self.bytes_per_second;
        self.last = now;
        self.credit >= 0.0
    }

    fn charge(&mut self, bytes: u64) {
        self.credit -= bytes as f64;
    }

    /// Nothing waits: keep at most `MAX_SAVED` of credit.
    fn idle(&mut self) {
        self.credit = self.credit.min(MAX_SAVED.as_secs_f64() * self.bytes_per_second);
    }
}

/// The next burst of TX queue `queue`, when its pacer (if any) lets one go
/// now, once its bytes are readable (a `device` segment's copy into its
/// pinned twin is done).
pub(crate) fn next_burst(queue: &Queue, pacer: Option<&mut Pacer>) -> Option<Burst> {
    let burst = next_paced(queue, pacer)?;
    burst.wait_ready();
    Some(burst)
}

fn next_paced(queue: &Queue, pacer: Option<&mut Pacer>) -> Option<Burst> {
    let Some(pacer) = pacer else { return queue.ring.pop() };
    if !pacer.ready(Instant::now()) {
        return None;
    }
    let Some(burst) = queue.ring.pop() else {
        pacer.idle();
        return None;
    };
    pacer.charge(burst.total_bytes());
    Some(burst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debt_is_paid_back_at_the_rate_and_idle_credit_is_capped() {
        let mut pacer = Pacer::new(8); // 1 MB/s
        let start = pacer.last;
        assert!(pacer.ready(start));
        pacer.charge(1_000); // a millisecond's worth at 1 MB/s
        assert!(!pacer.ready(start + Duration::from_micros(999)));
        assert!(pacer.ready(start + Duration::from_micros(1_001)));
        // Late by a second with bursts waiting: the whole second may be caught up.
        assert!(pacer.ready(start + Duration::from_secs(1)));
        assert!(pacer.credit > 990_000.0, "{}", pacer.credit);
        // Idle: a millisecond's worth is kept.
        pacer.idle();
        assert!((pacer.credit - 1_000.0).abs() < 1e-6, "{}", pacer.credit);
    }
}
