//! What all consumers together may pin of an engine: half of each RX
//! queue's burst metadata entries and half of each region's buffers, so that
//! whatever they hold, and however many subscribe, receive keeps the rest.
//!
//! A burst counts once however many consumers hold it (fan-out shares its
//! buffers), from the first that takes it until the last gives it back.

use std::collections::HashMap;
use std::sync::Arc;

use daqiri::{Burst, EngineId};

/// One engine's limits: bursts per RX queue, buffers by region index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) bursts_per_queue: u32,
    pub(crate) buffers: Vec<u32>,
}

impl Limits {
    /// Half of each queue's `rx_meta_buffers`, half of each region's `num_bufs`
    /// (regions by their index in the engine).
    pub(crate) fn of(engine: &daqiri::Engine) -> Self {
        let config = engine.config();
        let cfg = config.config();
        let mut buffers = vec![0; cfg.memory_regions.len()];
        for region in &cfg.memory_regions {
            if let Some(index) = engine.region_index(&region.name) {
                buffers[usize::from(index)] = region.num_bufs / 2;
            }
        }
        Self { bursts_per_queue: (cfg.rx_meta_buffers() / 2).max(1), buffers }
    }
}

/// What one held burst pins.
#[derive(Debug)]
struct Holding {
    /// Consumers holding it.
    holders: u32,
    queue: (u16, u16),
    /// Buffers by region index.
    buffers: Vec<(u16, u32)>,
}

/// What consumers pin of one engine now.
#[derive(Debug)]
struct Pins {
    limits: Limits,
    /// By the burst's address (an entry lives while some consumer holds it,
    /// so the address is not reused meanwhile).
    held: HashMap<usize, Holding>,
    bursts: HashMap<(u16, u16), u32>,
    buffers: HashMap<u16, u32>,
}

/// What a consumer taking a burst pins: nothing new where another holds it
/// already, else its buffers by region index (counted once, by the claim).
#[derive(Debug)]
pub(crate) struct Claim(Option<Vec<(u16, u32)>>);

/// What consumers pin, per engine.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    engines: HashMap<EngineId, Pins>,
}

fn key(burst: &Arc<Burst>) -> usize {
    Arc::as_ptr(burst) as usize
}

impl Budget {
    /// Sets engine `engine`'s limits, when not set yet.
    pub(crate) fn know(&mut self, engine: EngineId, limits: impl FnOnce() -> Limits) {
        self.engines.entry(engine).or_insert_with(|| Pins {
            limits: limits(),
            held: HashMap::new(),
            bursts: HashMap::new(),
            buffers: HashMap::new(),
        });
    }

    /// Whether one more consumer may hold `burst`: it is held already, or
    /// pinning it keeps its queue and regions within their limits. `None`
    /// when not; else what [`hold`](Self::hold) then counts.
    pub(crate) fn claim(&self, burst: &Arc<Burst>) -> Option<Claim> {
        let pins = self.engines.get(&burst.engine_id())?;
        if pins.held.contains_key(&key(burst)) {
            return Some(Claim(None));
        }
        let queue = (burst.port_id(), burst.queue_id());
        if pins.bursts.get(&queue).copied().unwrap_or(0) >= pins.limits.bursts_per_queue {
            return None;
        }
        let buffers = buffers_of(burst);
        let fits = buffers.iter().all(|&(region, n)| {
            let limit = pins.limits.buffers.get(usize::from(region)).copied().unwrap_or(0);
            pins.buffers.get(&region).copied().unwrap_or(0) + n <= limit
        });
        fits.then_some(Claim(Some(buffers)))
    }

    /// A consumer took `burst`, as [`claim`](Self::claim) allowed.
    pub(crate) fn hold(&mut self, burst: &Arc<Burst>, claim: Claim) {
        let Some(pins) = self.engines.get_mut(&burst.engine_id()) else { return };
        let Claim(Some(buffers)) = claim else {
            if let Some(holding) = pins.held.get_mut(&key(burst)) {
                holding.holders += 1;
            }
            return;
        };
        let holding = Holding { holders: 1, queue: (burst.port_id(), burst.queue_id()), buffers };
        *pins.bursts.entry(holding.queue).or_default() += 1;
        for &(region, n) in &holding.buffers {
            *pins.buffers.entry(region).or_default() += n;
        }
        pins.held.insert(key(burst), holding);
    }

    /// A consumer gave `burst` back (or ended holding it).
    pub(crate) fn release(&mut self, burst: &Arc<Burst>) {
        let Some(pins) = self.engines.get_mut(&burst.engine_id()) else { return };
        let Some(holding) = pins.held.get_mut(&key(burst)) else { return };
        holding.holders -= 1;
        if holding.holders > 0 {
            return;
        }
        let holding = pins.held.remove(&key(burst)).expect("looked up above");
        subtract(&mut pins.bursts, holding.queue, 1);
        for (region, n) in holding.buffers {
            subtract(&mut pins.buffers, region, n);
        }
    }

    /// Forgets engines other than `current` that nothing is held of.
    pub(crate) fn forget_idle(&mut self, current: Option<EngineId>) {
        self.engines.retain(|id, pins| Some(*id) == current || !pins.held.is_empty());
    }
}

fn subtract<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, u32>, key: K, n: u32) {
    if let Some(count) = counts.get_mut(&key) {
        *count = count.saturating_sub(n);
        if *count == 0 {
            counts.remove(&key);
        }
    }
}

/// The buffers a burst holds, by region index.
fn buffers_of(burst: &Burst) -> Vec<(u16, u32)> {
    let mut out: Vec<(u16, u32)> = Vec::new();
    for packet in burst.packets() {
        for segment in 0..packet.num_segments() {
            let Some(at) = packet.segment_location(segment) else { continue };
            match out.iter_mut().find(|(region, _)| *region == at.region) {
                Some((_, n)) => *n += 1,
                None => out.push((at.region, 1)),
            }
        }
    }
    out
}
