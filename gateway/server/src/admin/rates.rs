//! Counters turned into rates, between two snapshots at least half a second apart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use daqiri::EngineStats;

/// Rates are recomputed when the last sample is at least this old.
const MIN_RATE_WINDOW: Duration = Duration::from_millis(500);

/// Keeps the previous snapshot to turn counters into rates.
#[derive(Debug, Default)]
pub(crate) struct RateSampler {
    /// The previous snapshot and when it was taken.
    last: Option<(Instant, EngineStats)>,
    /// (port, direction, queue) -> (packets/s, bits/s)
    pub(super) rates: BTreeMap<(u16, &'static str, u16), (f64, f64)>,
    pub(super) flow_rates: BTreeMap<(u16, u32), f64>,
}

impl RateSampler {
    /// Counters that went down (an engine restart) give a zero rate for one window.
    pub(super) fn update(&mut self, now: &EngineStats) {
        let Some((at, last)) = &self.last else {
            self.last = Some((Instant::now(), now.clone()));
            return;
        };
        let secs = at.elapsed().as_secs_f64();
        if at.elapsed() < MIN_RATE_WINDOW {
            return;
        }
        for (p, before) in now.ports.iter().zip(&last.ports) {
            for (dir, queues, old) in [("rx", &p.rx_queues, &before.rx_queues), ("tx", &p.tx_queues, &before.tx_queues)]
            {
                for (q, b) in queues.iter().zip(old) {
                    let pps = q.stats.packets.saturating_sub(b.stats.packets) as f64 / secs;
                    let bps = q.stats.bytes.saturating_sub(b.stats.bytes) as f64 * 8.0 / secs;
                    self.rates.insert((p.id, dir, q.id), (pps, bps));
                }
            }
            for (f, b) in p.flows.iter().zip(&before.flows) {
                self.flow_rates.insert((p.id, f.id), f.packets.saturating_sub(b.packets) as f64 / secs);
            }
        }
        self.last = Some((Instant::now(), now.clone()));
    }
}
