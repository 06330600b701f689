//! Backends: what moves packets between the wire (or a socket, or a software
//! loop) and the queues. Each port gets a [`PortDriver`] that opens its
//! resources at init, so a bad address or a busy port fails `Engine::new`,
//! and then hands its queues' poll and send tasks to the generic workers.

mod loopback;
mod socket;

use std::sync::Arc;

use daqiri_config::{InterfaceBackend, Link, ValidConfig};

use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;
use crate::memory::RegionTable;
use crate::port::Port;
use crate::snapshot::LinkStats;
use crate::state::EngineState;
use crate::worker::Task;

/// A port's live driver: opened at init, kept for the engine's whole life.
/// It hands its queues' work to the workers once, applies flow tables on
/// reload, reads what lies below the queues (a kernel socket, a NIC), and
/// closes its resources in order once the workers are gone.
pub(crate) trait PortDriver: Send + Sync + std::fmt::Debug {
    /// The port's queue tasks for the generic workers, taken once when the
    /// engine starts. A direct-mode receive side goes to the port instead
    /// ([`Port::set_direct`]).
    fn tasks(&mut self, engine: &Arc<EngineState>, port: &Port) -> Vec<Task>;

    /// Makes `table` the port's steering. Software steering swaps the table
    /// the workers read; a driver that programs a NIC or an XDP map does it
    /// here and fails with the device's reason.
    fn apply_flows(&self, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        port.flows.store(table);
        Ok(())
    }

    /// Counters and state below the queues.
    fn link_stats(&self) -> LinkStats {
        LinkStats::default()
    }

    /// Closes the port's connections and devices; called after every worker stopped.
    fn stop(&self) {}
}

/// A port's receive side, polled on the application's thread by
/// `get_rx_burst` (`poll_mode: direct`) instead of by a worker.
pub(crate) trait DirectPoll: Send + std::fmt::Debug {
    /// Receives what is ready, without blocking, and delivers it to the
    /// port's queues as bursts; returns the packets received.
    fn poll(&mut self, engine: &EngineState) -> usize;
}

/// Opens the driver of `port` (binds sockets, checks devices).
pub(crate) fn open(config: &ValidConfig, port: &Port, regions: &RegionTable) -> Result<Box<dyn PortDriver>> {
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
