//! Interface rules: backend resolution, addresses, socket endpoints.

use crate::diagnostic::{Report, YamlPath};
use crate::endpoint::{Endpoint, Transport};
use crate::model::{EngineConfig, EngineKind, Interface, Loopback, RoceIngest, SocketConfig, SocketMode, StreamType};
use crate::valid::{InterfaceBackend, Link, SocketEndpoints};

use super::context::InterfaceCtx;
use super::lists::duplicates;
use super::{flow, queue, reorder};

/// Checks every interface; returns what each resolved to (`None` where it did not).
pub(super) fn check_interfaces(config: &EngineConfig, report: &mut Report) -> Vec<Option<Link>> {
    let list = YamlPath::cfg().key("interfaces");
    duplicates(config.interfaces.iter().map(|i| &i.name), &list, "name", "interface name", report);
    config
        .interfaces
        .iter()
        .enumerate()
        .map(|(i, iface)| {
            let path = list.index(i);
            let endpoints = iface
                .socket_config
                .as_ref()
                .and_then(|s| socket_endpoints(config, (s, is_ingest(iface)), &path.key("socket_config"), report));
            let backend = resolve_backend(config, iface, endpoints.as_ref(), &path, report);
            check_address(config, iface, backend, &path, report);
            if iface.roce_config.is_some() && backend != InterfaceBackend::Roce {
                report.error(&path.key("roce_config"), "roce_config applies only to interfaces with roce:// endpoints");
            }
            if let Some(ingest) = iface.roce_config.as_ref().and_then(|r| r.ingest.as_ref()) {
                check_roce_ingest(iface, ingest, &path, report);
            }
            if iface.rx.is_none() && iface.tx.is_none() {
                report.warn(&path, format!("interface \"{}\" has neither rx nor tx queues", iface.name));
            }
            let ctx = InterfaceCtx { config, iface, backend, endpoints, path };
            queue::check_queues(&ctx, report);
            flow::check_rx_flows(&ctx, report);
            flow::check_tx_flows(&ctx, report);
            reorder::check_reorder_configs(&ctx, report);
            check_raw_only_features(&ctx, report);
            Link::resolve(backend, endpoints, &iface.address)
        })
        .collect()
}

/// An ingest port only receives, from the peer its `ingest` names: no
/// connection to make, nothing to send.
fn check_roce_ingest(iface: &Interface, ingest: &RoceIngest, path: &YamlPath, report: &mut Report) {
    let at = path.key("roce_config").key("ingest");
    if ![256, 512, 1024, 2048, 4096].contains(&ingest.mtu) {
        report.error(&at.key("mtu"), format!("{} is no RDMA path MTU; valid: 256, 512, 1024, 2048, 4096", ingest.mtu));
    }
    if let Some(socket) = &iface.socket_config {
        if socket.mode != SocketMode::Server {
            report.error(
                &path.key("socket_config").key("mode"),
                "an ingest port waits for its sender: mode server (the peer is roce_config.ingest.peer_ip)",
            );
        }
        if socket.remote_addr.is_some() || socket.remote_ip.is_some() {
            report.error(
                &path.key("socket_config").key("remote_addr"),
                "an ingest port connects to no one: its sender is roce_config.ingest.peer_ip",
            );
        }
    }
    if iface.tx.is_some() {
        report.error(&path.key("tx"), "an ingest port only receives: its queue pair never sends");
    }
    if iface.rx.as_ref().is_none_or(|rx| rx.queues.len() != 1) {
        report.error(&path.key("rx").key("queues"), "an ingest port has one RX queue: the ring its sender writes");
    }
}

fn resolve_backend(
    config: &EngineConfig,
    iface: &Interface,
    endpoints: Option<&SocketEndpoints>,
    path: &YamlPath,
    report: &mut Report,
) -> InterfaceBackend {
    let cfg = YamlPath::cfg();
    let roce = endpoints.is_some_and(|e| e.transport == Transport::Roce);
    let stream_type = config.stream_type.or(match config.engine {
        Some(EngineKind::Dpdk | EngineKind::AfXdp) => Some(StreamType::Raw),
        Some(EngineKind::Socket) => Some(StreamType::Socket),
        _ if iface.socket_config.is_some() => Some(StreamType::Socket),
        _ => None,
    });
    match stream_type {
        Some(StreamType::Raw) => {
            if iface.socket_config.is_some() {
                report.error(
                    &path.key("socket_config"),
                    "socket_config applies to stream_type: socket; raw interfaces use address (PCIe BDF or netdev)",
                );
            }
            match config.engine {
                Some(EngineKind::Socket) => {
                    report.error(
                        &cfg.key("engine"),
                        "engine \"socket\" cannot drive stream_type raw; valid: dpdk (default), ibverbs, af_xdp",
                    );
                    InterfaceBackend::Dpdk
                }
                Some(EngineKind::Ibverbs) => InterfaceBackend::IbverbsRaw,
                _ if config.loopback == Loopback::Software => InterfaceBackend::SoftwareLoopback,
                Some(EngineKind::AfXdp) => InterfaceBackend::AfXdp,
                _ => InterfaceBackend::Dpdk,
            }
        }
        Some(StreamType::Socket) => {
            if iface.socket_config.is_none() {
                report.error(
                    &path.key("socket_config"),
                    "socket interfaces need socket_config with mode and local_addr/remote_addr",
                );
            }
            if let Some(kind @ (EngineKind::Dpdk | EngineKind::AfXdp)) = config.engine {
                let name = if kind == EngineKind::Dpdk { "dpdk" } else { "af_xdp" };
                report.error(
                    &cfg.key("engine"),
                    format!(
                        "engine \"{name}\" cannot drive stream_type socket; valid: socket (default), ibverbs (RoCE)"
                    ),
                );
            }
            if roce { InterfaceBackend::Roce } else { InterfaceBackend::Socket }
        }
        None => {
            report.error(&cfg.key("stream_type"), "stream_type is missing; valid: raw, socket");
            InterfaceBackend::Dpdk
        }
    }
}

fn check_address(
    config: &EngineConfig,
    iface: &Interface,
    backend: InterfaceBackend,
    path: &YamlPath,
    report: &mut Report,
) {
    let address = iface.address.trim();
    let key = path.key("address");
    if crate::placeholder::is_placeholder(address) {
        // Reported with every other placeholder (Document::validate); the
        // rest of the interface is still checked.
        return;
    }
    match backend {
        InterfaceBackend::SoftwareLoopback => {}
        InterfaceBackend::Dpdk | InterfaceBackend::IbverbsRaw => {
            if address.is_empty() {
                report.error(&key, "raw interfaces need an address: a PCIe BDF such as 0000:3b:00.0 or a netdev name");
            }
        }
        InterfaceBackend::AfXdp => {
            // A device plugin's resource: the gateway pod resolves it to its netdev first.
            if !crate::device_resource::is_device_resource(address)
                && let Err(why) = netdev_name(address)
            {
                report.error(
                    &key,
                    format!("engine af_xdp needs a netdev name here (such as eth1 or a VF's ens1f0v3): {why}"),
                );
            }
        }
        InterfaceBackend::Socket | InterfaceBackend::Roce => {
            if !address.is_empty() && address.parse::<std::net::IpAddr>().is_err() {
                report.error(
                    &key,
                    format!("\"{address}\" is not an IP address; socket and RoCE interfaces give their IP here"),
                );
            }
        }
    }
    if config.loopback == Loopback::Software && backend != InterfaceBackend::SoftwareLoopback && !address.is_empty() {
        report.warn(&key, "ignored under software loopback");
    }
}

/// Whether `name` can be a Linux network interface name (IFNAMSIZ, no `/`,
/// no whitespace or `:`, not `.` or `..`).
fn netdev_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the address is empty".into());
    }
    if name.len() > 15 {
        return Err(format!("\"{name}\" is longer than the 15 bytes a netdev name has"));
    }
    if name == "." || name == ".." || name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace()) {
        return Err(format!("\"{name}\" is not a netdev name (no '/', ':' or spaces)"));
    }
    Ok(())
}

/// Whether `iface` is a RoCE ingest port (`roce_config.ingest`).
fn is_ingest(iface: &Interface) -> bool {
    iface.roce_config.as_ref().is_some_and(|r| r.ingest.is_some())
}

/// The endpoints of `socket` (an ingest port's, if `ingest`: its sender
/// reaches its queue pair, not a port, so it has none).
fn socket_endpoints(
    config: &EngineConfig,
    (socket, ingest): (&SocketConfig, bool),
    path: &YamlPath,
    report: &mut Report,
) -> Option<SocketEndpoints> {
    let legacy_transport = match config.engine {
        Some(EngineKind::Ibverbs) => Some(Transport::Roce),
        Some(EngineKind::Socket) => Some(Transport::Udp),
        _ => None,
    };
    let mut side = |uri: &Option<String>, ip: &Option<String>, port: Option<u16>, prefix: &str| -> Option<Endpoint> {
        let uri_key = path.key(&format!("{prefix}_addr"));
        match (uri, ip.is_some() || port.is_some()) {
            (Some(_), true) => {
                report.error(
                    &uri_key,
                    format!("give either {prefix}_addr or the legacy {prefix}_ip/{prefix}_port, not both"),
                );
                None
            }
            (Some(text), false) => text.parse::<Endpoint>().map_err(|e| report.error(&uri_key, e)).ok(),
            (None, true) => {
                let Some(transport) = legacy_transport else {
                    report.error(
                        &path.key(&format!("{prefix}_ip")),
                        format!("legacy {prefix}_ip/{prefix}_port need `engine` (socket or ibverbs) to name the transport; prefer {prefix}_addr: udp://IP:PORT"),
                    );
                    return None;
                };
                let ip_key = path.key(&format!("{prefix}_ip"));
                let ip = ip.as_deref().unwrap_or_default();
                // A placeholder (reported on its own) stands in as a documentation
                // address (RFC 5737), so the rest of the interface is still checked.
                let ip = if crate::placeholder::is_placeholder(ip) { "192.0.2.1" } else { ip };
                let ip = ip.parse().map_err(|_| report.error(&ip_key, "not an IP address")).ok()?;
                Some(Endpoint { transport, ip, port })
            }
            (None, false) => None,
        }
    };
    let local = side(&socket.local_addr, &socket.local_ip, socket.local_port, "local");
    let remote = side(&socket.remote_addr, &socket.remote_ip, socket.remote_port, "remote");
    let transport = match (local, remote) {
        (Some(l), Some(r)) if l.transport != r.transport => {
            report.error(
                &path.key("remote_addr"),
                format!(
                    "scheme {} does not match local_addr's {}; both ends use one transport",
                    r.transport.scheme(),
                    l.transport.scheme()
                ),
            );
            return None;
        }
        (Some(e), _) | (None, Some(e)) => e.transport,
        (None, None) => {
            let needed = if socket.mode == SocketMode::Server { "local_addr" } else { "remote_addr" };
            report.error(&path.key(needed), format!("{:?} mode needs {needed}", socket.mode).to_lowercase());
            return None;
        }
    };
    let needs_port = |e: &Option<Endpoint>, key: &str, report: &mut Report| {
        if let Some(e) = e
            && e.port.is_none()
            && e.transport != Transport::Roce
        {
            report.error(
                &path.key(key),
                format!("{} endpoints need a port: {}://IP:PORT", e.transport.scheme(), e.transport.scheme()),
            );
        }
    };
    needs_port(&local, "local_addr", report);
    needs_port(&remote, "remote_addr", report);
    match socket.mode {
        SocketMode::Server if local.is_none() => {
            report.error(&path.key("local_addr"), "server mode needs local_addr (the address to bind)");
        }
        SocketMode::Server if ingest && local.is_some_and(|l| l.port.is_some()) => {
            report.error(
                &path.key("local_addr"),
                "an ingest port's sender writes to its queue pair, not to a port: give roce://IP",
            );
        }
        SocketMode::Server if !ingest && local.is_some_and(|l| l.port.is_none()) => {
            report.error(&path.key("local_addr"), "server mode needs a port in local_addr");
        }
        SocketMode::Server if local.is_some_and(|l| l.port == Some(0)) => {
            report.error(
                &path.key("local_addr"),
                "port 0 binds a port the kernel picks at random, which no sender can know; give the port they send to",
            );
        }
        SocketMode::Client if transport == Transport::Roce && local.is_none() => {
            report.error(&path.key("local_addr"), "RoCE clients need local_addr (roce://IP) to pick the RDMA device");
        }
        SocketMode::Client if transport != Transport::Roce && remote.is_none() => {
            report.error(
                &path.key("remote_addr"),
                format!("{} client mode needs remote_addr (the server to connect to)", transport.scheme()),
            );
        }
        _ => {}
    }
    if remote.is_some_and(|r| r.port == Some(0)) {
        report.error(&path.key("remote_addr"), "port 0 cannot be sent or connected to; give the peer's port");
    }
    if socket.max_payload_size == Some(0) {
        report.error(&path.key("max_payload_size"), "must be at least 1 byte");
    }
    Some(SocketEndpoints { mode: socket.mode, transport, local, remote })
}

fn check_raw_only_features(ctx: &InterfaceCtx<'_>, report: &mut Report) {
    if ctx.is_raw() {
        return;
    }
    if let Some(rx) = &ctx.iface.rx {
        if rx.hardware_timestamps {
            report.error(
                &ctx.path.key("rx").key("hardware_timestamps"),
                "hardware timestamps exist only for raw streams (stream_type: raw)",
            );
        }
        if rx.dynamic_flow_capacity > 0 {
            report.error(
                &ctx.path.key("rx").key("dynamic_flow_capacity"),
                "dynamic flows exist only for raw streams; set 0 or remove it",
            );
        }
    }
    if let Some(tx) = &ctx.iface.tx
        && tx.accurate_send
    {
        report.error(
            &ctx.path.key("tx").key("accurate_send"),
            "accurate send is a raw-stream NIC feature (ConnectX-7+); remove it for socket streams",
        );
    }
}
