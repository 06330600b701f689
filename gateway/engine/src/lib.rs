//! `daqiri`: a packet-acquisition engine that speaks NVIDIA DAQIRI's
//! configuration and concepts, in safe Rust.
//!
//! The lifecycle mirrors DAQIRI's API guide:
//!
//! 1. **Init** an [`Engine`] from a YAML file or a validated
//!    [`daqiri_config::ValidConfig`]: memory regions are allocated, sockets or
//!    devices opened, workers started.
//! 2. **Receive**: [`Engine::get_rx_burst`] (one queue),
//!    [`Engine::get_rx_burst_from_port`] (any queue of a port) or
//!    [`Engine::get_rx_burst_any`] return a [`Burst`]; read its packets, then
//!    drop it, which returns every buffer to its pool.
//! 3. **Transmit**: [`Engine::get_tx_packet_burst`], fill the packets (raw
//!    bytes or the Ethernet/IPv4/UDP helpers of [`PacketMut`]), then
//!    [`Engine::send_tx_burst`].
//! 4. **Shut down** by dropping the engine or calling [`Engine::shutdown`].
//!
//! ```
//! // Software loopback: what queue 0 sends comes back on queue 0.
//! let yaml = r#"
//! daqiri:
//!   cfg:
//!     version: 1
//!     stream_type: raw
//!     loopback: sw
//!     memory_regions:
//!     - { name: mem, kind: host, num_bufs: 64, buf_size: 2048 }
//!     interfaces:
//!     - name: lo
//!       address: loopback
//!       tx: { queues: [{ name: t, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [mem] }] }
//!       rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 1, memory_regions: [mem] }] }
//! "#;
//! let engine = daqiri::Engine::from_yaml(yaml)?;
//! let mut burst = engine.get_tx_packet_burst(0, 0, 1)?;
//! burst.packet_mut(0).write(b"hello")?;
//! engine.send_tx_burst(burst).map_err(|e| e.error)?;
//! let rx = loop {
//!     if let Some(b) = engine.get_rx_burst(0, 0)? { break b; }
//! };
//! assert_eq!(rx.packet(0).data(), b"hello");
//! # Ok::<(), daqiri::Error>(())
//! ```

// Unsafe code is allowed only in the modules that wrap a kernel or C
// interface: memory/mapping.rs (mmap, mbind), memory/region.rs (buffer
// slices), backend/socket/sys.rs (recvmmsg, sendmmsg, socket options),
// doorbell.rs (eventfd) and sleep.rs (ppoll), backend/dpdk/rte (DPDK), backend/af_xdp/xsk.rs (UMEM, socket options) and
// the map layouts of backend/af_xdp/program.rs, the CUDA and cuFile
// wrappers, and reorder/fp16_x86.rs (F16C, called once the CPU is known to
// have it).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod backend;
mod burst;
mod delivery;
mod direction;
mod doorbell;
mod engine;
mod error;
mod flow;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod headers;
mod inbox;
mod memory;
mod missing_slots;
mod pacing;
mod port;
pub mod preflight;
mod queue;
mod reload;
pub mod reorder;
mod runtime_flows;
mod sharing;
mod sleep;
mod snapshot;
#[cfg_attr(not(feature = "cuda"), path = "staging_absent.rs")]
mod staging;
mod state;
mod stats;
pub mod support;
mod task;
mod worker;
pub mod writer;

pub use backend::{AfXdpLink, AfXdpSocket, IngestRing, LinkStats, QueueConnection, RdmaConnection, RoceLink};
pub use burst::{Burst, Completion, EngineId, MAX_SEGMENTS, Packet, PacketMut, flags};
pub use direction::Direction;
pub use engine::{Engine, SendError};
pub use error::{Error, Result, Status};
pub use memory::{
    Backing, DevicePtr, DeviceSlice, GpuBacking, HugepageInfo, Mapping, Region, SegmentMemory, give_back_freed_heap,
};
pub use missing_slots::MissingSlots;
pub use queue::WorkerThread;
pub use reload::ReloadChange;
pub use reorder::PlanStats;
pub use sharing::{SegmentLocation, SharedRegion};
pub use snapshot::{EngineStats, FlowStatsEntry, PortStats, QueueStatsEntry, RegionStats};
pub use stats::{DropReason, QueueStatsSnapshot};

pub use daqiri_config as config;
