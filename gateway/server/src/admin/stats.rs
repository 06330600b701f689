//! `GET /api/v1/stats`: counters and rates per interface, queue and flow,
//! drops by reason, pool occupancy. Built from engine snapshots (atomic
//! loads), so polling at 10 Hz costs the data path nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use daqiri::QueueStatsSnapshot;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::state::AdminState;

/// All counters.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Stats {
    /// Per interface.
    interfaces: Vec<InterfaceStats>,
    /// Per memory region.
    memory_regions: Vec<RegionStats>,
    /// Per subscription of a consumer outside the gateway.
    subscriptions: Vec<SubscriptionStats>,
    /// Connections to the consumer socket turned away before a hello, by
    /// reason (`too_many_connections`, `accept_failed`, `no_thread`).
    consumer_refusals: BTreeMap<String, u64>,
}

/// One consumer's subscription (`run --consumer-socket`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SubscriptionStats {
    /// Its id, as the consumer was told.
    id: u64,
    /// The port it receives from.
    port: u16,
    /// What it takes there: `queue`, `flow` or `plan`, and which (the
    /// queue's or flow's id, the plan's position in `rx.reorder_configs`).
    source: &'static str,
    which: u32,
    /// The group it belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    /// Bursts handed to it.
    delivered: u64,
    /// Bursts dropped for it alone, its ring full or all consumers together
    /// at their budget (receive dropped nothing).
    consumer_lag: u64,
    /// Of those, dropped because all consumers together held half of the
    /// queue's burst metadata entries or of a region's buffers.
    over_budget: u64,
    /// Bursts it holds now.
    held: usize,
}

impl From<crate::subscriptions::SubscriptionStats> for SubscriptionStats {
    fn from(s: crate::subscriptions::SubscriptionStats) -> Self {
        let (port, source, which) = s.target.describe();
        Self {
            id: s.id,
            port,
            source,
            which,
            group: s.group,
            delivered: s.delivered,
            consumer_lag: s.consumer_lag,
            over_budget: s.over_budget,
            held: s.held,
        }
    }
}

/// Counters of one interface.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct InterfaceStats {
    /// Port id.
    id: u16,
    /// Interface name.
    name: String,
    /// RX queues.
    rx_queues: Vec<QueueStats>,
    /// TX queues.
    tx_queues: Vec<QueueStats>,
    /// RX drops before a queue was chosen, by reason.
    port_drops: BTreeMap<String, u64>,
    /// RX flows.
    flows: Vec<FlowStats>,
    /// What the port's driver reads below the queues.
    link: LinkStats,
    /// RX reorder plans.
    reorder: Vec<ReorderStats>,
}

/// Counters of one reorder plan (see the engine's `PlanStats` for each meaning).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReorderStats {
    /// Plan name.
    name: String,
    /// The RX queue its aggregates arrive on.
    queue_id: u16,
    /// GPU plans: the GPU their kernels run on; absent for CPU plans.
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: Option<u32>,
    /// Batches being filled now.
    open_batches: u32,
    /// GPU plans: batches whose kernel is launched and not yet finished.
    batches_in_flight: u32,
    /// Aggregates emitted full.
    batches_complete: u64,
    /// Aggregates emitted by the queue's timeout.
    batches_timed_out: u64,
    /// Aggregates emitted early to make room in the window (or at shutdown).
    batches_evicted: u64,
    /// Aggregates lost for want of ring space or metadata.
    batches_dropped: u64,
    /// Aggregates discarded incomplete (`missing_action: drop`).
    batches_discarded: u64,
    /// Packets placed into aggregates that were then discarded.
    packets_discarded: u64,
    /// Packets placed.
    packets_placed: u64,
    /// Empty slots of incomplete aggregates (zero-filled, or discarded with them).
    packets_missing: u64,
    /// Packets whose batch was already emitted.
    packets_late: u64,
    /// Packets for a slot already filled.
    packets_duplicate: u64,
    /// Packets of a batch too far behind the newest.
    packets_out_of_window: u64,
    /// Packets that could not be placed (too short, wrong length, partial samples).
    packets_rejected: u64,
}

impl From<&daqiri::PlanStats> for ReorderStats {
    fn from(p: &daqiri::PlanStats) -> Self {
        Self {
            name: p.name.clone(),
            queue_id: p.queue_id,
            gpu: p.gpu,
            open_batches: p.open_batches,
            batches_in_flight: p.batches_in_flight,
            batches_complete: p.batches_complete,
            batches_timed_out: p.batches_timed_out,
            batches_evicted: p.batches_evicted,
            batches_dropped: p.batches_dropped,
            batches_discarded: p.batches_discarded,
            packets_discarded: p.packets_discarded,
            packets_placed: p.packets_placed,
            packets_missing: p.packets_missing,
            packets_late: p.packets_late,
            packets_duplicate: p.packets_duplicate,
            packets_out_of_window: p.packets_out_of_window,
            packets_rejected: p.packets_rejected,
        }
    }
}

/// State below a port's queues; a field the backend has no such thing for is absent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LinkStats {
    /// Bytes waiting in the kernel's receive buffers (sockets), not yet read.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_rx_backlog_bytes: Option<u64>,
    /// Size of those buffers.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_rx_buffer_bytes: Option<u64>,
    /// The peer: a UDP server's last sender, a TCP connection's other end.
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<String>,
    /// Whether a connection is up (TCP, RoCE: any of the port's).
    #[serde(skip_serializing_if = "Option::is_none")]
    connected: Option<bool>,
    /// A RoCE port's connection per RX queue (TX queue j sends on the j-th).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    connections: Vec<QueueConnection>,
    /// The NIC's own counters by the driver's names (DPDK xstats).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    nic_counters: std::collections::BTreeMap<String, u64>,
    /// Why the port is down for good (a RoCE port whose device was removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    down: Option<String>,
    /// Times the port brought its link back from an error a peer caused
    /// (a RoCE ingest port's queue pair from the error state).
    #[serde(skip_serializing_if = "Option::is_none")]
    recoveries: Option<u64>,
    /// Why, the last time.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

impl From<&daqiri::LinkStats> for LinkStats {
    fn from(link: &daqiri::LinkStats) -> Self {
        Self {
            kernel_rx_backlog_bytes: link.kernel_rx_backlog_bytes,
            kernel_rx_buffer_bytes: link.kernel_rx_buffer_bytes,
            peer: link.peer.map(|p| p.to_string()),
            connected: link.connected,
            connections: link.connections.iter().map(QueueConnection::from).collect(),
            nic_counters: link.nic_counters.iter().cloned().collect(),
            down: link.down.clone(),
            recoveries: link.recoveries,
            last_error: link.last_error.clone(),
        }
    }
}

/// One RX queue's connection.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueConnection {
    /// The RX queue's id.
    rx_queue: u16,
    /// Its peer, while connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<String>,
    /// Whether it is up.
    connected: bool,
}

impl From<&daqiri::QueueConnection> for QueueConnection {
    fn from(c: &daqiri::QueueConnection) -> Self {
        Self { rx_queue: c.rx_queue, peer: c.peer.map(|p| p.to_string()), connected: c.connected }
    }
}

/// Counters of one queue.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueStats {
    /// Queue id.
    id: u16,
    /// Queue name.
    name: String,
    /// Packets delivered.
    packets: u64,
    /// Bytes delivered.
    bytes: u64,
    /// Bursts delivered.
    bursts: u64,
    /// Packets per second over the last sample window.
    packets_per_s: f64,
    /// Bits per second over the last sample window.
    bits_per_s: f64,
    /// Drops by reason.
    drops: BTreeMap<String, u64>,
    /// Bursts waiting for the application.
    ring_len: usize,
    /// Burst metadata entries in flight.
    meta_in_use: usize,
}

/// Counters of one flow.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowStats {
    /// Flow id.
    id: u32,
    /// Flow name.
    name: String,
    /// Packets matched.
    packets: u64,
    /// Bytes matched.
    bytes: u64,
    /// Packets per second over the last sample window.
    packets_per_s: f64,
}

/// Occupancy of one memory region.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RegionStats {
    /// Region name.
    name: String,
    /// Memory kind.
    kind: &'static str,
    /// Buffers in the pool.
    num_bufs: u32,
    /// Buffers held by bursts or workers.
    in_use: u32,
    /// Bytes per buffer.
    buf_size: usize,
    /// The GPU holding (`device`) or mapping (`host_pinned`) the region; null otherwise.
    gpu: Option<u32>,
}

fn drops(s: &QueueStatsSnapshot) -> BTreeMap<String, u64> {
    s.drops_by_reason().map(|(r, n)| (r.as_str().to_owned(), n)).collect()
}

/// Counters, rates, drops by reason and pool occupancy.
#[utoipa::path(get, path = "/api/v1/stats", tag = "stats", responses(
    (status = 200, body = Stats),
    (status = 503, body = super::error::ApiErrorBody, description = "the engine is restarting")
))]
pub(crate) async fn stats(State(state): State<Arc<AdminState>>) -> Result<Json<Stats>, ApiError> {
    let now = state.engine()?.stats();
    let mut sampler = state.rates.lock().unwrap_or_else(|e| e.into_inner());
    sampler.update(&now);
    let queue = |port: u16, dir: &'static str, q: &daqiri::QueueStatsEntry| {
        let (pps, bps) = sampler.rates.get(&(port, dir, q.id)).copied().unwrap_or_default();
        QueueStats {
            id: q.id,
            name: q.name.clone(),
            packets: q.stats.packets,
            bytes: q.stats.bytes,
            bursts: q.stats.bursts,
            packets_per_s: pps,
            bits_per_s: bps,
            drops: drops(&q.stats),
            ring_len: q.ring_len,
            meta_in_use: q.meta_in_use,
        }
    };
    let interfaces = now
        .ports
        .iter()
        .map(|p| InterfaceStats {
            id: p.id,
            name: p.name.clone(),
            rx_queues: p.rx_queues.iter().map(|q| queue(p.id, "rx", q)).collect(),
            tx_queues: p.tx_queues.iter().map(|q| queue(p.id, "tx", q)).collect(),
            port_drops: drops(&p.rx_port_drops),
            flows: p
                .flows
                .iter()
                .map(|f| FlowStats {
                    id: f.id,
                    name: f.name.clone(),
                    packets: f.packets,
                    bytes: f.bytes,
                    packets_per_s: sampler.flow_rates.get(&(p.id, f.id)).copied().unwrap_or_default(),
                })
                .collect(),
            link: LinkStats::from(&p.link),
            reorder: p.reorder.iter().map(ReorderStats::from).collect(),
        })
        .collect();
    let memory_regions = now
        .regions
        .iter()
        .map(|r| RegionStats {
            name: r.name.clone(),
            kind: r.kind,
            num_bufs: r.num_bufs,
            in_use: r.in_use,
            buf_size: r.buf_size,
            gpu: r.gpu,
        })
        .collect();
    let subscriptions = state.hub.stats().into_iter().map(SubscriptionStats::from).collect();
    let consumer_refusals = state.hub.refusals().map(|(why, n)| (why.as_str().to_owned(), n)).collect();
    Ok(Json(Stats { interfaces, memory_regions, subscriptions, consumer_refusals }))
}
