//! A port's CPU reorder plans run on packets given from memory, with no
//! backend and no worker: for recorded captures, tests and benchmarks.
//! Packets go through the same windows, conversion, counters and output
//! region as in a running engine, and aggregates come out as the same
//! bursts `get_rx_burst` returns.

use std::sync::Arc;

use daqiri_config::ValidConfig;
use daqiri_config::model::ReorderType;

use super::{PlanStats, Reorderer};
use crate::burst::{Burst, EngineId};
use crate::error::{Error, Result, Status};
use crate::memory::{Region, RegionTable};
use crate::port::Port;

/// One interface's reorder plans, fed by hand.
///
/// ```
/// # let yaml = include_str!("../../../../configs/socket_udp_reorder.yaml");
/// let config = daqiri::config::Document::parse(yaml)?.validate()?;
/// let mut replay = daqiri::reorder::Replay::new(&config, "udp_rx")?;
/// // A UDP socket lands the payload: a u32 sequence number, then int16 samples.
/// assert!(replay.push(1, &[0, 0, 0, 0, 0, 1, 0xff, 0xfe]));
/// replay.finish();
/// let batch = replay.next_batch().expect("the open batch is emitted at finish");
/// assert_eq!((batch.batch_id(), batch.source_packets()), (Some(0), 1));
/// let first: [u8; 8] = batch.packet(0).data()[..8].try_into().unwrap();
/// assert_eq!(first, [1.0f32.to_ne_bytes(), (-2.0f32).to_ne_bytes()].concat()[..]);
/// # Ok::<(), daqiri::Error>(())
/// ```
#[derive(Debug)]
pub struct Replay {
    port: Port,
    /// One per RX queue, as the queue's worker holds it.
    reorderers: Vec<Reorderer>,
    regions: Arc<RegionTable>,
    /// Queue `next_batch` looks at first, so no queue starves the others.
    next_queue: usize,
}

impl Replay {
    /// The plans of interface `interface` (its name) in `config`. Every memory
    /// region of the config is allocated, as the engine would, so buffer
    /// counts and sizes behave alike; nothing is opened or started.
    pub fn new(config: &ValidConfig, interface: &str) -> Result<Self> {
        let (index, iface) = config
            .interfaces()
            .find(|(_, iface)| iface.name == interface)
            .ok_or_else(|| Error::new(Status::InvalidParameter, format!("no interface named \"{interface}\"")))?;
        let plans = iface.rx.iter().flat_map(|rx| rx.reorder_configs.iter().enumerate());
        if let Some((i, _)) = plans.clone().find(|(_, plan)| plan.reorder_type == ReorderType::Gpu) {
            return Err(Error::new(
                Status::NotSupported,
                format!("interfaces[{index}].rx.reorder_configs[{i}].reorder_type: a replay runs cpu plans only"),
            ));
        }
        if plans.count() == 0 {
            return Err(Error::new(
                Status::InvalidParameter,
                format!("interface \"{interface}\" has no reorder plans"),
            ));
        }
        let regions = config.config().memory_regions.iter().map(Region::new).collect::<Result<Vec<_>>>()?;
        let regions = Arc::new(RegionTable::new(regions));
        let port = Port::new(config, index, &regions, EngineId::next())?;
        let reorderers = port.rx.iter().map(|q| Reorderer::new(&port.plans_of(q.id))).collect();
        Ok(Self { port, reorderers, regions, next_queue: 0 })
    }

    /// Offers one packet of flow `flow_id`, as its backend lands it: the
    /// whole frame for raw streams, the payload for sockets (plan offsets
    /// count from there). Whether a plan took the flow; a packet a plan takes
    /// but cannot place is counted in the plan's stats, as in the engine.
    pub fn push(&mut self, flow_id: u32, packet: &[u8]) -> bool {
        let found = self.reorderers.iter().enumerate().find_map(|(q, r)| r.plan_of(flow_id).map(|plan| (q, plan)));
        let Some((queue, plan)) = found else { return false };
        self.reorderers[queue].place(plan, &self.port.rx[queue], packet, &self.regions);
        true
    }

    /// The next aggregate emitted, oldest first within a queue. Emitted
    /// aggregates wait in their queue's ring, whose size is the engine's
    /// (`rx_meta_buffers`); a batch emitted into a full ring is dropped and
    /// counted, so take them as they come.
    pub fn next_batch(&mut self) -> Option<Burst> {
        let queues = self.port.rx.len();
        (0..queues).find_map(|i| {
            let at = (self.next_queue + i) % queues;
            let burst = self.port.rx[at].ring.pop()?;
            self.next_queue = (at + 1) % queues;
            Some(burst)
        })
    }

    /// Emits every open batch, its empty slots zeroed (the end of a recording).
    pub fn finish(&mut self) {
        for (reorderer, queue) in self.reorderers.iter_mut().zip(&self.port.rx) {
            reorderer.flush_all(queue, &self.regions);
        }
    }

    /// Each plan's counters, in `reorder_configs` order.
    pub fn stats(&self) -> Vec<PlanStats> {
        self.port.plans.iter().map(|plan| plan.snapshot()).collect()
    }
}
