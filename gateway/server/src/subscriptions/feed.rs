//! One subscription's end in the gateway: the bursts its consumer holds,
//! its ring, and its doorbell.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use daqiri::{Burst, EngineId};
use daqiri_consumer::protocol::WhenFull;
use daqiri_consumer::ring::{Broken, Delivery, HAS_IMMEDIATE, Producer, SegmentDescriptor};

use super::filter::Filter;

/// What became of a burst offered to a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Given {
    Delivered,
    /// Nothing in it for this consumer (no packet of its flow).
    Nothing,
    /// Its ring is full.
    Full,
}

/// What one subscription receives, and what its consumer holds.
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) id: u64,
    /// What it takes of the bursts of the engine `engine`.
    pub(crate) filter: Filter,
    pub(crate) engine: EngineId,
    /// The group it belongs to (a burst goes to one member), if any.
    pub(crate) group: Option<String>,
    pub(crate) when_full: WhenFull,
    producer: Producer,
    /// Rung once per burst delivered.
    doorbell: OwnedFd,
    /// By slot: the burst the consumer holds there (its buffers stay out of
    /// their pool until every subscriber holding it released it).
    held: Vec<Option<Arc<Burst>>>,
    /// Bursts delivered, and bursts dropped for this consumer (its ring
    /// full, or all consumers together at their budget).
    pub(crate) delivered: u64,
    pub(crate) lag: u64,
    /// Of `lag`, those dropped because consumers together were at their budget.
    pub(crate) over_budget: u64,
    descriptors: Vec<SegmentDescriptor>,
    /// An aggregate's empty slots, a bit each.
    missing: Vec<u64>,
    reclaimed: Vec<u32>,
}

impl Feed {
    pub(crate) fn new(
        (id, filter, engine): (u64, Filter, EngineId),
        (group, when_full): (Option<String>, WhenFull),
        producer: Producer,
        doorbell: OwnedFd,
    ) -> Self {
        let slots = producer.shape().slots as usize;
        Self {
            id,
            filter,
            engine,
            group,
            when_full,
            producer,
            doorbell,
            held: vec![None; slots],
            delivered: 0,
            lag: 0,
            over_budget: 0,
            descriptors: Vec::new(),
            missing: Vec::new(),
            reclaimed: Vec::new(),
        }
    }

    /// Takes back what the consumer released, into `released`: those
    /// bursts' buffers go back to their pools once no other subscriber
    /// holds them.
    pub(crate) fn reclaim(&mut self, released: &mut Vec<Arc<Burst>>) -> Result<(), Broken> {
        self.reclaimed.clear();
        self.producer.reclaim(&mut self.reclaimed)?;
        released.extend(self.reclaimed.iter().filter_map(|&slot| self.held[slot as usize].take()));
        Ok(())
    }

    /// Everything the consumer holds, taken from it (its subscription ends).
    pub(crate) fn take_held(&mut self) -> impl Iterator<Item = Arc<Burst>> + '_ {
        self.held.iter_mut().filter_map(Option::take)
    }

    /// Hands what the filter takes of `burst` to the consumer. `Full` when
    /// its ring has no room: the caller counts it lost ([`lost`](Self::lost))
    /// or waits.
    pub(crate) fn deliver(&mut self, burst: &Arc<Burst>) -> Result<Given, Broken> {
        self.descriptors.clear();
        let mut packets = 0u32;
        for packet in burst.packets().filter(|p| self.filter.takes_packet(p)) {
            let immediate = packet.immediate();
            for segment in 0..packet.num_segments() {
                let Some(at) = packet.segment_location(segment) else { continue };
                self.descriptors.push(SegmentDescriptor {
                    offset: at.offset,
                    len: at.len,
                    region: at.region,
                    segment: segment as u16,
                    packet: packets,
                    flow_id: packet.flow_id().unwrap_or(u32::MAX),
                    timestamp: packet.rx_timestamp().unwrap_or(u64::MAX),
                    immediate: immediate.unwrap_or(0),
                    has: if immediate.is_some() { HAS_IMMEDIATE } else { 0 },
                });
            }
            packets += 1;
        }
        if packets == 0 {
            return Ok(Given::Nothing);
        }
        let delivery = self.describe(burst, packets);
        let Some(slot) = self.producer.deliver(&delivery, &self.descriptors, &self.missing) else {
            return Ok(Given::Full);
        };
        self.held[slot as usize] = Some(Arc::clone(burst));
        self.delivered += 1;
        if self.producer.take_sleeper() {
            // A full counter (never: one per sleep) would only delay a wake-up.
            let _ = rustix::io::write(&self.doorbell, &1u64.to_ne_bytes());
        }
        Ok(Given::Delivered)
    }

    /// What the consumer is told of `burst` (`packets` of it taken) beside
    /// its segments; an aggregate's empty slots go to `self.missing`.
    fn describe(&mut self, burst: &Burst, packets: u32) -> Delivery {
        self.missing.clear();
        let mut delivery = Delivery {
            port: burst.port_id(),
            queue: burst.queue_id(),
            packets,
            flags: burst.flags(),
            batch_id: burst.batch_id(),
            ..Delivery::default()
        };
        if let Some(missing) = burst.reorder_missing() {
            delivery.source_packets = burst.source_packets();
            delivery.aggregate_slots = missing.slots();
            self.missing.resize(missing.slots().div_ceil(64) as usize, 0);
            for slot in missing.iter() {
                self.missing[slot as usize / 64] |= 1 << (slot % 64);
                delivery.missing_slots += 1;
            }
        }
        delivery
    }

    /// Counts a burst lost for this consumer alone (its ring was full, or
    /// consumers together were `over_budget`); the next burst it gets says so.
    pub(crate) fn lost(&mut self, over_budget: bool) {
        self.lag += 1;
        self.over_budget += u64::from(over_budget);
        self.producer.note_lost();
    }

    /// Bursts the consumer holds.
    pub(crate) fn held(&self) -> usize {
        self.producer.held()
    }
}
