//! Backends: what moves packets between the wire (or a socket, or a software
//! loop) and the queues. Each port gets a [`PortDriver`] that opens its
//! resources at init, so a bad address or a busy port fails `Engine::new`,
//! and then hands its queues' poll and send tasks to the generic workers.

#[cfg(feature = "af_xdp")]
mod af_xdp;
#[cfg(feature = "dpdk")]
mod dpdk;
mod driver;
mod link;
mod loopback;
#[cfg(feature = "rdma")]
mod rdma;
mod socket;

#[cfg(feature = "af_xdp")]
pub(crate) use af_xdp::{
    MAX_RSS_QUEUES as AF_XDP_MAX_RSS_QUEUES, MAX_RULES as AF_XDP_MAX_RULES, MAX_SOCKETS as AF_XDP_MAX_SOCKETS,
};
pub(crate) use driver::PortDriver;
pub use link::{AfXdpLink, AfXdpSocket, IngestRing, LinkStats, QueueConnection, RdmaConnection, RoceLink};
pub(crate) use socket::reuseport_group as udp_reuseport_group;

use daqiri_config::{InterfaceBackend, Link, ValidConfig};

use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::port::Port;

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
        #[cfg(feature = "rdma")]
        Link::Roce(endpoints) => {
            let roce = config.config().interfaces[port.id as usize].roce_config.as_ref();
            rdma::open(*endpoints, roce, port, regions)
        }
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
        || (backend == InterfaceBackend::Roce && cfg!(feature = "rdma"))
}

/// Prepares regions that a backend's own pools manage (DPDK mempools over
/// our buffers), before the engine shares them.
pub(crate) fn adopt_regions(config: &ValidConfig, regions: &mut [crate::memory::Region]) -> Result<()> {
    #[cfg(feature = "dpdk")]
    dpdk::adopt_regions(config, regions)?;
    let _ = (config, regions);
    Ok(())
}
