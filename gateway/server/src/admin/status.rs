//! `GET /api/v1/status`: what runs, from which config, in which state.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AdminState;
use super::state::EngineState;

/// Gateway status.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Status {
    /// daqiri-gateway version.
    version: &'static str,
    /// Seconds since start.
    uptime_s: f64,
    /// The active config.
    config: ConfigInfo,
    /// `running`, `stopped` (shutting down), `restarting` (a config change is
    /// being applied), `waiting` (no config yet, `run --wait-for-config`) or
    /// `down` (a restart failed: see `config.engine_error`).
    engine: &'static str,
    /// Interfaces in port order (empty while no engine runs).
    interfaces: Vec<InterfaceStatus>,
    /// Consumers outside the gateway subscribed now (their counters are in
    /// `/api/v1/stats`).
    subscriptions: Vec<super::stats::SubscriptionStats>,
}

/// Which config is active.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConfigInfo {
    /// Incremented by every applied config.
    generation: u64,
    /// SHA-256 of the active YAML.
    sha256: String,
    /// Why no engine runs, after a restart in which neither config could start.
    engine_error: Option<String>,
    /// A new config is being applied; until it is, this is the last applied one.
    reloading: bool,
}

/// One interface.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct InterfaceStatus {
    /// Port id.
    id: u16,
    /// Interface name.
    name: String,
    /// Backend (`socket`, `sw_loopback`, ...).
    backend: &'static str,
    /// `running` or `stopped`.
    state: &'static str,
    /// RX queues.
    rx_queues: Vec<QueueStatus>,
    /// TX queues.
    tx_queues: Vec<QueueStatus>,
    /// RX flows.
    flows: Vec<FlowStatus>,
    /// RX reorder plans.
    reorder: Vec<PlanStatus>,
    /// AF_XDP interfaces: how the XDP program runs and how each socket moves frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    af_xdp: Option<AfXdpStatus>,
    /// RoCE interfaces: the RDMA device, and an ingest port's ring.
    #[serde(skip_serializing_if = "Option::is_none")]
    roce: Option<RoceStatus>,
}

/// Where a RoCE interface lives on its RDMA device.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RoceStatus {
    /// The RDMA device (`rxe0`, `mlx5_0`).
    device: String,
    /// Its port number.
    port: u8,
    /// Our RoCE v2 GID.
    gid: String,
    /// An ingest port's ring: what its sender is programmed with.
    #[serde(skip_serializing_if = "Option::is_none")]
    ingest: Option<IngestStatus>,
}

/// The values an instrument writes an ingest port's ring with.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IngestStatus {
    /// `UC` or `RC`.
    transport: &'static str,
    /// Queue pair number the sender's packets go to.
    qpn: u32,
    /// Remote key of the ring's registration.
    rkey: u32,
    /// The ring's first byte as the sender addresses it.
    base: u64,
    /// Bytes per page (one frame).
    page_size: u64,
    /// Pages in the ring; the frame with immediate `n` is page `n % pages`.
    pages: u32,
}

impl From<&daqiri::RoceLink> for RoceStatus {
    fn from(link: &daqiri::RoceLink) -> Self {
        Self {
            device: link.device.clone(),
            port: link.port,
            gid: link.gid.to_string(),
            ingest: link.ingest.as_ref().map(|r| IngestStatus {
                transport: r.transport,
                qpn: r.qpn,
                rkey: r.rkey,
                base: r.base,
                page_size: r.page_size,
                pages: r.pages,
            }),
        }
    }
}

/// An AF_XDP interface's data path.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AfXdpStatus {
    /// `native` (in the driver), `generic` (after the kernel built a socket
    /// buffer: slower) or `detached` (stopped).
    xdp_mode: &'static str,
    /// One socket per NIC queue.
    sockets: Vec<AfXdpSocketStatus>,
}

/// One AF_XDP socket.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AfXdpSocketStatus {
    /// The NIC queue it is bound to, which is the RX or TX queue of that position.
    nic_queue: u32,
    /// `zero_copy` (the NIC writes into the UMEM) or `copy` (the kernel copies into it).
    mode: &'static str,
    /// Microseconds a poll may busy-poll the socket's NAPI (`busy_poll_us`).
    #[serde(skip_serializing_if = "Option::is_none")]
    busy_poll_us: Option<u32>,
}

impl From<&daqiri::AfXdpLink> for AfXdpStatus {
    fn from(link: &daqiri::AfXdpLink) -> Self {
        Self {
            xdp_mode: link.xdp_mode,
            sockets: link
                .sockets
                .iter()
                .map(|s| AfXdpSocketStatus { nic_queue: s.nic_queue, mode: s.mode, busy_poll_us: s.busy_poll_us })
                .collect(),
        }
    }
}

/// One reorder plan.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PlanStatus {
    /// Plan name.
    name: String,
    /// The RX queue its aggregates arrive on.
    queue_id: u16,
    /// Packets per batch.
    packets_per_batch: u32,
    /// `gpu` or `cpu`: where batches are placed and converted.
    reorder_type: &'static str,
    /// GPU plans: the GPU their kernels run on.
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: Option<u32>,
    /// Batches being filled now.
    open_batches: u32,
    /// GPU plans: batches whose kernel is launched and not yet finished.
    batches_in_flight: u32,
    /// `active`, or the engine's state when it is not running.
    state: &'static str,
}

/// One queue.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueStatus {
    /// Queue id.
    id: u16,
    /// Queue name.
    name: String,
    /// `running` or `stopped`.
    state: &'static str,
    /// The worker thread that runs the queue; null in direct mode (the
    /// application polls it) and while the engine is down.
    worker: Option<WorkerStatus>,
}

/// The thread running a queue.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WorkerStatus {
    /// Thread name (`rx-<interface>-<queue>`, `tx-...`, `core-<n>` when queues share a core).
    thread: String,
    /// Kernel thread id.
    tid: u32,
    /// The core it is pinned to; null when it runs unpinned.
    core: Option<u32>,
}

/// One flow.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowStatus {
    /// Flow id.
    id: u32,
    /// Flow name.
    name: String,
    /// Queue ids it steers to.
    queue_ids: Vec<u16>,
    /// `active`.
    state: &'static str,
}

/// Version, uptime, active config and every interface, queue and flow.
#[utoipa::path(get, path = "/api/v1/status", tag = "status", responses((status = 200, body = Status)))]
pub(crate) async fn status(State(state): State<Arc<AdminState>>) -> Json<Status> {
    // The last applied config: a reload under way never holds this up.
    let active = state.active.load_full();
    let reloading = state.reloading.load(std::sync::atomic::Ordering::Acquire);
    let engine = state.live.get();
    let stats = engine.as_ref().map(|e| e.stats()).unwrap_or_default();
    let running = EngineState::of(engine.as_deref(), &active).as_str();
    let queues = |qs: &[daqiri::QueueStatsEntry]| {
        qs.iter()
            .map(|q| QueueStatus {
                id: q.id,
                name: q.name.clone(),
                state: running,
                worker: q.worker.as_ref().map(|w| WorkerStatus { thread: w.name.clone(), tid: w.tid, core: w.core }),
            })
            .collect::<Vec<_>>()
    };
    let interfaces = stats
        .ports
        .iter()
        .map(|p| InterfaceStatus {
            id: p.id,
            name: p.name.clone(),
            backend: p.backend.as_str(),
            state: running,
            rx_queues: queues(&p.rx_queues),
            tx_queues: queues(&p.tx_queues),
            flows: p
                .flows
                .iter()
                .map(|f| FlowStatus { id: f.id, name: f.name.clone(), queue_ids: f.queue_ids.clone(), state: "active" })
                .collect(),
            reorder: p
                .reorder
                .iter()
                .map(|plan| PlanStatus {
                    name: plan.name.clone(),
                    queue_id: plan.queue_id,
                    packets_per_batch: plan.packets_per_batch,
                    reorder_type: if plan.gpu.is_some() { "gpu" } else { "cpu" },
                    gpu: plan.gpu,
                    open_batches: plan.open_batches,
                    batches_in_flight: plan.batches_in_flight,
                    state: if running == "running" { "active" } else { running },
                })
                .collect(),
            af_xdp: p.link.af_xdp.as_ref().map(AfXdpStatus::from),
            roce: p.link.roce.as_ref().map(RoceStatus::from),
        })
        .collect();
    Json(Status {
        version: env!("CARGO_PKG_VERSION"),
        uptime_s: state.started.elapsed().as_secs_f64(),
        config: ConfigInfo {
            generation: active.generation,
            sha256: active.sha256.clone(),
            engine_error: active.engine_error.clone(),
            reloading,
        },
        engine: running,
        interfaces,
        subscriptions: state.hub.stats().into_iter().map(Into::into).collect(),
    })
}
