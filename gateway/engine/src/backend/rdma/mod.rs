//! The RoCE backend (`stream_type: socket` with a `roce://` endpoint), over
//! rdma-core through rdma-sys: a server listens through `rdma_cm`, accepts
//! a reliable connected (RC) queue pair, and receives its SENDs straight into
//! the RX queue's region: each receive posted is one region buffer,
//! registered with the device, so a message lands zero-copy and reaches the
//! application as one packet of its received length.
//!
//! What is not built yet (UC, clients, TX, WRITE and READ, immediates, queue
//! pairs programmed by hand) is refused by path in [`crate::support`].

mod receiver;
mod verbs;

use std::sync::{Arc, Mutex};

use daqiri_config::SocketEndpoints;
use daqiri_config::model::{MemoryAccess, TransportMode};

use super::driver::PortDriver;
use super::link::LinkStats;
use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::port::Port;
use crate::task::Task;

use receiver::{ConnectionState, Listening, Receiver};
use verbs::{CmId, EventChannel, MemoryRegistration, ProtectionDomain};

#[derive(Debug)]
pub(super) struct RdmaDriver {
    /// The listener and its device objects until the receive task takes them.
    listening: Mutex<Option<Listening>>,
    state: Arc<Mutex<ConnectionState>>,
}

fn refused(message: String) -> Error {
    Error::new(Status::NotSupported, message)
}

/// Opens the listener of a RoCE server port and registers its RX region.
pub(super) fn open(
    endpoints: SocketEndpoints,
    transport: TransportMode,
    port: &Port,
    regions: &RegionTable,
) -> Result<Box<dyn PortDriver>> {
    let local = endpoints.local.ok_or_else(|| refused(format!("interface \"{}\" has no local_addr", port.name)))?;
    let addr = local.socket_addr();
    let Some(queue) = port.rx.first() else {
        return Err(refused(format!("RoCE interface \"{}\" has no RX queue to receive into", port.name)));
    };
    let region = regions.get(queue.segment_regions[0]);
    if region.backing().host_base().is_none() {
        return Err(refused(format!(
            "RX queue \"{}\" of \"{}\" uses region \"{}\" of kind {}; the RoCE backend registers host memory only in this build",
            queue.name,
            port.name,
            region.name(),
            region.kind().as_str()
        )));
    }
    if !region.access().is_empty() && !region.access().contains(&MemoryAccess::Local) {
        return Err(refused(format!(
            "region \"{}\" is RX queue \"{}\"'s, and a receive needs local write access: add local to its access list",
            region.name(),
            queue.name
        )));
    }
    let failed = |what: std::io::Error| {
        Error::new(Status::InvalidParameter, format!("RoCE interface \"{}\": {what}", port.name))
    };
    let channel = EventChannel::new().map_err(failed)?;
    let listener = CmId::listen(&channel, addr).map_err(failed)?;
    let device = listener.verbs().ok_or_else(|| {
        Error::new(
            Status::InvalidParameter,
            format!("RoCE interface \"{}\": {addr} is no RDMA device's address; give the address of one", port.name),
        )
    })?;
    let pd = ProtectionDomain::new(device).map_err(failed)?;
    let registration = MemoryRegistration::of_region(&pd, region, verbs::IBV_ACCESS_LOCAL_WRITE.0)
        .expect("host memory, checked above")
        .map_err(failed)?;
    // UC is refused by path (crate::support) until its port space is built.
    debug_assert_eq!(transport, TransportMode::Rc);
    let qp_type = verbs::IBV_QPT_RC;
    tracing::info!(port = port.name, %addr, ?transport, "RoCE server listening");
    let listening = Listening { connection: None, registration, pd, listener, channel, qp_type };
    Ok(Box::new(RdmaDriver { listening: Mutex::new(Some(listening)), state: Arc::default() }))
}

impl PortDriver for RdmaDriver {
    fn tasks(&mut self, port: &Port) -> Vec<Task> {
        let Some(listening) = self.listening.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Vec::new();
        };
        let receiver = Receiver::new(port, listening, Arc::clone(&self.state));
        vec![Task::receiver(port, &port.rx[0], Box::new(receiver)).polling()]
    }

    fn link_stats(&self) -> LinkStats {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        LinkStats { peer: state.peer, connected: Some(state.connected), ..LinkStats::default() }
    }
}
