//! Interfaces: one NIC port or socket endpoint each, with its RX and TX sides.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FlexItem, Flow, Queue, ReorderConfig};

/// One entry of `interfaces`. The port id is its position in the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interface {
    /// Interface name, looked up by `get_port_id`.
    pub name: String,
    /// PCIe BDF or netdev (raw), IP address (socket/RoCE), `loopback` (sw loopback).
    #[serde(default)]
    pub address: String,
    /// Socket or RoCE endpoint role and addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_config: Option<SocketConfig>,
    /// RoCE transport settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roce_config: Option<RoceConfig>,
    /// Receive side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx: Option<RxConfig>,
    /// Transmit side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<TxConfig>,
}

/// `socket_config` of an interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SocketConfig {
    /// Connection role.
    pub mode: SocketMode,
    /// Local bind endpoint URI (`udp://ip:port`, `tcp://ip:port`, `roce://ip[:port]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_addr: Option<String>,
    /// Remote peer endpoint URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_addr: Option<String>,
    /// Legacy local IP (with an `engine` override giving the transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_ip: Option<String>,
    /// Legacy local port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_port: Option<u16>,
    /// Legacy remote IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_ip: Option<String>,
    /// Legacy remote port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_port: Option<u16>,
    /// Largest payload per message the application sends or expects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_payload_size: Option<u32>,
}

/// `socket_config.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SocketMode {
    /// Connects to `remote_addr`.
    Client,
    /// Binds `local_addr` and waits for peers.
    Server,
}

/// `roce_config` of an interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RoceConfig {
    /// RDMA transport.
    pub transport_mode: TransportMode,
    /// Our extension: the RX queue is an instrument's ring, its queue pair
    /// set up by hand instead of through `rdma_cm` (DAQIRI has no such key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest: Option<RoceIngest>,
}

/// `roce_config.ingest`: a sender programmed out of band (an FPGA, a
/// sensor) writes into the RX queue's region, a ring of pages registered
/// for remote write at address 0, and ends each page with an RDMA WRITE
/// with immediate whose immediate is the page's sequence number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RoceIngest {
    /// The sender's IP address (its RoCE v2 GID follows from it).
    pub peer_ip: std::net::IpAddr,
    /// The sender's queue pair number.
    pub peer_qpn: u32,
    /// The first packet sequence number the sender uses.
    #[serde(default)]
    pub peer_psn: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    #[serde(default = "default_ingest_mtu")]
    pub mtu: u32,
}

fn default_ingest_mtu() -> u32 {
    1024
}

/// `roce_config.transport_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TransportMode {
    /// Reliable Connected.
    #[serde(rename = "RC")]
    Rc,
    /// Unreliable Connected.
    #[serde(rename = "UC")]
    Uc,
}

/// `rx` of an interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RxConfig {
    /// Receive queues.
    #[serde(default)]
    pub queues: Vec<Queue>,
    /// Static flow rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<Flow>,
    /// Flexible parser items for custom matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flex_items: Vec<FlexItem>,
    /// Only matched packets reach queues; the rest go back to the kernel.
    #[serde(default)]
    pub flow_isolation: bool,
    /// Flows that may be added at runtime; 0 (DAQIRI's default: no DPDK
    /// template table) leaves them allowed, up to [`DEFAULT_RUNTIME_FLOWS`].
    #[serde(default)]
    pub dynamic_flow_capacity: u32,
    /// Per-packet NIC timestamps.
    #[serde(default)]
    pub hardware_timestamps: bool,
    /// Reorder/aggregation plans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reorder_configs: Vec<ReorderConfig>,
}

/// How many flows an interface takes at runtime when its
/// `dynamic_flow_capacity` is 0: DAQIRI still allows dynamic flows there
/// (without a template table), and a bound keeps an API client from growing
/// the flow table without end.
pub const DEFAULT_RUNTIME_FLOWS: u32 = 1024;

impl RxConfig {
    /// How many flows may be added at runtime: `dynamic_flow_capacity`, or
    /// [`DEFAULT_RUNTIME_FLOWS`] when that is 0.
    pub fn runtime_flow_limit(&self) -> u32 {
        match self.dynamic_flow_capacity {
            0 => DEFAULT_RUNTIME_FLOWS,
            capacity => capacity,
        }
    }
}

/// `tx` of an interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TxConfig {
    /// Transmit queues.
    #[serde(default)]
    pub queues: Vec<Queue>,
    /// Hardware transform rules (VLAN push, tunnel encap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<Flow>,
    /// Time-scheduled transmission (ConnectX-7+).
    #[serde(default)]
    pub accurate_send: bool,
}

impl Interface {
    /// RX queues, empty when the interface has no `rx`.
    pub fn rx_queues(&self) -> &[Queue] {
        self.rx.as_ref().map_or(&[], |rx| &rx.queues)
    }

    /// TX queues, empty when the interface has no `tx`.
    pub fn tx_queues(&self) -> &[Queue] {
        self.tx.as_ref().map_or(&[], |tx| &tx.queues)
    }

    /// RX flows, empty when the interface has no `rx`.
    pub fn rx_flows(&self) -> &[Flow] {
        self.rx.as_ref().map_or(&[], |rx| &rx.flows)
    }
}
