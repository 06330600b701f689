//! Memory regions: named, fixed-size buffer pools.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `memory_regions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryRegion {
    /// Unique name, referenced by queues and reorder configs.
    pub name: String,
    /// Where the buffers live.
    pub kind: MemoryKind,
    /// GPU id for `device`, NUMA node otherwise.
    #[serde(default)]
    pub affinity: u32,
    /// RDMA access rights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<MemoryAccess>,
    /// Number of buffers in the pool.
    pub num_bufs: u32,
    /// Bytes per buffer (segment size under header-data split).
    pub buf_size: u64,
}

impl MemoryRegion {
    /// Total bytes the pool occupies.
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.num_bufs).saturating_mul(self.buf_size)
    }
}

/// `kind` of a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// CPU hugepages.
    Huge,
    /// GPU VRAM.
    Device,
    /// Pinned host memory from `cudaHostAlloc`.
    HostPinned,
    /// Plain CPU memory.
    Host,
}

impl MemoryKind {
    /// Whether the CPU can read and write the buffers directly.
    pub const fn cpu_addressable(self) -> bool {
        !matches!(self, MemoryKind::Device)
    }

    /// Whether CUDA kernels can address the buffers.
    pub const fn gpu_addressable(self) -> bool {
        matches!(self, MemoryKind::Device | MemoryKind::HostPinned)
    }

    /// The YAML spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Huge => "huge",
            MemoryKind::Device => "device",
            MemoryKind::HostPinned => "host_pinned",
            MemoryKind::Host => "host",
        }
    }
}

/// One entry of a region's `access` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum MemoryAccess {
    Local,
    RdmaRead,
    RdmaWrite,
}
