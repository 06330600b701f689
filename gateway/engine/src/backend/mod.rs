//! Backends: what moves packets between the wire (or a socket, or a software
//! loop) and the queues. Each backend opens its resources at init, so a bad
//! address or a busy port fails `Engine::new`, then starts its workers.

mod loopback;
mod socket;

use std::sync::Arc;
use std::thread::JoinHandle;

use daqiri_config::{InterfaceBackend, Link, ValidConfig};

use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::port::Port;
use crate::state::EngineState;

/// An opened backend for one port, ready to start its workers.
pub(crate) trait Backend: Send {
    /// Spawns the port's workers.
    fn start(self: Box<Self>, engine: &Arc<EngineState>, port: u16) -> Result<Vec<JoinHandle<()>>>;
}

/// A port's receive side, polled on the application's thread by
/// `get_rx_burst` (`poll_mode: direct`) instead of by a worker.
pub(crate) trait DirectPoll: Send + std::fmt::Debug {
    /// Receives what is ready, without blocking, and delivers it to the
    /// port's queues as bursts; returns the packets received.
    fn poll(&mut self, engine: &EngineState) -> usize;
}

/// Opens the backend of `port` (binds sockets, checks devices).
pub(crate) fn open(config: &ValidConfig, port: &Port, regions: &RegionTable) -> Result<Box<dyn Backend>> {
    match config.link(port.id as usize) {
        Link::Socket(endpoints) => socket::open(*endpoints, port, regions),
        Link::SoftwareLoopback => loopback::open(port, regions),
        other => Err(Error::new(
            Status::NotSupported,
            format!(
                "interface \"{}\" needs the {} backend, which this build does not include (this build runs socket and sw-loopback interfaces)",
                port.name,
                other.backend().as_str()
            ),
        )),
    }
}

/// Whether this build can drive `backend`.
pub(crate) fn compiled_in(backend: InterfaceBackend) -> bool {
    matches!(backend, InterfaceBackend::Socket | InterfaceBackend::SoftwareLoopback)
}

/// Checks that every queue's memory regions can be touched by the CPU, which
/// both CPU-side backends need.
pub(crate) fn require_cpu_memory(port: &Port, regions: &RegionTable) -> Result<()> {
    for q in port.rx.iter().chain(&port.tx) {
        for &r in &q.segment_regions {
            let region = regions.get(r);
            if !region.kind().cpu_addressable() {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "queue \"{}\" of \"{}\" uses region \"{}\" of kind {}, which the {} backend cannot read",
                        q.name,
                        port.name,
                        region.name(),
                        region.kind().as_str(),
                        port.backend.as_str()
                    ),
                ));
            }
        }
    }
    Ok(())
}
