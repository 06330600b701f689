//! Point-in-time copies of every counter, for the status line, the admin API
//! and metrics. Taking one reads atomics only; the data path is not touched.

use daqiri_config::InterfaceBackend;

use crate::backend::{LinkStats, PortDriver};
use crate::queue::Queue;
use crate::reorder::PlanStats;
use crate::state::EngineState;
use crate::stats::QueueStatsSnapshot;

/// Every counter of the engine at one moment.
#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    /// Per port.
    pub ports: Vec<PortStats>,
    /// Per memory region.
    pub regions: Vec<RegionStats>,
}

/// Counters of one port.
#[derive(Debug, Clone)]
pub struct PortStats {
    /// Port id.
    pub id: u16,
    /// Interface name.
    pub name: String,
    /// Backend driving it.
    pub backend: InterfaceBackend,
    /// RX queues.
    pub rx_queues: Vec<QueueStatsEntry>,
    /// TX queues.
    pub tx_queues: Vec<QueueStatsEntry>,
    /// RX drops before a queue was chosen.
    pub rx_port_drops: QueueStatsSnapshot,
    /// RX flows.
    pub flows: Vec<FlowStatsEntry>,
    /// What the port's driver reads below the queues.
    pub link: LinkStats,
    /// Reorder plans, in `reorder_configs` order.
    pub reorder: Vec<PlanStats>,
}

/// Counters of one queue.
#[derive(Debug, Clone)]
pub struct QueueStatsEntry {
    /// Queue id.
    pub id: u16,
    /// Queue name.
    pub name: String,
    /// Counters.
    pub stats: QueueStatsSnapshot,
    /// Bursts waiting in the ring.
    pub ring_len: usize,
    /// Burst metadata entries in flight.
    pub meta_in_use: usize,
    /// The worker thread running the queue; `None` in direct mode (the
    /// application polls) or before the workers started.
    pub worker: Option<crate::queue::WorkerThread>,
}

/// Counters of one flow.
#[derive(Debug, Clone)]
pub struct FlowStatsEntry {
    /// Flow id.
    pub id: u32,
    /// Flow name.
    pub name: String,
    /// Queue ids the flow steers to.
    pub queue_ids: Vec<u16>,
    /// Packets matched.
    pub packets: u64,
    /// Bytes matched.
    pub bytes: u64,
}

/// Occupancy of one memory region.
#[derive(Debug, Clone)]
pub struct RegionStats {
    /// Region name.
    pub name: String,
    /// Memory kind (`host`, `huge`, ...).
    pub kind: &'static str,
    /// Bytes per buffer.
    pub buf_size: usize,
    /// Buffers in the pool.
    pub num_bufs: u32,
    /// Buffers held by bursts or workers.
    pub in_use: u32,
    /// The GPU whose memory holds the region (`device`) or that maps it
    /// (`host_pinned`); `None` for memory no GPU maps.
    pub gpu: Option<u32>,
}

impl PortStats {
    /// Sum over the RX queues, plus the port-level drops.
    pub fn rx_total(&self) -> QueueStatsSnapshot {
        let mut total = self.rx_port_drops;
        for q in &self.rx_queues {
            total.packets += q.stats.packets;
            total.bytes += q.stats.bytes;
            total.bursts += q.stats.bursts;
            for (t, d) in total.drops.iter_mut().zip(q.stats.drops) {
                *t += d;
            }
        }
        total
    }
}

fn queue_entry(q: &Queue) -> QueueStatsEntry {
    QueueStatsEntry {
        id: q.id,
        name: q.name.clone(),
        stats: q.stats.snapshot(),
        ring_len: q.ring.len(),
        meta_in_use: q.meta.capacity() - q.meta.available(),
        worker: q.worker.get().cloned(),
    }
}

pub(crate) fn take(engine: &EngineState, drivers: &[Box<dyn PortDriver>]) -> EngineStats {
    let ports = engine
        .ports
        .iter()
        .zip(drivers)
        .map(|(p, driver)| PortStats {
            id: p.id,
            name: p.name.clone(),
            backend: p.backend,
            rx_queues: p.rx.iter().map(queue_entry).collect(),
            tx_queues: p.tx.iter().map(queue_entry).collect(),
            rx_port_drops: p.rx_drops.snapshot(),
            flows: p
                .flows
                .load()
                .rules
                .iter()
                .map(|rule| {
                    let (packets, bytes) = rule.stats.snapshot();
                    FlowStatsEntry {
                        id: rule.flow_id,
                        name: rule.name.clone(),
                        queue_ids: rule.queues().iter().map(|&i| p.rx[i].id).collect(),
                        packets,
                        bytes,
                    }
                })
                .collect(),
            link: driver.link_stats(),
            reorder: p.plans.iter().map(|plan| plan.snapshot()).collect(),
        })
        .collect();
    let regions = engine
        .regions
        .iter()
        .map(|r| RegionStats {
            name: r.name().to_owned(),
            kind: r.kind().as_str(),
            buf_size: r.buf_size(),
            num_bufs: r.num_bufs(),
            in_use: r.in_use(),
            gpu: r.backing().gpu(),
        })
        .collect();
    EngineStats { ports, regions }
}
