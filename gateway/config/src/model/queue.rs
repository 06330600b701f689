//! RX and TX queues. Both directions share one struct; the TX-only keys
//! (`offloads`, `pacing_mbps`) are rejected on RX queues by validation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CpuCore, QueueCore};

/// One entry of `rx.queues` or `tx.queues`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Queue {
    /// Queue name.
    pub name: String,
    /// Queue id, used by flows and burst calls.
    pub id: u16,
    /// `indirect` (worker thread, default) or `direct` (application polls the NIC).
    #[serde(default)]
    pub poll_mode: PollMode,
    /// Worker core; required in indirect mode. `-1` (socket queues): a
    /// worker the kernel schedules anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_core: Option<QueueCore>,
    /// Packets per burst; required in indirect mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Memory region names, in segment order (two = header-data split).
    #[serde(default)]
    pub memory_regions: Vec<String>,
    /// Deliver a partial batch after this many microseconds; 0 = full batches only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_us: Option<u64>,
    /// TX only: hardware offloads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloads: Vec<TxOffload>,
    /// TX only: rate cap in Mb/s of L2 frame bytes; 0 = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_mbps: Option<u64>,
    /// RX only, and our extension for `engine: af_xdp` (DAQIRI has no such
    /// key): the worker busy-polls its socket's NAPI for up to this many
    /// microseconds per poll (`SO_BUSY_POLL` with `SO_PREFER_BUSY_POLL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll_us: Option<u32>,
}

impl Queue {
    /// `batch_size`, or 1 for direct-mode queues that have none.
    pub fn batch_size(&self) -> u32 {
        self.batch_size.unwrap_or(1)
    }

    /// The core its worker is pinned to: `None` when `cpu_core` is absent
    /// or -1 (unpinned).
    pub fn pinned_core(&self) -> Option<CpuCore> {
        self.cpu_core.and_then(QueueCore::pinned)
    }

    /// `timeout_us` with the default of 0 (full batches only).
    pub fn timeout_us(&self) -> u64 {
        self.timeout_us.unwrap_or(0)
    }
}

/// `poll_mode` of a queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PollMode {
    /// A worker thread polls the NIC and hands bursts over a ring.
    #[default]
    Indirect,
    /// The application polls the NIC queue itself (raw ibverbs only).
    Direct,
}

/// `offloads` entries of a TX queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TxOffload {
    /// Fill the source MAC address in hardware.
    TxEthSrc,
}
