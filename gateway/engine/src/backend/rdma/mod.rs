//! The RoCE backend (`stream_type: socket` with `roce://` endpoints), over
//! rdma-core through rdma-sys. A port is one connected queue pair,
//! reliable (RC) or unreliable (UC, `roce_config.transport_mode`), set up
//! through `rdma_cm`: a server listens on `local_addr` and
//! accepts one peer at a time; a client binds `local_addr` and connects to
//! `remote_addr` (our extension: DAQIRI connects from the application),
//! trying again while the server is away.
//!
//! Every buffer the device touches is a buffer of the queue's region,
//! registered with the device: a SEND received lands zero-copy and reaches
//! the application as one packet of its received length; a TX packet goes
//! out as one SEND of the buffer the application wrote.
//!
//! An ingest port ([`ingest`], `roce_config.ingest`) is instead a ring an
//! instrument writes into, its queue pair set up by hand.
//!
//! What is not built yet (several queues, GPU memory) is refused by path
//! in [`crate::support`].

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
use super::link::{LinkStats, RoceLink};
use crate::delivery::FullRing;
use crate::error::Result;
use crate::memory::RegionTable;
use crate::port::Port;
use crate::queue::Queue;
use crate::task::Task;

use connection::{Device, Link};
use errors::{invalid, refused};
use manager::{Manager, Role};
use receiver::Receiver;
use sender::Sender;
use verbs::{CmId, EventChannel, MemoryRegistration, ProtectionDomain};

/// Most receives posted at once (a smaller region posts all its buffers).
const RECV_DEPTH: u32 = 1024;
/// Most SENDs outstanding.
const SEND_DEPTH: u32 = 256;

#[derive(Debug)]
pub(super) struct RdmaDriver {
    /// The connection's manager and the device until the tasks take them
    /// (so that nothing else holds the device when it is removed).
    parts: std::sync::Mutex<Option<(Manager, Arc<Device>)>>,
    link: Arc<Link>,
    /// The device port, for the status.
    place: Option<RoceLink>,
    /// Receives kept posted: the RX region's buffers, at most [`RECV_DEPTH`].
    recv_depth: u32,
    /// What the receiver does while its ring is full (see [`receiver`]).
    full_ring: FullRing,
}

/// The region of `queue`, checked for what a registration needs.
fn queue_region(port: &Port, queue: &Queue, regions: &RegionTable) -> Result<u16> {
    let index = queue.segment_regions[0];
    let region = regions.get(index);
    if region.backing().host_base().is_none() {
        return Err(refused(format!(
            "queue \"{}\" of \"{}\" uses region \"{}\" of kind {}; the RoCE backend registers host memory only in this build",
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

/// Opens a RoCE port: the event channel, the listener (server) or a first
/// bound id (client and ingest, to find the device), and the regions'
/// registrations.
pub(super) fn open(
    endpoints: SocketEndpoints,
    roce: Option<&RoceConfig>,
    port: &Port,
    regions: &RegionTable,
) -> Result<Box<dyn PortDriver>> {
    let local = endpoints.local.ok_or_else(|| invalid(port, "no local_addr"))?;
    let Some(rx) = port.rx.first() else { return Err(invalid(port, "no RX queue")) };
    let mut used = vec![queue_region(port, rx, regions)?];
    if let Some(tx) = port.tx.first() {
        used.push(queue_region(port, tx, regions)?);
    }
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
    let (role, anchor) = match endpoints.mode {
        SocketMode::Server => {
            let listener = CmId::listen(&channel, local.socket_addr(), qp_type).map_err(|e| invalid(port, e))?;
            (Role::Server, listener)
        }
        SocketMode::Client => {
            let remote = endpoints.remote.ok_or_else(|| invalid(port, "a client needs remote_addr"))?.socket_addr();
            // An id bound now finds the device, fails here if none has the
            // address, and keeps the device open.
            let bound = CmId::bound(&channel, local.ip, qp_type).map_err(|e| invalid(port, e))?;
            (Role::Client { local: local.ip, remote, resolving: None, retry_at: Instant::now(), failures: 0 }, bound)
        }
    };
    let device = open_device(port, regions, used, (anchor, channel), None)?;
    let rx_bufs = regions.get(rx.segment_regions[0]).num_bufs();
    // A region shared with the TX queue (its READs land there) keeps half for TX bursts.
    let shared = port.tx.first().is_some_and(|tx| tx.segment_regions[0] == rx.segment_regions[0]);
    let recv_depth = if shared { (rx_bufs / 2).max(1) } else { rx_bufs }.min(RECV_DEPTH);
    let link = Arc::new(Link::default());
    let manager =
        Manager::new(&port.name, role, Arc::clone(&link), (qp_type, (SEND_DEPTH, recv_depth)), Arc::clone(&device));
    tracing::info!(port = port.name, local = %local.socket_addr(), mode = ?endpoints.mode, "RoCE port open");
    let place = verbs::DevicePort::of(&device.anchor).map(|place| RoceLink {
        device: place.device_name(),
        port: place.port_num,
        gid: sysfs::gid_of(local.ip),
        ingest: None,
    });
    let parts = std::sync::Mutex::new(Some((manager, device)));
    let full_ring = if transport == TransportMode::Uc { FullRing::Drop } else { FullRing::HoldBack };
    Ok(Box::new(RdmaDriver { parts, link, place, recv_depth, full_ring }))
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
            MemoryRegistration::of_region(&pd, regions.get(index), iova)
                .expect("host memory, checked by queue_region")
                .map(|mr| (index, mr))
                .map_err(|e| invalid(port, e))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Device { registrations, pd, anchor, channel }))
}

impl PortDriver for RdmaDriver {
    /// The RX task runs the connection; the TX task sends on it.
    fn tasks(&mut self, port: &Port) -> Vec<Task> {
        let Some((manager, device)) = self.parts.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Vec::new();
        };
        let lkey = port.tx.first().and_then(|tx| device.lkey(tx.segment_regions[0]));
        let connection = (manager, Arc::clone(&self.link), device);
        let receiver = Receiver::new(port, connection, self.full_ring, self.recv_depth);
        let mut tasks = vec![Task::receiver(port, &port.rx[0], Box::new(receiver)).polling()];
        if let (Some(tx), Some(lkey)) = (port.tx.first(), lkey) {
            let sender = Sender::new(port, Arc::clone(&self.link), lkey, SEND_DEPTH);
            tasks.push(Task::sender(port, tx, Box::new(sender)));
        }
        tasks
    }

    fn link_stats(&self) -> LinkStats {
        let state = self.link.state();
        LinkStats {
            peer: state.peer,
            connected: Some(state.connected),
            ..connection::device_stats(self.place.as_ref(), &self.link.removal)
        }
    }
}
