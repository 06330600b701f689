//! `DaqiriPort`: one interface of the gateway config, on the nodes its
//! selector picks.

use std::collections::BTreeMap;

use daqiri_config::model::{MemoryAccess, MemoryKind, SocketMode, TransportMode};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::ResourceStatus;

/// One NIC port or socket endpoint, with its memory regions and queues.
#[derive(CustomResource, KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "daqiri.nvidia.com",
    version = "v1alpha1",
    kind = "DaqiriPort",
    namespaced,
    status = "ResourceStatus",
    shortname = "dqport",
    shortname = "dqp",
    category = "daqiri",
    printcolumn = r#"{"name":"Backend","type":"string","jsonPath":".spec.backend"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"RX pps","type":"number","jsonPath":".status.rxPacketsPerSecond"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    cel
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.backend == 'socket' || has(self.device) || self.backend == 'rdma'").message("dpdk and af_xdp ports need spec.device (pciAddress, netdev or resourceName)"))]
#[x_kube(validation = Rule::new("self.backend in ['dpdk', 'af_xdp'] || has(self.socket)").message("socket and rdma ports need spec.socket (mode and addresses)"))]
#[x_kube(validation = Rule::new("!(self.backend in ['dpdk', 'af_xdp']) || !has(self.socket)").message("spec.socket applies to socket and rdma ports, not dpdk or af_xdp"))]
#[x_kube(validation = Rule::new("self.backend != 'af_xdp' || !has(self.device) || !has(self.device.pciAddress)").message("af_xdp ports open a netdev: give device.netdev or device.resourceName"))]
#[x_kube(validation = Rule::new("self.backend == 'rdma' || !has(self.roce)").message("spec.roce applies to rdma ports only"))]
#[x_kube(validation = Rule::new("!has(self.roce) || !has(self.roce.ingest) || (has(self.socket) && self.socket.mode == 'server' && !has(self.socket.remoteAddr) && size(self.rxQueues) == 1 && (!has(self.txQueues) || size(self.txQueues) == 0))").message("an ingest port (roce.ingest) is a server with one rxQueue, no txQueues and no remoteAddr: its sender was programmed with the ring's address"))]
#[x_kube(validation = Rule::new("!has(self.roce) || !has(self.roce.ingest) || size(self.rxQueues) != 1 || self.memoryRegions.exists(r, r.name == self.rxQueues[0].memoryRegions[0] && has(r.access) && 'rdma_write' in r.access)").message("an ingest port's ring (its rxQueue's region) needs rdma_write in its access list: the sender writes it"))]
#[x_kube(validation = Rule::new("self.backend == 'rdma' || self.memoryRegions.all(r, !has(r.access))").message("memoryRegions[].access is a region's registration with an RDMA device: rdma ports only"))]
#[x_kube(validation = Rule::new("self.rxQueues.all(q, self.rxQueues.exists_one(r, r.id == q.id))").message("rxQueues ids must be unique"))]
#[x_kube(validation = Rule::new("self.rxQueues.all(q, q.memoryRegions.all(m, self.memoryRegions.exists(r, r.name == m)))").message("every rxQueues[].memoryRegions entry must name one of spec.memoryRegions"))]
pub struct DaqiriPortSpec {
    /// Nodes whose gateway runs this port (all gateway nodes when empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Interface name in the gateway config and in metrics (`daqiri_interface_name`); defaults to the resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub interface_name: Option<String>,
    /// How packets are received.
    pub backend: PortBackend,
    /// The NIC: a PCIe address, a netdev name or an SR-IOV device-plugin resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSpec>,
    /// Socket endpoints (socket and rdma backends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<SocketSpec>,
    /// RoCE transport (rdma backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roce: Option<RoceSpec>,
    /// Buffer pools of this port (named `<interface>-<name>` in the gateway config).
    #[schemars(length(min = 1, max = 16))]
    pub memory_regions: Vec<MemoryRegionSpec>,
    /// Receive queues.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub rx_queues: Vec<QueueSpec>,
    /// Transmit queues.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub tx_queues: Vec<QueueSpec>,
    /// Drop packets that match no flow instead of delivering them to queue 0.
    #[serde(default)]
    pub flow_isolation: bool,
}

/// The receive path of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PortBackend {
    /// Kernel UDP/TCP sockets.
    Socket,
    /// DPDK poll-mode driver on the device.
    Dpdk,
    /// AF_XDP sockets on the device's netdev.
    #[serde(rename = "af_xdp")]
    AfXdp,
    /// RoCE through ibverbs.
    Rdma,
}

/// Where the NIC is; exactly one field.
#[derive(KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.pciAddress), has(self.netdev), has(self.resourceName)].filter(x, x).size() == 1").message("give exactly one of pciAddress, netdev, resourceName"))]
#[x_kube(validation = Rule::new("!has(self.resourceIndex) || has(self.resourceName)").message("resourceIndex applies to resourceName"))]
pub struct DeviceSpec {
    /// PCIe address, e.g. `0000:3b:00.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"))]
    pub pci_address: Option<String>,
    /// Kernel netdev name, e.g. `ens1f0np0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 15))]
    pub netdev: Option<String>,
    /// SR-IOV device-plugin resource, e.g. `nvidia.com/cx7_vf`: the gateway pod
    /// requests one and resolves it to the PCIe address it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+$"))]
    pub resource_name: Option<String>,
    /// Which of the pod's devices of that resource (0 = first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_index: Option<u32>,
}

/// Socket endpoints as DAQIRI URIs.
#[derive(KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.mode != 'server' || has(self.localAddr)").message("server mode needs localAddr"))]
#[x_kube(validation = Rule::new("self.mode != 'client' || has(self.remoteAddr)").message("client mode needs remoteAddr"))]
pub struct SocketSpec {
    /// `server` binds `localAddr`; `client` connects to `remoteAddr`.
    pub mode: SocketMode,
    /// `udp://ip:port`, `tcp://ip:port` or `roce://ip[:port]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(udp|tcp|roce)://"))]
    pub local_addr: Option<String>,
    /// Peer URI, same forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(udp|tcp|roce)://"))]
    pub remote_addr: Option<String>,
    /// Largest payload per message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_payload_size: Option<u32>,
}

/// RoCE settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoceSpec {
    /// RC or UC: the transport of the `rdma_cm` connection, or of the ingest ring.
    pub transport_mode: TransportMode,
    /// The port's RX queue is an instrument's ring rather than an `rdma_cm`
    /// connection (`roce_config.ingest`): what the sender's queue pair is.
    /// The ring's QPN, rkey, GID, base and page size and count, which the
    /// sender must be programmed with, are in the gateway's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest: Option<RoceIngestSpec>,
}

/// The sender of an ingest ring, programmed out of band (an FPGA, a sensor).
#[derive(KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.mtu in [256, 512, 1024, 2048, 4096]").message("mtu is 256, 512, 1024, 2048 or 4096"))]
pub struct RoceIngestSpec {
    /// The sender's IPv4 address (its RoCE v2 GID follows from it).
    pub peer_ip: std::net::Ipv4Addr,
    /// The sender's queue pair number (24 bits).
    #[schemars(range(min = 1, max = 16_777_215))]
    pub peer_qpn: u32,
    /// The first packet sequence number the sender uses (24 bits).
    #[serde(default)]
    #[schemars(range(max = 16_777_215))]
    pub peer_psn: u32,
    /// Path MTU in bytes.
    #[serde(default = "default_ingest_mtu")]
    #[schemars(range(min = 256, max = 4096))]
    pub mtu: u32,
}

fn default_ingest_mtu() -> u32 {
    1024
}

/// One buffer pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRegionSpec {
    /// Name, unique within the port.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// `host`, `host_pinned`, `huge` or `device` (GPU).
    pub kind: MemoryKind,
    /// Buffers in the pool.
    #[schemars(range(min = 1))]
    pub num_bufs: u32,
    /// Bytes per buffer.
    #[schemars(range(min = 64))]
    pub buf_size: u64,
    /// NUMA node (host kinds) or GPU index (`device`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<u32>,
    /// What an RDMA device may do with the region once registered (rdma
    /// ports): `local`, `rdma_read`, `rdma_write`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub access: Vec<MemoryAccess>,
}

/// One RX or TX queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Queue name.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Queue id, what flows steer to.
    pub id: u16,
    /// CPU core of the queue's worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_core: Option<u32>,
    /// Packets per burst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub batch_size: Option<u32>,
    /// Microseconds before a partial burst is delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_us: Option<u64>,
    /// Names of this port's memory regions (two for header-data split).
    #[schemars(length(min = 1, max = 2))]
    pub memory_regions: Vec<String>,
}
