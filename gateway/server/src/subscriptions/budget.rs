//! What consumers may pin of an engine. All of them together: a share
//! (`--consumer-budget-percent`, half by default) of each RX queue's burst
//! metadata entries and of each region's buffers, so that whatever they
//! hold, and however many subscribe, receive keeps the rest. Each of them:
//! an equal part of each queue's and region's budget among the consumers
//! that have taken from it, and beyond it only what the others' unused
//! parts leave, so consumers that never release cannot starve the others.
//!
//! A burst counts once in the budget however many consumers hold it
//! (fan-out shares its buffers), from the first that takes it until the
//! last gives it back; in each holder's part it counts in full.

use std::collections::HashMap;
use std::sync::Arc;

use daqiri::{Burst, EngineId};

/// The share of each queue's entries and each region's buffers consumers
/// may pin together, by default.
pub(crate) const DEFAULT_PERCENT: u8 = 50;

/// One engine's limits: bursts per RX queue, buffers by region index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) bursts_per_queue: u32,
    pub(crate) buffers: Vec<u32>,
}

impl Limits {
    /// `percent` of each queue's `rx_meta_buffers` and of each region's
    /// `num_bufs` (regions by their index in the engine); a burst at least.
    pub(crate) fn of(engine: &daqiri::Engine, percent: u8) -> Self {
        let share = |n: u32| (u64::from(n) * u64::from(percent) / 100) as u32;
        let config = engine.config();
        let cfg = config.config();
        let mut buffers = vec![0; cfg.memory_regions.len()];
        for region in &cfg.memory_regions {
            if let Some(index) = engine.region_index(&region.name) {
                buffers[usize::from(index)] = share(region.num_bufs);
            }
        }
        Self { bursts_per_queue: share(cfg.rx_meta_buffers()).max(1), buffers }
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

/// Bursts by queue and buffers by region index, pinned by all consumers or
/// by one. A consumer's has an entry (0 or more) for each queue and region
/// it has taken from: those it shares.
#[derive(Debug, Default)]
struct Pinned {
    bursts: HashMap<(u16, u16), u32>,
    buffers: HashMap<u16, u32>,
}

impl Pinned {
    fn bursts(&self, queue: (u16, u16)) -> Option<u32> {
        self.bursts.get(&queue).copied()
    }

    fn buffers(&self, region: u16) -> Option<u32> {
        self.buffers.get(&region).copied()
    }

    /// Takes a part of `queue` and `regions` from now on.
    fn share(&mut self, queue: (u16, u16), regions: &[(u16, u32)]) {
        self.bursts.entry(queue).or_default();
        for &(region, _) in regions {
            self.buffers.entry(region).or_default();
        }
    }

    fn add(&mut self, holding: &Holding) {
        *self.bursts.entry(holding.queue).or_default() += 1;
        for &(region, n) in &holding.buffers {
            *self.buffers.entry(region).or_default() += n;
        }
    }

    fn remove(&mut self, holding: &Holding) {
        subtract(&mut self.bursts, holding.queue, 1);
        for &(region, n) in &holding.buffers {
            subtract(&mut self.buffers, region, n);
        }
    }
}

/// What consumers pin of one engine now.
#[derive(Debug)]
struct Pins {
    limits: Limits,
    /// By the burst's address (an entry lives while some consumer holds it,
    /// so the address is not reused meanwhile).
    held: HashMap<usize, Holding>,
    /// By all consumers, each burst once.
    all: Pinned,
    /// By each subscription (by id), every burst it holds.
    each: HashMap<u64, Pinned>,
}

impl Pins {
    /// Whether `consumer` may pin `n` more of something `limit` of which may
    /// be pinned, `pinned_after` of it by all consumers once it has; `of`
    /// reads what one consumer pins of it, `None` where it takes no part.
    fn allows(
        &self,
        consumer: u64,
        limit: u32,
        pinned_after: u32,
        n: u32,
        of: impl Fn(&Pinned) -> Option<u32>,
    ) -> bool {
        if pinned_after > limit {
            return false;
        }
        let sharers = self.each.values().filter(|pinned| of(pinned).is_some()).count();
        let part = limit / sharers.max(1) as u32;
        if self.each.get(&consumer).and_then(&of).unwrap_or(0) + n <= part {
            return true;
        }
        // Beyond its part: only what the others' unused parts leave.
        let unused: u64 = self
            .each
            .iter()
            .filter(|(id, _)| **id != consumer)
            .filter_map(|(_, pinned)| of(pinned))
            .map(|held| u64::from(part.saturating_sub(held)))
            .sum();
        u64::from(limit - pinned_after) >= unused
    }
}

/// What a consumer taking a burst pins: its buffers by region index, counted
/// in the budget only where no other consumer holds it already (`None`).
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
            all: Pinned::default(),
            each: HashMap::new(),
        });
    }

    /// Subscription `consumer` of `engine` began (it takes a part of each
    /// queue and region from its first claim on).
    pub(crate) fn join(&mut self, engine: EngineId, consumer: u64) {
        if let Some(pins) = self.engines.get_mut(&engine) {
            pins.each.entry(consumer).or_default();
        }
    }

    /// Subscription `consumer` of `engine` ended, after giving back what it held.
    pub(crate) fn leave(&mut self, engine: EngineId, consumer: u64) {
        if let Some(pins) = self.engines.get_mut(&engine) {
            pins.each.remove(&consumer);
        }
    }

    /// Whether `consumer` may hold `burst`: pinning it keeps its queue and
    /// regions within the budget and the consumer within its part, or
    /// within what the others' unused parts leave. `None` when not; else
    /// what [`hold`](Self::hold) then counts.
    pub(crate) fn claim(&mut self, burst: &Arc<Burst>, consumer: u64) -> Option<Claim> {
        let pins = self.engines.get_mut(&burst.engine_id())?;
        let queue = (burst.port_id(), burst.queue_id());
        // Buffers of a burst nobody holds yet, which the claim adds.
        let fresh = (!pins.held.contains_key(&key(burst))).then(|| buffers_of(burst));
        let buffers = match &fresh {
            Some(buffers) => buffers.as_slice(),
            None => &pins.held[&key(burst)].buffers,
        };
        pins.each.entry(consumer).or_default().share(queue, buffers);
        let pins = &*pins;
        let added = |n: u32| if fresh.is_some() { n } else { 0 };
        let queue_allows = pins.allows(
            consumer,
            pins.limits.bursts_per_queue,
            pins.all.bursts(queue).unwrap_or(0) + added(1),
            1,
            |p| p.bursts(queue),
        );
        let regions_allow = buffers.iter().all(|&(region, n)| {
            let limit = pins.limits.buffers.get(usize::from(region)).copied().unwrap_or(0);
            pins.allows(consumer, limit, pins.all.buffers(region).unwrap_or(0) + added(n), n, |p| p.buffers(region))
        });
        (queue_allows && regions_allow).then_some(Claim(fresh))
    }

    /// `consumer` took `burst`, as [`claim`](Self::claim) allowed.
    pub(crate) fn hold(&mut self, burst: &Arc<Burst>, claim: Claim, consumer: u64) {
        let Some(Pins { held, all, each, .. }) = self.engines.get_mut(&burst.engine_id()) else { return };
        let holding = match claim {
            Claim(None) => match held.get_mut(&key(burst)) {
                Some(holding) => {
                    holding.holders += 1;
                    holding
                }
                None => return,
            },
            Claim(Some(buffers)) => {
                let holding = Holding { holders: 1, queue: (burst.port_id(), burst.queue_id()), buffers };
                all.add(&holding);
                held.entry(key(burst)).insert_entry(holding).into_mut()
            }
        };
        each.entry(consumer).or_default().add(holding);
    }

    /// `consumer` gave `burst` back (or ended holding it).
    pub(crate) fn release(&mut self, burst: &Arc<Burst>, consumer: u64) {
        let Some(Pins { held, all, each, .. }) = self.engines.get_mut(&burst.engine_id()) else { return };
        let Some(holding) = held.get_mut(&key(burst)) else { return };
        if let Some(pinned) = each.get_mut(&consumer) {
            pinned.remove(holding);
        }
        holding.holders -= 1;
        if holding.holders == 0 {
            all.remove(holding);
            held.remove(&key(burst));
        }
    }

    /// Forgets engines other than `current` that nothing is held of.
    pub(crate) fn forget_idle(&mut self, current: Option<EngineId>) {
        self.engines.retain(|id, pins| Some(*id) == current || !pins.held.is_empty());
    }
}

/// Lowers a count, keeping its entry (a consumer's entries say what it shares).
fn subtract<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, u32>, key: K, n: u32) {
    if let Some(count) = counts.get_mut(&key) {
        *count = count.saturating_sub(n);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine whose one queue's consumers may pin `limit` bursts, with
    /// subscriptions holding `held` bursts each.
    fn pins(limit: u32, held: &[u32]) -> Pins {
        let mut pins = Pins {
            limits: Limits { bursts_per_queue: limit, buffers: Vec::new() },
            held: HashMap::new(),
            all: Pinned::default(),
            each: HashMap::new(),
        };
        for (id, &n) in held.iter().enumerate() {
            pins.each.insert(id as u64, Pinned { bursts: HashMap::from([((0, 0), n)]), buffers: HashMap::new() });
            *pins.all.bursts.entry((0, 0)).or_default() += n;
        }
        pins
    }

    fn allows_one_more(pins: &Pins, consumer: u64) -> bool {
        let pinned_after = pins.all.bursts((0, 0)).unwrap_or(0) + 1;
        pins.allows(consumer, pins.limits.bursts_per_queue, pinned_after, 1, |p| p.bursts((0, 0)))
    }

    #[test]
    fn a_lone_consumer_may_pin_the_whole_budget_and_no_more() {
        assert!(allows_one_more(&pins(128, &[127]), 0));
        assert!(!allows_one_more(&pins(128, &[128]), 0));
    }

    #[test]
    fn parts_are_shared_among_the_consumers_that_take_from_the_queue() {
        let mut elsewhere = pins(128, &[64]);
        elsewhere.each.insert(1, Pinned::default());
        assert!(allows_one_more(&elsewhere, 0), "a consumer of other queues takes no part of this one");
    }

    #[test]
    fn a_consumer_at_its_part_leaves_the_others_their_parts() {
        let hog_and_reader = pins(128, &[64, 0]);
        assert!(!allows_one_more(&hog_and_reader, 0), "the hog is at its half, the reader holds nothing");
        assert!(allows_one_more(&hog_and_reader, 1), "the reader takes its part");
    }

    #[test]
    fn beyond_its_part_a_consumer_takes_only_what_the_others_unused_parts_leave() {
        // Three parts of 42 in 128: the others leave 2 and 42 of theirs unused.
        assert!(allows_one_more(&pins(128, &[42, 40, 0]), 0), "43 of 128 leaves 85, the others' 44 unused fit");
        assert!(!allows_one_more(&pins(128, &[44, 40, 0]), 0), "45 would leave 43, less than their 44");
        assert!(allows_one_more(&pins(128, &[43, 42, 42]), 0), "the rounding's rest is anyone's");
        assert!(!allows_one_more(&pins(128, &[44, 42, 42]), 0), "and then the budget is spent");
    }
}
