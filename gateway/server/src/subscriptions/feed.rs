//! One subscription's end in the gateway: the bursts its consumer holds,
//! its ring, and its doorbell.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use daqiri::{Burst, EngineId};
use daqiri_consumer::ring::{Broken, Producer, SegmentDescriptor};

/// What one subscription receives, and what its consumer holds.
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) id: u64,
    /// (port, RX queue id) of the engine `engine`.
    pub(crate) target: (u16, u16),
    pub(crate) engine: EngineId,
    producer: Producer,
    /// Rung once per burst delivered.
    doorbell: OwnedFd,
    /// By slot: the burst the consumer holds there (its buffers stay out of
    /// their pool until every subscriber holding it released it).
    held: Vec<Option<Arc<Burst>>>,
    /// Bursts delivered, and bursts dropped for this consumer (its ring full).
    pub(crate) delivered: u64,
    pub(crate) lag: u64,
    descriptors: Vec<SegmentDescriptor>,
    reclaimed: Vec<u32>,
}

impl Feed {
    pub(crate) fn new(
        (id, target, engine): (u64, (u16, u16), EngineId),
        producer: Producer,
        doorbell: OwnedFd,
    ) -> Self {
        let slots = producer.shape().slots as usize;
        Self {
            id,
            target,
            engine,
            producer,
            doorbell,
            held: vec![None; slots],
            delivered: 0,
            lag: 0,
            descriptors: Vec::new(),
            reclaimed: Vec::new(),
        }
    }

    /// Takes back what the consumer released: those bursts' buffers go back
    /// to their pools once no other subscriber holds them.
    pub(crate) fn reclaim(&mut self) -> Result<(), Broken> {
        self.reclaimed.clear();
        self.producer.reclaim(&mut self.reclaimed)?;
        for &slot in &self.reclaimed {
            self.held[slot as usize] = None;
        }
        Ok(())
    }

    /// Hands `burst` to the consumer, or counts it lost for it alone when
    /// its ring is full.
    pub(crate) fn deliver(&mut self, burst: &Arc<Burst>) -> Result<(), Broken> {
        self.reclaim()?;
        self.descriptors.clear();
        for (index, packet) in burst.packets().enumerate() {
            for segment in 0..packet.num_segments() {
                let Some(at) = packet.segment_location(segment) else { continue };
                self.descriptors.push(SegmentDescriptor {
                    offset: at.offset,
                    len: at.len,
                    region: at.region,
                    segment: segment as u16,
                    packet: index as u32,
                    flow_id: packet.flow_id().unwrap_or(u32::MAX),
                    timestamp: packet.rx_timestamp().unwrap_or(u64::MAX),
                });
            }
        }
        let (port, queue) = self.target;
        match self.producer.deliver((port, queue), burst.num_packets() as u32, &self.descriptors) {
            Some(slot) => {
                self.held[slot as usize] = Some(Arc::clone(burst));
                self.delivered += 1;
                // A full counter (never, at one per burst) only delays a wake-up.
                let _ = rustix::io::write(&self.doorbell, &1u64.to_ne_bytes());
            }
            None => self.lag += 1,
        }
        Ok(())
    }

    /// Bursts the consumer holds.
    pub(crate) fn held(&self) -> usize {
        self.producer.held()
    }
}
