//! The RoCE backend (`stream_type: socket` with `roce://` endpoints), over
//! rdma-core through rdma-sys. A port is a connected queue pair per RX
//! queue, reliable (RC) or unreliable (UC, `roce_config.transport_mode`),
//! set up through `rdma_cm`: a server listens on `local_addr` and gives
//! each peer that connects the first queue without one; a client binds
//! `local_addr` and connects each queue to `remote_addr` (our extension:
//! DAQIRI connects from the application), trying again while the server
//! is away. TX queue j sends on RX queue j's connection.
//!
//! Every buffer the device touches is a buffer of the queue's region,
//! registered with the device: a SEND received lands zero-copy and reaches
//! the application as one packet of its received length; a TX packet goes
//! out as one SEND of the buffer the application wrote.
//!
//! An ingest port ([`ingest`], `roce_config.ingest`) is instead a ring an
//! instrument writes into, its queue pair set up by hand.
//!
//! GPU memory (`device` regions, in a `cuda` build) is registered as the
//! dma-buf its driver exports; where the GPU driver or the RDMA device
//! cannot, the port refuses the queue's region by its path.

mod connection;
mod errors;
mod ingest;
mod manager;
mod receiver;
mod sender;
mod sysfs;
mod verbs;

use std::sync::Arc;
use std::time::Instant;

use daqiri_config::SocketEndpoints;
use daqiri_config::model::{MemoryAccess, RoceConfig, SocketMode, TransportMode};

use super::driver::PortDriver;
use super::link::{LinkStats, QueueConnection, RdmaConnection, RoceLink};
use crate::delivery::FullRing;
use crate::error::Result;
use crate::memory::RegionTable;
use crate::port::Port;
use crate::queue::Queue;
use crate::task::Task;

use connection::{Device, Link, Removal};
use errors::{invalid, refused};
use manager::{Manager, Role, Seats};
use receiver::Receiver;
use sender::Sender;
use verbs::{CmId, EventChannel, MemoryRegistration, ProtectionDomain};

/// Most receives posted at once (a smaller region posts all its buffers).
const RECV_DEPTH: u32 = 1024;
/// Most SENDs outstanding.
const SEND_DEPTH: u32 = 256;

#[derive(Debug)]
pub(super) struct RdmaDriver {
    /// Each RX queue's connection manager, and the device, until the tasks
    /// take them (so that nothing else holds the device when it is removed).
    parts: std::sync::Mutex<Option<(Vec<Manager>, Arc<Device>)>>,
    /// Each RX queue's connection (TX queue j sends on the j-th).
    links: Vec<Arc<Link>>,
    /// The RX queues' ids, in the links' order.
    rx_ids: Vec<u16>,
    removal: Arc<Removal>,
    /// The device port, for the status.
    place: Option<RoceLink>,
    /// Receives each RX queue keeps posted: its share of its region's
    /// buffers, at most [`RECV_DEPTH`].
    recv_depths: Vec<u32>,
    /// What a receiver does while its ring is full (see [`receiver`]).
    full_ring: FullRing,
}

/// The region of `queue`, checked for what a registration needs.
fn queue_region(port: &Port, queue: &Queue, regions: &RegionTable) -> Result<u16> {
    let index = queue.segment_regions[0];
    let region = regions.get(index);
    if region.backing().host_base().is_none() && region.backing().device_base().is_none() {
        return Err(refused(format!(
            "queue \"{}\" of \"{}\" uses region \"{}\" of kind {}, which no RDMA device registers",
            queue.name,
            port.name,
            region.name(),
            region.kind().as_str()
        )));
    }
    if !region.access().is_empty() && !region.access().contains(&MemoryAccess::Local) {
        return Err(refused(format!(
            "region \"{}\" is queue \"{}\"'s, and the device writes receives and reads sends there: add local to its access list",
            region.name(),
            queue.name
        )));
    }
    Ok(index)
}

/// Receives RX queue `rx` keeps posted: its region's buffers shared
/// evenly among the port's queues on that region (a TX queue's READs and
/// bursts take buffers there too), at most [`RECV_DEPTH`].
fn recv_depth(port: &Port, rx: &Queue, regions: &RegionTable) -> u32 {
    let region = rx.segment_regions[0];
    let sharing = port.rx.iter().chain(&port.tx).filter(|q| q.segment_regions[0] == region).count() as u32;
    (regions.get(region).num_bufs() / sharing.max(1)).clamp(1, RECV_DEPTH)
}

/// Opens a RoCE port: the event channels (one per RX queue), the listener
/// (server) or a first bound id (client and ingest, to find the device),
/// and the regions' registrations.
pub(super) fn open(
    endpoints: SocketEndpoints,
    roce: Option<&RoceConfig>,
    port: &Port,
    regions: &RegionTable,
) -> Result<Box<dyn PortDriver>> {
    let local = endpoints.local.ok_or_else(|| invalid(port, "no local_addr"))?;
    if port.rx.is_empty() {
        return Err(invalid(port, "no RX queue"));
    }
    if port.tx.len() > port.rx.len() {
        return Err(invalid(port, "more TX queues than RX queues: TX queue j sends on RX queue j's connection"));
    }
    let mut used =
        port.rx.iter().chain(&port.tx).map(|q| queue_region(port, q, regions)).collect::<Result<Vec<_>>>()?;
    used.sort_unstable();
    used.dedup();
    let channel = Arc::new(EventChannel::new().map_err(|e| invalid(port, e))?);
    let transport = roce.map_or(TransportMode::Rc, |r| r.transport_mode);
    let qp_type = verbs::qp_type(transport);
    if let Some(ingest) = roce.and_then(|r| r.ingest.as_ref()) {
        // Only finds and holds the device: the ring's queue pair is made by hand.
        let anchor = CmId::bound(&channel, local.ip, verbs::IBV_QPT_RC).map_err(|e| invalid(port, e))?;
        let device = open_device(port, regions, used, (anchor, channel), Some(0))?;
        return ingest::open(port, local.ip, ingest, transport, device);
    }
    // Queue 0's connection events come on the device's channel, the others' on their own.
    let mut channels = vec![Arc::clone(&channel)];
    for _ in 1..port.rx.len() {
        channels.push(Arc::new(EventChannel::new().map_err(|e| invalid(port, e))?));
    }
    let (roles, anchor): (Vec<Role>, CmId) = match endpoints.mode {
        SocketMode::Server => {
            let listener = CmId::listen(&channel, local.socket_addr(), qp_type).map_err(|e| invalid(port, e))?;
            let seats = Arc::new(Seats::new(&channels));
            ((0..port.rx.len()).map(|seat| Role::Server { seat, seats: Arc::clone(&seats) }).collect(), listener)
        }
        SocketMode::Client => {
            let remote = endpoints.remote.ok_or_else(|| invalid(port, "a client needs remote_addr"))?.socket_addr();
            // An id bound now finds the device, fails here if none has the
            // address, and keeps the device open.
            let bound = CmId::bound(&channel, local.ip, qp_type).map_err(|e| invalid(port, e))?;
            let client =
                || Role::Client { local: local.ip, remote, resolving: None, retry_at: Instant::now(), failures: 0 };
            ((0..port.rx.len()).map(|_| client()).collect(), bound)
        }
    };
    let device = open_device(port, regions, used, (anchor, channel), None)?;
    let removal = Arc::new(Removal::default());
    let links: Vec<Arc<Link>> = (0..port.rx.len()).map(|_| Arc::new(Link::new(&removal))).collect();
    let recv_depths: Vec<u32> = port.rx.iter().map(|rx| recv_depth(port, rx, regions)).collect();
    let managers = roles
        .into_iter()
        .zip(channels)
        .enumerate()
        .map(|(j, (role, channel))| {
            let queue_pair = (qp_type, (SEND_DEPTH, recv_depths[j]));
            Manager::new(&port.name, (role, Arc::clone(&links[j])), queue_pair, (Arc::clone(&device), channel))
        })
        .collect();
    tracing::info!(port = port.name, local = %local.socket_addr(), mode = ?endpoints.mode, connections = port.rx.len(), "RoCE port open");
    let place = verbs::DevicePort::of(&device.anchor).map(|place| RoceLink {
        device: place.device_name(),
        port: place.port_num,
        gid: sysfs::gid_of(local.ip),
        ingest: None,
    });
    let parts = std::sync::Mutex::new(Some((managers, device)));
    let full_ring = if transport == TransportMode::Uc { FullRing::Drop } else { FullRing::HoldBack };
    let rx_ids = port.rx.iter().map(|q| q.id).collect();
    Ok(Box::new(RdmaDriver { parts, links, rx_ids, removal, place, recv_depths, full_ring }))
}

/// The device `anchor` found: its protection domain and the registrations
/// of the regions `used`, at device address `iova` where given.
fn open_device(
    port: &Port,
    regions: &RegionTable,
    used: Vec<u16>,
    (anchor, channel): (CmId, Arc<EventChannel>),
    iova: Option<u64>,
) -> Result<Arc<Device>> {
    let context = anchor
        .verbs()
        .ok_or_else(|| invalid(port, "its local_addr is no RDMA device's address; give the address of one"))?;
    let pd = ProtectionDomain::new(context).map_err(|e| invalid(port, e))?;
    let registrations = used
        .into_iter()
        .map(|index| {
            let region = regions.get(index);
            MemoryRegistration::of_region(&pd, region, iova).map(|mr| (index, mr)).map_err(|e| {
                match region.backing().host_base() {
                    Some(_) => invalid(port, e),
                    None => refused(format!(
                        "{}: region \"{}\" is GPU memory: {e}",
                        gpu_region_path(port, index),
                        region.name()
                    )),
                }
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Device { registrations, pd, anchor, channel }))
}

/// The YAML path of the first of `port`'s queues on region `index`, for a
/// refusal of that region (as `check` names paths).
fn gpu_region_path(port: &Port, index: u16) -> String {
    let rx = port.rx.iter().enumerate().map(|(j, q)| ("rx", j, q));
    let (direction, j, _) = rx
        .chain(port.tx.iter().enumerate().map(|(j, q)| ("tx", j, q)))
        .find(|(_, _, q)| q.segment_regions[0] == index)
        .expect("a region registered for a queue");
    format!("interfaces[{}].{direction}.queues[{j}].memory_regions", port.id)
}

impl PortDriver for RdmaDriver {
    /// Each RX task runs its queue's connection; TX queue j sends on the j-th.
    fn tasks(&mut self, port: &Port) -> Vec<Task> {
        let Some((managers, device)) = self.parts.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Vec::new();
        };
        let mut tasks = Vec::new();
        for (j, manager) in managers.into_iter().enumerate() {
            let connection = (manager, Arc::clone(&self.links[j]), Arc::clone(&device));
            let receiver = Receiver::new((port, j), connection, self.full_ring, self.recv_depths[j]);
            tasks.push(Task::receiver(port, &port.rx[j], Box::new(receiver)).polling());
        }
        for (j, tx) in port.tx.iter().enumerate() {
            let Some(lkey) = device.lkey(tx.segment_regions[0]) else { continue };
            let sender = Sender::new((port, j), Arc::clone(&self.links[j]), lkey, SEND_DEPTH);
            tasks.push(Task::sender(port, tx, Box::new(sender)));
        }
        tasks
    }

    fn rdma_connection(&self, index: usize) -> Option<RdmaConnection> {
        self.links.get(index).map(|link| link.rdma_connection())
    }

    fn link_stats(&self) -> LinkStats {
        let connections: Vec<QueueConnection> = self
            .links
            .iter()
            .zip(&self.rx_ids)
            .map(|(link, &rx_queue)| {
                let state = link.state();
                QueueConnection { rx_queue, peer: state.peer, connected: state.connected }
            })
            .collect();
        LinkStats {
            peer: connections.iter().find_map(|c| c.peer),
            connected: Some(connections.iter().any(|c| c.connected)),
            connections,
            ..connection::device_stats(self.place.as_ref(), &self.removal)
        }
    }
}
