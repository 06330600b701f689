//! Raw serde structs that mirror DAQIRI's YAML keys one to one.
//!
//! Nothing here is checked beyond its YAML type: a `Flow` may name a queue
//! that does not exist. [`crate::validate`] turns an [`EngineConfig`] into a
//! [`crate::ValidConfig`], the only form the engine accepts.

mod flow;
mod interface;
mod memory;
mod queue;
mod reorder;
mod scalar;

pub use flow::{
    ActionType, Ecpri, EthernetMatch, FlexItem, Flow, FlowAction, FlowClass, FlowMatch, Tunnel, TunnelType, parse_mac,
};
pub use interface::{
    DEFAULT_RUNTIME_FLOWS, Interface, RoceConfig, RoceIngest, RxConfig, SocketConfig, SocketMode, TransportMode,
    TxConfig,
};
pub use memory::{MemoryAccess, MemoryKind, MemoryRegion};
pub use queue::{PollMode, Queue, TxOffload};
pub use reorder::{
    BitField, DataTypes, Endianness, InputType, MissingAction, OutputType, ReorderConfig, ReorderEngine, ReorderMethod,
    ReorderType, SeqBatchNumber, SeqPacketsPerBatch,
};
pub use scalar::{CpuCore, PortMatch, QueueCore};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default size of the RX and TX burst metadata pools (`rx_meta_buffers`, `tx_meta_buffers`).
pub const DEFAULT_META_BUFFERS: u32 = 256;

/// A whole DAQIRI YAML document: the `daqiri:` section. Other top-level
/// sections (`bench_tx`, `socket_bench_server`, ...) belong to tools and are
/// kept aside by [`crate::Document`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DaqiriSection {
    /// The engine configuration.
    pub daqiri: DaqiriBody,
}

/// The body of the `daqiri:` key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DaqiriBody {
    /// Engine configuration (`daqiri.cfg`).
    pub cfg: EngineConfig,
}

/// `daqiri.cfg`: global settings, memory regions and interfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EngineConfig {
    /// Config format version; only `1` exists.
    pub version: u32,
    /// Core for control threads (never a queue worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_core: Option<CpuCore>,
    /// Packet I/O class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_type: Option<StreamType>,
    /// Implementation override for the stream type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,
    /// Engine log level (default `warn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LogLevel>,
    /// Extra debug output.
    #[serde(default)]
    pub debug: bool,
    /// `"sw"` loops TX of an interface back into its RX without a link.
    #[serde(default)]
    pub loopback: Loopback,
    /// Burst metadata pool size for TX (one entry per burst in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_meta_buffers: Option<u32>,
    /// Burst metadata pool size for RX (one entry per burst in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_meta_buffers: Option<u32>,
    /// Named buffer pools referenced by queues and reorder configs.
    #[serde(default)]
    pub memory_regions: Vec<MemoryRegion>,
    /// NIC ports or socket endpoints; the port id is the position in this list.
    #[serde(default)]
    pub interfaces: Vec<Interface>,
}

/// `stream_type`: the packet I/O class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamType {
    /// Raw Ethernet frames (DPDK or ibverbs).
    Raw,
    /// Linux sockets (UDP/TCP) or RoCE.
    Socket,
}

/// `engine`: implementation override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// DPDK poll-mode drivers.
    Dpdk,
    /// Linux kernel sockets.
    Socket,
    /// ibverbs (raw striding RQ or RoCE).
    Ibverbs,
    /// AF_XDP sockets on a netdev, flows steered by an XDP program: our
    /// extension of DAQIRI's `engine` (raw streams only).
    AfXdp,
}

impl EngineKind {
    /// Every engine a config may name.
    pub const ALL: [EngineKind; 4] = [EngineKind::Socket, EngineKind::Dpdk, EngineKind::Ibverbs, EngineKind::AfXdp];

    /// Its name in the config.
    pub const fn as_str(self) -> &'static str {
        match self {
            EngineKind::Dpdk => "dpdk",
            EngineKind::Socket => "socket",
            EngineKind::Ibverbs => "ibverbs",
            EngineKind::AfXdp => "af_xdp",
        }
    }
}

/// `log_level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Critical,
    Off,
}

/// `loopback`: `""` (off) or `"sw"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Loopback {
    /// No loopback: interfaces talk to real links.
    #[default]
    #[serde(rename = "")]
    Off,
    /// Software loopback: TX of an interface is received by its own RX.
    #[serde(rename = "sw")]
    Software,
    /// DAQIRI's hardware loopback: the ibverbs engine's mlx5 internal
    /// loopback on one port, no cable (refused by this build).
    #[serde(rename = "hw")]
    Hardware,
}

impl EngineConfig {
    /// A config of one stream type (and engine override) with every global
    /// key at DAQIRI's default and no regions or interfaces yet.
    pub fn new(stream_type: StreamType, engine: Option<EngineKind>) -> Self {
        Self {
            version: 1,
            master_core: None,
            stream_type: Some(stream_type),
            engine,
            log_level: None,
            debug: false,
            loopback: Loopback::Off,
            tx_meta_buffers: None,
            rx_meta_buffers: None,
            memory_regions: Vec::new(),
            interfaces: Vec::new(),
        }
    }

    /// `rx_meta_buffers` with DAQIRI's default applied.
    pub fn rx_meta_buffers(&self) -> u32 {
        self.rx_meta_buffers.unwrap_or(DEFAULT_META_BUFFERS)
    }

    /// `tx_meta_buffers` with DAQIRI's default applied.
    pub fn tx_meta_buffers(&self) -> u32 {
        self.tx_meta_buffers.unwrap_or(DEFAULT_META_BUFFERS)
    }

    /// The memory region called `name`.
    pub fn memory_region(&self, name: &str) -> Option<&MemoryRegion> {
        self.memory_regions.iter().find(|r| r.name == name)
    }

    /// The `tracing` filter `log_level` and `debug` ask for: `info` when
    /// unset, `critical` as `error`, and `debug: true` adds the engine's
    /// debug messages.
    pub fn log_filter(&self) -> String {
        let level = match self.log_level {
            None | Some(LogLevel::Info) => "info",
            Some(LogLevel::Trace) => "trace",
            Some(LogLevel::Debug) => "debug",
            Some(LogLevel::Warn) => "warn",
            Some(LogLevel::Error | LogLevel::Critical) => "error",
            Some(LogLevel::Off) => "off",
        };
        if self.debug && !matches!(level, "trace" | "debug") {
            format!("{level},daqiri=debug")
        } else {
            level.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    fn log_filter(yaml: &str) -> String {
        serde_yaml::from_str::<super::EngineConfig>(yaml).unwrap().log_filter()
    }

    #[test]
    fn log_level_and_debug_become_filters() {
        assert_eq!(log_filter("version: 1"), "info");
        assert_eq!(log_filter("version: 1\nlog_level: critical"), "error");
        assert_eq!(log_filter("version: 1\nlog_level: warn\ndebug: true"), "warn,daqiri=debug");
        assert_eq!(log_filter("version: 1\nlog_level: trace\ndebug: true"), "trace");
    }
}
