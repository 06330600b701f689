//! Reads a daqiri gateway's bursts from another process without copying a
//! payload byte: subscribe to an interface's RX queue, flow or reorder plan
//! over the gateway's consumer socket, map its memory read-only, take bursts from a shared
//! descriptor ring, and drop each to give its buffers back.
//!
//! ```no_run
//! use daqiri_consumer::{Options, Subscription, Target};
//! let target = Target::queue("udp_rx", 0);
//! let subscription = Subscription::connect("/run/daqiri/consumers.sock", target, Options::default())?;
//! while let Some(burst) = subscription.next(None)? {
//!     for packet in burst.packets() {
//!         let _payload: &[u8] = packet.data();
//!     }
//! } // each burst goes back to the gateway as it drops
//! # Ok::<(), daqiri_consumer::Error>(())
//! ```
//!
//! With the `cuda` feature the client also takes targets in the gateway's
//! GPU memory (`device` regions): [`Packet::memory`] then gives a
//! `Memory::Gpu` segment, mapped read-only on the same GPU here, for
//! kernels to read in place.
//!
//! The protocol ([`protocol`]) and the ring ([`ring`]) are the gateway's
//! too: it links this crate for them. Nothing here depends on the engine.

#![warn(missing_docs)]

#[cfg(feature = "tokio")]
mod async_client;
mod client;
mod error;
#[cfg(feature = "cuda")]
mod gpu;
mod mapped;
pub mod protocol;
mod region;
pub mod ring;
pub mod wire;

#[cfg(feature = "tokio")]
pub use async_client::AsyncSubscription;
pub use client::{Burst, Options, Packet, Subscription, Taken};
pub use error::Error;
#[cfg(feature = "cuda")]
pub use gpu::GpuSegment;
pub use protocol::{Source, Target, WhenFull};
pub use region::Memory;
