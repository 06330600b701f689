//! CRD specs to DAQIRI model types, field by field. Memory regions are
//! global in a DAQIRI config, so each port's regions are prefixed with its
//! interface name (`udp-rx-payload`) to keep ports apart.

use daqiri_config::EngineConfig;
use daqiri_config::device_resource::PREFIX;
use daqiri_config::model::{
    ActionType, BitField, CpuCore, DataTypes, EngineKind, EthernetMatch, Flow, FlowAction, FlowMatch, Interface,
    MemoryRegion, PollMode, PortMatch, Queue, QueueCore, ReorderConfig, ReorderMethod, RoceConfig, RoceIngest,
    RxConfig, SeqBatchNumber, SeqPacketsPerBatch, SocketConfig, StreamType, TxConfig,
};
use kube::ResourceExt;

use crate::crd::{BitFieldSpec, DaqiriFlow, DaqiriPort, DeviceSpec, PortBackend, QueueSpec, ReorderSpec};

/// The interface name a port gets in the config and in metrics.
pub fn interface_name(port: &DaqiriPort) -> String {
    port.spec.interface_name.clone().unwrap_or_else(|| port.name_any())
}

/// The global part of a config for ports of `backend`.
pub fn engine_config(backend: PortBackend) -> EngineConfig {
    let (stream_type, engine) = match backend {
        PortBackend::Socket | PortBackend::Rdma => (StreamType::Socket, None),
        PortBackend::Dpdk => (StreamType::Raw, Some(EngineKind::Dpdk)),
        PortBackend::AfXdp => (StreamType::Raw, Some(EngineKind::AfXdp)),
    };
    EngineConfig::new(stream_type, engine)
}

/// A port's memory regions, named `<interface>-<region>`.
pub fn memory_regions(port: &DaqiriPort) -> Vec<MemoryRegion> {
    let iface = interface_name(port);
    port.spec
        .memory_regions
        .iter()
        .map(|r| MemoryRegion {
            name: region_name(&iface, &r.name),
            kind: r.kind,
            affinity: r.affinity.unwrap_or(0),
            access: r.access.clone(),
            num_bufs: r.num_bufs,
            buf_size: r.buf_size,
        })
        .collect()
}

fn region_name(iface: &str, region: &str) -> String {
    format!("{iface}-{region}")
}

/// The interface of a port, with `flows` as its RX flows and reorder configs.
pub fn interface(port: &DaqiriPort, flows: &[&DaqiriFlow]) -> Interface {
    let iface = interface_name(port);
    let spec = &port.spec;
    let queues = |list: &[QueueSpec]| list.iter().map(|q| queue(&iface, q)).collect::<Vec<_>>();
    let rx = RxConfig {
        queues: queues(&spec.rx_queues),
        flows: flows.iter().map(|f| flow(f)).collect(),
        flow_isolation: spec.flow_isolation,
        reorder_configs: flows.iter().filter_map(|f| f.spec.reorder.as_ref().map(|r| reorder(&iface, f, r))).collect(),
        ..RxConfig::default()
    };
    let tx = (!spec.tx_queues.is_empty()).then(|| TxConfig { queues: queues(&spec.tx_queues), ..TxConfig::default() });
    Interface {
        name: iface,
        address: spec.device.as_ref().map(address).unwrap_or_default(),
        socket_config: spec.socket.as_ref().map(|s| SocketConfig {
            mode: s.mode,
            local_addr: s.local_addr.clone(),
            remote_addr: s.remote_addr.clone(),
            local_ip: None,
            local_port: None,
            remote_ip: None,
            remote_port: None,
            max_payload_size: s.max_payload_size,
        }),
        roce_config: spec.roce.as_ref().map(|r| RoceConfig {
            transport_mode: r.transport_mode,
            ingest: r.ingest.as_ref().map(|i| RoceIngest {
                peer_ip: i.peer_ip.into(),
                peer_qpn: i.peer_qpn,
                peer_psn: i.peer_psn,
                mtu: i.mtu,
            }),
        }),
        rx: (!spec.rx_queues.is_empty()).then_some(rx),
        tx,
    }
}

/// The device's address; a device plugin's resource is resolved on the
/// node, by the gateway pod that was given one.
fn address(device: &DeviceSpec) -> String {
    match (&device.pci_address, &device.netdev, &device.resource_name) {
        (Some(pci), _, _) => pci.clone(),
        (None, Some(netdev), _) => netdev.clone(),
        (None, None, Some(resource)) => match device.resource_index {
            Some(index) if index > 0 => format!("{PREFIX}{resource}#{index}"),
            _ => format!("{PREFIX}{resource}"),
        },
        (None, None, None) => String::new(),
    }
}

fn queue(iface: &str, q: &QueueSpec) -> Queue {
    Queue {
        name: q.name.clone(),
        id: q.id,
        poll_mode: PollMode::default(),
        cpu_core: q.cpu_core.map(|c| QueueCore::Pinned(CpuCore(c))),
        batch_size: q.batch_size,
        memory_regions: q.memory_regions.iter().map(|m| region_name(iface, m)).collect(),
        timeout_us: q.timeout_us,
        offloads: Vec::new(),
        pacing_mbps: None,
        busy_poll_us: None,
    }
}

fn flow(f: &DaqiriFlow) -> Flow {
    let spec = &f.spec;
    let port_match = |text: &Option<String>| {
        // The CRD pattern admits only `N` or `N-M`; the model's parser gives the range.
        text.as_ref().and_then(|t| serde_json::from_value::<PortMatch>(serde_json::Value::String(t.clone())).ok())
    };
    Flow {
        name: f.name_any(),
        id: spec.id,
        action: Some(FlowAction {
            kind: ActionType::Queue,
            id: spec.queue,
            ids: spec.queues.clone(),
            vlan_id: None,
            pcp: None,
            dei: None,
            ethertype: None,
            tunnel: None,
        }),
        actions: None,
        matches: Some(FlowMatch {
            udp_src: port_match(&spec.matches.udp_src),
            udp_dst: port_match(&spec.matches.udp_dst),
            ipv4_len: spec.matches.ipv4_len,
            ethernet: spec.matches.ethernet.as_ref().map(|e| EthernetMatch { src: e.src.clone(), dst: e.dst.clone() }),
            ..FlowMatch::default()
        }),
    }
}

fn bit_field(b: BitFieldSpec) -> BitField {
    BitField { bit_offset: b.bit_offset, bit_width: b.bit_width }
}

fn reorder(iface: &str, f: &DaqiriFlow, r: &ReorderSpec) -> ReorderConfig {
    let sequence_number = bit_field(r.sequence_number);
    let method = match (r.packets_per_batch, r.batch_number) {
        (Some(packets_per_batch), _) => ReorderMethod {
            seq_packets_per_batch: Some(SeqPacketsPerBatch { sequence_number, packets_per_batch }),
            ..ReorderMethod::default()
        },
        (None, Some(batch)) => ReorderMethod {
            seq_batch_number: Some(SeqBatchNumber { sequence_number, batch_number: bit_field(batch) }),
            ..ReorderMethod::default()
        },
        (None, None) => ReorderMethod::default(),
    };
    ReorderConfig {
        name: f.name_any(),
        reorder_type: r.kind,
        memory_region: region_name(iface, &r.memory_region),
        payload_byte_offset: r.payload_byte_offset,
        flow_ids: vec![f.spec.id],
        data_types: r.data_types.as_ref().map(|d| DataTypes {
            input_type: d.input_type,
            output_type: d.output_type,
            endianness: d.endianness,
        }),
        method,
        reorder_engine: None,
        missing_action: r.missing_action,
        // Upstream's keys for the NIC's reorder, which a DaqiriFlow does not offer.
        cyclic_sequence: None,
        packet_size: None,
    }
}
