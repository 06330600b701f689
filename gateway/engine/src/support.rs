//! What this build can honour of a valid config.
//!
//! A config can be valid DAQIRI and still ask for something this build does
//! not do (a backend left out, GPU memory, reorder, NIC-only flow actions).
//! Every such key is listed here with its YAML path: [`Engine::new`] refuses
//! to start with `NOT_SUPPORTED` naming them all, and `daqiri-gateway check`
//! prints them as warnings. Nothing is accepted and then ignored.
//!
//! [`Engine::new`]: crate::Engine::new

use daqiri_config::model::{
    ActionType, EngineKind, Interface, Loopback, MemoryAccess, MemoryKind, PollMode, Queue, ReorderEngine, ReorderType,
};
use daqiri_config::{Diagnostic, InterfaceBackend, Severity, Transport, ValidConfig, YamlPath};

use crate::error::{Error, Status};

/// Every key of `config` this build cannot honour, as warnings with their path.
pub fn unsupported(config: &ValidConfig) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut refuse = |path: YamlPath, message: String| out.push(Diagnostic::new(Severity::Warning, &path, message));
    let regions = YamlPath::cfg().key("memory_regions");
    for (i, region) in config.config().memory_regions.iter().enumerate() {
        if !cfg!(feature = "cuda") && matches!(region.kind, MemoryKind::Device | MemoryKind::HostPinned) {
            refuse(
                regions.index(i).key("kind"),
                format!("kind {} needs CUDA, which this build does not include", region.kind.as_str()),
            );
        }
        if region.access.iter().any(|a| !matches!(a, MemoryAccess::Local)) {
            if !cfg!(feature = "rdma") {
                refuse(
                    regions.index(i).key("access"),
                    "rdma_read and rdma_write need memory registered with an RDMA device, which this build does not include"
                        .into(),
                );
            } else if !used_by_roce_queue(config, &region.name) {
                refuse(
                    regions.index(i).key("access"),
                    format!(
                        "rdma_read and rdma_write are granted through a RoCE queue's registration, and no RoCE queue uses region \"{}\"",
                        region.name
                    ),
                );
            }
        }
    }
    if config.config().loopback == Loopback::Hardware {
        refuse(
            YamlPath::cfg().key("loopback"),
            "\"hw\" loopback is the ibverbs engine's mlx5 internal loopback, which this build does not drive; \"sw\" is the engine's own loopback".into(),
        );
    }
    let interfaces = YamlPath::cfg().key("interfaces");
    for (port, iface) in config.interfaces() {
        let path = interfaces.index(port);
        let plans = iface.rx.iter().flat_map(|rx| rx.reorder_configs.iter().enumerate());
        for (j, _) in plans.filter(|(_, plan)| plan.reorder_engine == Some(ReorderEngine::Hardware)) {
            refuse(
                path.key("rx").key("reorder_configs").index(j).key("reorder_engine"),
                "the NIC's own reorder (\"hw\") needs mlx5 steering this build does not drive; \"sw\" (the default) runs the plan in the gateway, on the CPU or GPU its reorder_type names".into(),
            );
        }
        let backend = config.backend(port);
        if !crate::backend::compiled_in(backend) {
            refuse(
                path.clone(),
                format!(
                    "interface \"{}\" needs the {} backend, which this build does not include",
                    iface.name,
                    backend.as_str()
                ),
            );
            continue;
        }
        if backend == InterfaceBackend::Dpdk {
            dpdk_keys(iface, &path, &mut refuse);
        }
        if backend == InterfaceBackend::Socket {
            socket_keys(iface, config.endpoints(port), &path, &mut refuse);
        }
        if backend == InterfaceBackend::Roce {
            roce_keys(config, iface, config.endpoints(port), &path, &mut refuse);
        }
        let datagrams = config.endpoints(port).is_some_and(|e| e.transport == Transport::Udp);
        if datagrams || backend == InterfaceBackend::Roce {
            message_size_keys(config, iface, &path, &mut refuse);
        }
        #[cfg(feature = "af_xdp")]
        if backend == InterfaceBackend::AfXdp {
            af_xdp_keys(config, iface, &path, &mut refuse);
        }
        let transport = config.endpoints(port).map(|e| e.transport);
        rx_keys(iface, &path.key("rx"), backend, transport, &mut refuse);
        tx_keys(iface, &path.key("tx"), backend, &mut refuse);
    }
    out
}

/// The engines this build runs (`socket` always; the others with their
/// features: `dpdk`, `rdma` for ibverbs' RoCE, `af_xdp`).
pub fn engines_built() -> Vec<EngineKind> {
    let built = |engine: &EngineKind| match engine {
        EngineKind::Socket => true,
        EngineKind::Dpdk => cfg!(feature = "dpdk"),
        EngineKind::Ibverbs => cfg!(feature = "rdma"),
        EngineKind::AfXdp => cfg!(feature = "af_xdp"),
    };
    EngineKind::ALL.into_iter().filter(built).collect()
}

/// `Err(NOT_SUPPORTED)` naming every key this build cannot honour.
pub(crate) fn require_supported(config: &ValidConfig) -> Result<(), Error> {
    let refused = unsupported(config);
    if refused.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = refused.iter().map(|d| format!("  {}: {}", d.path, d.message)).collect();
    Err(Error::new(
        Status::NotSupported,
        format!("this build cannot honour {} config key(s):\n{}", refused.len(), lines.join("\n")),
    ))
}

/// What the DPDK backend cannot do on any device: an RX split into more
/// than headers and payload. (What a PMD cannot do, such as rte_flow or
/// buffer split on a virtual device, fails at init with the PMD's reason:
/// only the device knows.)
fn dpdk_keys(iface: &Interface, path: &YamlPath, refuse: &mut impl FnMut(YamlPath, String)) {
    if let Some(rx) = &iface.rx {
        let queues = path.key("rx").key("queues");
        for (i, queue) in rx.queues.iter().enumerate().filter(|(_, q)| q.memory_regions.len() > 2) {
            refuse(
                queues.index(i).key("memory_regions"),
                format!(
                    "{} regions: DPDK buffer split lands a packet in two, its headers and its payload; give one or two",
                    queue.memory_regions.len()
                ),
            );
        }
    }
}

/// What one kernel socket per interface cannot do: it receives datagram
/// payloads (nothing to split into headers and payload), lands each one
/// before it is steered (so in one region), and is read by one worker
/// (so on one core).
fn socket_keys(
    iface: &Interface,
    endpoints: Option<daqiri_config::SocketEndpoints>,
    path: &YamlPath,
    refuse: &mut impl FnMut(YamlPath, String),
) {
    let Some(rx) = &iface.rx else { return };
    let flows = path.key("rx").key("flows");
    // Steering reads a datagram's destination as the address the socket is bound to.
    let bound = endpoints.and_then(|e| e.local).is_some_and(|local| !local.ip.is_unspecified());
    for (i, _) in rx.flows.iter().enumerate().filter(|(_, f)| f.matches.as_ref().is_some_and(|m| m.ipv4_dst.is_some()))
    {
        if !bound {
            refuse(
                flows.index(i).key("match").key("ipv4_dst"),
                "a socket bound to every address (or a client's) is not told each datagram's destination; bind local_addr to one address, or match ipv4_dst on a raw interface".into(),
            );
        }
    }
    for (i, _) in rx.flows.iter().enumerate().filter(|(_, f)| f.matches.as_ref().is_some_and(|m| m.ethernet.is_some()))
    {
        refuse(
            flows.index(i).key("match").key("ethernet"),
            "a socket receives a datagram's payload, without the Ethernet header its addresses are in; match Ethernet addresses on a raw interface (DPDK, AF_XDP, sw loopback)".into(),
        );
    }
    let Some(first) = rx.queues.first() else { return };
    // A UDP server's indirect RX queues on several cores get a socket
    // each (a reuseport group): each lands in its own region, on its core.
    let grouped = endpoints.is_some_and(|e| {
        e.transport == daqiri_config::Transport::Udp
            && crate::backend::udp_reuseport_group(
                e,
                rx.queues.iter().all(|q| q.poll_mode == PollMode::Indirect),
                rx.queues.iter().map(|q| q.pinned_core().map(|c| c.0)),
            )
    });
    let queues = path.key("rx").key("queues");
    for (i, queue) in rx.queues.iter().enumerate() {
        let at = queues.index(i);
        if queue.memory_regions.len() > 1 {
            refuse(
                at.key("memory_regions"),
                format!(
                    "{} regions ask for header-data split, and a socket receives only a datagram's payload: give one region",
                    queue.memory_regions.len()
                ),
            );
        } else if i > 0 && !grouped && queue.memory_regions.first() != first.memory_regions.first() {
            refuse(
                at.key("memory_regions"),
                format!(
                    "the interface's one socket (a client's, or a server's with a queue in direct mode) lands every datagram before it is steered, in RX queue \"{}\"'s region \"{}\"; give queue \"{}\" that region too",
                    first.name,
                    first.memory_regions.first().map_or("", String::as_str),
                    queue.name
                ),
            );
        }
        if i > 0 && !grouped && queue.poll_mode == PollMode::Indirect && queue.cpu_core != first.cpu_core {
            refuse(
                at.key("cpu_core"),
                format!(
                    "the interface's one socket (a client's, or a server's with a queue in direct mode) is read by one worker, on RX queue \"{}\"'s core {}; give queue \"{}\" that core too",
                    first.name,
                    first.cpu_core.map_or_else(|| "(none)".to_owned(), |c| c.to_string()),
                    queue.name
                ),
            );
        }
    }
}

/// A UDP datagram or a RoCE message lands whole in one buffer of its RX
/// queue's (first) region, so `max_payload_size` above that buffer asks for
/// messages no queue can take. At or below it the buffer is the limit, as
/// in DAQIRI, whose receive takes the larger of the two. (TCP reads a byte
/// stream in pieces of at most `max_payload_size`: any size is honoured.)
fn message_size_keys(
    config: &ValidConfig,
    iface: &Interface,
    path: &YamlPath,
    refuse: &mut impl FnMut(YamlPath, String),
) {
    let Some(wanted) = iface.socket_config.as_ref().and_then(|s| s.max_payload_size) else { return };
    let regions = &config.config().memory_regions;
    let landing = iface.rx.iter().flat_map(|rx| &rx.queues).filter_map(|queue| {
        let name = queue.memory_regions.first()?;
        Some((queue, regions.iter().find(|r| &r.name == name)?))
    });
    let Some((queue, smallest)) = landing.min_by_key(|(_, region)| region.buf_size) else { return };
    if u64::from(wanted) > smallest.buf_size {
        refuse(
            path.key("socket_config").key("max_payload_size"),
            format!(
                "{wanted} bytes: each message lands whole in one buffer, and RX queue \"{}\" lands in region \"{}\" of {}-byte buffers, which a longer one cannot land in (UDP counts it as a truncated drop); raise that region's buf_size to {wanted}, or lower max_payload_size to {}",
                queue.name, smallest.name, smallest.buf_size, smallest.buf_size
            ),
        );
    }
}

/// Whether a queue of a RoCE interface names region `name` (and so
/// registers it with its device, with the access it lists).
fn used_by_roce_queue(config: &ValidConfig, name: &str) -> bool {
    config.interfaces().filter(|(port, _)| config.backend(*port) == InterfaceBackend::Roce).any(|(_, iface)| {
        let rx = iface.rx.iter().flat_map(|rx| &rx.queues);
        let tx = iface.tx.iter().flat_map(|tx| &tx.queues);
        rx.chain(tx).any(|q| q.memory_regions.iter().any(|r| r == name))
    })
}

/// What the RoCE backend does: a port is an RC or UC connection per RX
/// queue (a server accepting a peer per queue, or a client connecting each
/// queue to `remote_addr`), TX queue j sending on RX queue j's connection,
/// each message in one buffer of the queue's one region; or an ingest ring
/// (UC or RC) on one RX queue, a region no other queue uses. Everything
/// else is refused by path.
fn roce_keys(
    config: &ValidConfig,
    iface: &Interface,
    endpoints: Option<daqiri_config::SocketEndpoints>,
    path: &YamlPath,
    refuse: &mut impl FnMut(YamlPath, String),
) {
    if endpoints.is_some_and(|e| e.mode == daqiri_config::model::SocketMode::Client && e.remote.is_none()) {
        refuse(
            path.key("socket_config").key("remote_addr"),
            "a RoCE client connects to remote_addr (roce://IP:PORT, our extension), or where an rdma_bench_client section's server_address and server_port say, as DAQIRI's RDMA bench connects".into(),
        );
    }
    let ingest = iface.roce_config.as_ref().is_some_and(|r| r.ingest.is_some());
    if ingest {
        ingest_ring_keys(config, iface, path, refuse);
    }
    let rx_queues = iface.rx.as_ref().map_or(&[][..], |rx| &rx.queues);
    let tx_queues = iface.tx.as_ref().map_or(&[][..], |tx| &tx.queues);
    // (An ingest port's one RX queue and no TX queue are the config's rules.)
    for i in rx_queues.len()..tx_queues.len() {
        refuse(
            path.key("tx").key("queues").index(i),
            format!(
                "TX queue {i} sends on the connection of RX queue {i}, which runs it, and the interface has {} RX queues: add an RX queue",
                rx_queues.len()
            ),
        );
    }
    if iface.rx.as_ref().is_some_and(|rx| !rx.flows.is_empty()) {
        refuse(
            path.key("rx").key("flows"),
            "RDMA messages carry no Ethernet, IP or UDP headers of their own to match: a RoCE queue takes its connection's messages".into(),
        );
    }
    for (direction, queues) in [("rx", rx_queues), ("tx", tx_queues)] {
        let at = path.key(direction).key("queues");
        for (i, queue) in queues.iter().enumerate() {
            if queue.memory_regions.len() != 1 {
                refuse(
                    at.index(i).key("memory_regions"),
                    format!(
                        "{} regions: a RoCE queue receives or sends each message in one buffer of one region; name one",
                        queue.memory_regions.len()
                    ),
                );
            }
            let regions = &config.config().memory_regions;
            let on_gpu = |name: &&String| regions.iter().any(|r| &r.name == *name && r.kind == MemoryKind::Device);
            // A cuda build registers GPU memory as a dma-buf; whether the GPU
            // driver and the RDMA device can is known once the port opens.
            for name in queue.memory_regions.iter().filter(on_gpu).filter(|_| !cfg!(feature = "cuda")) {
                refuse(
                    at.index(i).key("memory_regions"),
                    format!(
                        "region \"{name}\" is GPU memory (kind device), which RoCE registers as a dma-buf in a build with the cuda feature; this build has none: use host, huge or host_pinned"
                    ),
                );
            }
        }
    }
}

/// An ingest ring is open to its sender's writes (`rdma_write`), and its
/// pages are the sender's to write at any time, so no other queue may take
/// buffers from its region.
fn ingest_ring_keys(
    config: &ValidConfig,
    iface: &Interface,
    path: &YamlPath,
    refuse: &mut impl FnMut(YamlPath, String),
) {
    let Some(ring) = iface.rx.as_ref().and_then(|rx| rx.queues.first()).and_then(|q| q.memory_regions.first()) else {
        return;
    };
    let regions = &config.config().memory_regions;
    if let Some(index) = regions.iter().position(|r| &r.name == ring)
        && !regions[index].access.contains(&daqiri_config::model::MemoryAccess::RdmaWrite)
    {
        refuse(
            YamlPath::cfg().key("memory_regions").index(index).key("access"),
            format!("region \"{ring}\" is an ingest ring its sender writes into: add rdma_write to its access list"),
        );
    }
    let others = config.config().interfaces.iter().flat_map(|other| {
        let rx = other.rx.iter().flat_map(|rx| &rx.queues).map(move |q| (other, "rx", q));
        rx.chain(other.tx.iter().flat_map(|tx| &tx.queues).map(move |q| (other, "tx", q)))
    });
    for (other, direction, queue) in others {
        let same = std::ptr::eq(other, iface) && direction == "rx";
        if !same && queue.memory_regions.contains(ring) {
            refuse(
                path.key("rx").key("queues").index(0).key("memory_regions"),
                format!(
                    "region \"{ring}\" is an ingest ring its sender writes at any time; {direction} queue \"{}\" of \"{}\" uses it too: give the ring a region of its own",
                    queue.name, other.name
                ),
            );
        }
    }
}

/// What AF_XDP cannot do on any netdev: a frame lands in one UMEM frame
/// (one region per queue, 2048 or 4096 bytes: the chunk sizes the kernel
/// takes for page-aligned UMEMs), and the XDP program's maps are sized.
#[cfg(feature = "af_xdp")]
fn af_xdp_keys(config: &ValidConfig, iface: &Interface, path: &YamlPath, refuse: &mut impl FnMut(YamlPath, String)) {
    use crate::backend::{AF_XDP_MAX_RSS_QUEUES, AF_XDP_MAX_RULES, AF_XDP_MAX_SOCKETS};
    let cfg = config.config();
    let rx = iface.rx.iter().flat_map(|rx| rx.queues.iter().enumerate().map(|(i, q)| (path.key("rx"), i, q)));
    let tx = iface.tx.iter().flat_map(|tx| tx.queues.iter().enumerate().map(|(i, q)| (path.key("tx"), i, q)));
    for (side, i, queue) in rx.chain(tx) {
        let at = side.key("queues").index(i).key("memory_regions");
        if queue.memory_regions.len() > 1 {
            refuse(at.clone(), "an AF_XDP frame lands in one UMEM frame: give one region".into());
        }
        for name in &queue.memory_regions {
            let Some(r) = cfg.memory_regions.iter().position(|r| &r.name == name) else { continue };
            let region = &cfg.memory_regions[r];
            if !matches!(region.buf_size, 2048 | 4096) {
                refuse(
                    YamlPath::cfg().key("memory_regions").index(r).key("buf_size"),
                    format!(
                        "region \"{name}\" is an AF_XDP UMEM for queue \"{}\"; its frames must be 2048 or 4096 bytes, not {} (256 of them are the kernel's headroom)",
                        queue.name, region.buf_size
                    ),
                );
            }
        }
    }
    let Some(rx) = &iface.rx else { return };
    if rx.queues.len() > AF_XDP_MAX_SOCKETS {
        refuse(
            path.key("rx").key("queues"),
            format!("{} RX queues: the XDP program's socket map holds {AF_XDP_MAX_SOCKETS}", rx.queues.len()),
        );
    }
    let rules = rx.flows.len() + rx.dynamic_flow_capacity as usize;
    if rules > AF_XDP_MAX_RULES {
        refuse(
            path.key("rx").key("flows"),
            format!(
                "{} flows and a dynamic_flow_capacity of {}: the XDP program holds {AF_XDP_MAX_RULES} rules in all",
                rx.flows.len(),
                rx.dynamic_flow_capacity
            ),
        );
    }
    for (i, flow) in rx.flows.iter().enumerate() {
        let queues = flow.queue_ids().len();
        if queues > AF_XDP_MAX_RSS_QUEUES {
            refuse(
                path.key("rx").key("flows").index(i),
                format!(
                    "flow \"{}\" spreads over {queues} queues; the XDP program spreads over at most {AF_XDP_MAX_RSS_QUEUES}",
                    flow.name
                ),
            );
        }
    }
}

fn rx_keys(
    iface: &Interface,
    rx_path: &YamlPath,
    backend: InterfaceBackend,
    transport: Option<Transport>,
    refuse: &mut impl FnMut(YamlPath, String),
) {
    let Some(rx) = &iface.rx else { return };
    for (i, plan) in rx.reorder_configs.iter().enumerate() {
        if plan.reorder_type == ReorderType::Gpu && !cfg!(feature = "cuda") {
            refuse(
                rx_path.key("reorder_configs").index(i).key("reorder_type"),
                "GPU reorder needs a CUDA build, which this is not; reorder_type: cpu runs here".into(),
            );
        }
    }
    if !rx.flex_items.is_empty() {
        refuse(
            rx_path.key("flex_items"),
            "flex items program a NIC's parser; software steering matches UDP/IP only".into(),
        );
    }
    // DPDK asks the PMD at init, and fails naming it when it has none.
    if rx.hardware_timestamps && backend != InterfaceBackend::Dpdk {
        refuse(
            rx_path.key("hardware_timestamps"),
            format!("the {} backend has no hardware timestamps", backend.as_str()),
        );
    }
    for (i, flow) in rx.flows.iter().enumerate() {
        let flow_path = rx_path.key("flows").index(i);
        if let Some(m) = &flow.matches
            && (m.flex_item_id.is_some() || m.ecpri.is_some())
        {
            let why = if backend == InterfaceBackend::Dpdk {
                "flex and eCPRI matches are not translated to rte_flow in this build; it matches UDP ports, IPv4 addresses and ipv4_len"
            } else {
                "flex and eCPRI matches need a NIC's flow engine; software steering matches UDP ports, IPv4 addresses and ipv4_len"
            };
            refuse(flow_path.key("match"), why.into());
        }
        for (j, action) in flow.actions.iter().flatten().enumerate() {
            // DPDK programs transforms with rte_flow.
            if action.kind != ActionType::Queue && backend != InterfaceBackend::Dpdk {
                refuse(
                    flow_path.key("actions").index(j),
                    format!("action {} needs a NIC's flow engine; software steering only queues", action.kind.as_str()),
                );
            }
        }
    }
    for (i, _) in rx.queues.iter().enumerate().filter(|(_, q)| q.busy_poll_us.is_some()) {
        if backend != InterfaceBackend::AfXdp {
            refuse(
                rx_path.key("queues").index(i).key("busy_poll_us"),
                format!("busy_poll_us is our extension for engine af_xdp, not the {} backend", backend.as_str()),
            );
        }
    }
    let direct = |q: &Queue| q.poll_mode == PollMode::Direct;
    let udp_socket = backend == InterfaceBackend::Socket && transport == Some(Transport::Udp);
    for (i, _) in rx.queues.iter().enumerate().filter(|(_, q)| direct(q)) {
        let path = rx_path.key("queues").index(i).key("poll_mode");
        if !udp_socket {
            refuse(
                path,
                format!("direct polling exists here for UDP sockets only, not the {} backend", backend.as_str()),
            );
        } else if !rx.queues.iter().all(direct) {
            refuse(
                path,
                "one socket feeds every RX queue of an interface: make them all direct or all indirect".into(),
            );
        }
    }
}

fn tx_keys(
    iface: &Interface,
    tx_path: &YamlPath,
    backend: InterfaceBackend,
    refuse: &mut impl FnMut(YamlPath, String),
) {
    let Some(tx) = &iface.tx else { return };
    // DPDK programs them as egress rte_flow rules, or fails naming the PMD.
    if !tx.flows.is_empty() && backend != InterfaceBackend::Dpdk {
        refuse(tx_path.key("flows"), "TX flow actions (vlan_push, tunnel_encap) need a NIC's flow engine".into());
    }
    for (i, flow) in tx.flows.iter().enumerate().filter(|_| backend == InterfaceBackend::Dpdk) {
        let flow_path = tx_path.key("flows").index(i);
        for (j, action) in flow.action_list().iter().enumerate() {
            if action.dei == Some(1) {
                let at =
                    if flow.actions.is_some() { flow_path.key("actions").index(j) } else { flow_path.key("action") };
                refuse(
                    at.key("dei"),
                    "rte_flow has no action that sets a VLAN tag's DEI bit; set dei 0 or leave it out".into(),
                );
            }
        }
    }
    if tx.accurate_send {
        refuse(tx_path.key("accurate_send"), "time-scheduled send needs a ConnectX-7 class NIC".into());
    }
    for (i, q) in tx.queues.iter().enumerate() {
        let path = tx_path.key("queues").index(i);
        if q.poll_mode == PollMode::Direct {
            refuse(path.key("poll_mode"), "direct polling is for RX queues here; TX queues use a worker".into());
        }
    }
}
