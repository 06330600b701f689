//! Backends: what moves packets between the wire (or a socket, or a software
//! loop) and the queues. Each port gets a [`PortDriver`] that opens its
//! resources at init, so a bad address or a busy port fails `Engine::new`,
//! and then hands its queues' poll and send tasks to the generic workers.

#[cfg(feature = "af_xdp")]
mod af_xdp;
#[cfg(feature = "dpdk")]
mod dpdk;
mod loopback;
mod socket;

#[cfg(feature = "af_xdp")]
pub(crate) use af_xdp::{
    MAX_RSS_QUEUES as AF_XDP_MAX_RSS_QUEUES, MAX_RULES as AF_XDP_MAX_RULES, MAX_SOCKETS as AF_XDP_MAX_SOCKETS,
};
pub(crate) use socket::reuseport_group as udp_reuseport_group;

use std::sync::Arc;

use daqiri_config::{InterfaceBackend, Link, ValidConfig};

use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;
use crate::memory::RegionTable;
use crate::port::Port;
use crate::queue::{Direction, Queue};
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

/// How many RX queues kernel netdev `netdev` has (`/sys/class/net/<netdev>/queues`).
#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
fn netdev_rx_queues(netdev: &str) -> Result<usize> {
    let dir = format!("/sys/class/net/{netdev}/queues");
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Error::new(
            Status::InvalidParameter,
            format!("netdev \"{netdev}\" not found in this network namespace ({dir}: {e})"),
        )
    })?;
    Ok(entries.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count())
}

/// Opens the driver of `port` (binds sockets, checks devices).
pub(crate) fn open(config: &ValidConfig, port: &Port, regions: &RegionTable) -> Result<Box<dyn PortDriver>> {
    match config.link(port.id as usize) {
        Link::Socket(endpoints) => socket::open(*endpoints, port, regions),
        Link::SoftwareLoopback => loopback::open(port, regions),
        #[cfg(feature = "dpdk")]
        Link::Dpdk { address } => {
            let tx_flows = config.config().interfaces[port.id as usize].tx.as_ref().map_or(&[][..], |tx| &tx.flows);
            dpdk::open(address, port, regions, tx_flows)
        }
        #[cfg(feature = "af_xdp")]
        Link::AfXdp { netdev } => af_xdp::open(netdev, port, regions),
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
        || (backend == InterfaceBackend::Dpdk && cfg!(feature = "dpdk"))
        || (backend == InterfaceBackend::AfXdp && cfg!(feature = "af_xdp"))
}

/// Prepares regions that a backend's own pools manage (DPDK mempools over
/// our buffers), before the engine shares them.
pub(crate) fn adopt_regions(config: &ValidConfig, regions: &mut [crate::memory::Region]) -> Result<()> {
    #[cfg(feature = "dpdk")]
    dpdk::adopt_regions(config, regions)?;
    let _ = (config, regions);
    Ok(())
}

/// Checks that the CPU can write every queue's memory, which both CPU-side
/// backends need. In a CUDA build an RX queue may land in a `device` region
/// all the same: the region gets a pinned staging twin and the queue a
/// copier that moves each burst to the GPU as it is delivered.
pub(crate) fn prepare_cpu_landing(port: &Port, regions: &RegionTable) -> Result<()> {
    for direction in [Direction::Rx, Direction::Tx] {
        for q in port.queues(direction) {
            check_queue_memory(port, direction, q, regions)?;
        }
    }
    Ok(())
}

/// One queue's part of [`prepare_cpu_landing`].
fn check_queue_memory(port: &Port, direction: Direction, q: &Queue, regions: &RegionTable) -> Result<()> {
    for &r in &q.segment_regions {
        let region = regions.get(r);
        if region.kind().cpu_addressable() {
            continue;
        }
        #[cfg(feature = "cuda")]
        if direction == Direction::Rx {
            stage_on_host(port, q, region)?;
            continue;
        }
        let refused = format!(
            "{} queue \"{}\" of \"{}\" uses region \"{}\" of kind {}, which the {} backend cannot {}",
            direction.as_str(),
            q.name,
            port.name,
            region.name(),
            region.kind().as_str(),
            port.backend.as_str(),
            if direction == Direction::Rx { "read" } else { "send from" }
        );
        return Err(Error::new(Status::NotSupported, refused));
    }
    Ok(())
}

/// Lets `queue` land packets for `device` region `region` through its
/// pinned twin. A GPU reorder plan reads packets where they land, before
/// any burst exists, so its queue must land in `host_pinned` instead.
#[cfg(feature = "cuda")]
fn stage_on_host(port: &Port, queue: &Queue, region: &crate::memory::Region) -> Result<()> {
    if let Some(plan) = queue.plans.first() {
        return Err(Error::new(
            Status::NotSupported,
            format!(
                "reorder plan \"{}\" reads packets where they land, and the {} backend lands them with the CPU: give queue \"{}\" a host_pinned region instead of \"{}\" (kind device needs a GPUDirect backend)",
                plan.name,
                port.backend.as_str(),
                queue.name,
                region.name()
            ),
        ));
    }
    region.stage_on_host()?;
    if queue.stager.get().is_none() {
        let gpu = region.backing().gpu().expect("device memory is on a GPU");
        let _ = queue.stager.set(std::sync::Mutex::new(crate::gpu::Stager::new(gpu)?));
    }
    Ok(())
}
