//! The AF_XDP backend (`stream_type: raw` with `engine: af_xdp`, our
//! extension of DAQIRI's `engine` key): kernel-bypass receive and send on
//! any netdev with an XDP driver, veth included, with no DPDK and no
//! hugepages required.
//!
//! Each queue's region is an AF_XDP UMEM ([`xsk`]), so frames land in our
//! buffers and reach the application zero-copy. Our XDP program
//! ([`program`], built from `steer.bpf.c`) matches the flows, writes the
//! flow id and queue in front of each frame, and redirects it to the socket
//! of the NIC queue it arrived on; unmatched frames go to the kernel under
//! flow isolation. A flow reload rewrites the program's maps, never the
//! program.

mod program;
mod receiver;
mod sender;
mod xsk;

use std::sync::{Arc, Mutex};

pub(crate) use program::{MAX_RSS_QUEUES, MAX_RULES, MAX_SOCKETS};

use super::driver::PortDriver;
use crate::backend::{AfXdpLink, AfXdpSocket, LinkStats};
use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;
use crate::inbox::Inboxes;
use crate::memory::RegionTable;
use crate::pacing::Pacer;
use crate::port::Port;
use crate::task::Task;

use program::SteeringProgram;
use receiver::{Receiver, RxSocket};
use sender::Sender;
use xsk::{QueueSocket, SocketHandle, SocketPlan};

/// Frames one RX queue's inbox holds, steered there from other queues'
/// sockets: a fill ring's worth, so a burst of misdirected frames waits
/// for the target queue's next poll instead of being dropped.
const INBOX_PACKETS: usize = 2048;

/// A port's AF_XDP sockets and the XDP program that feeds them.
#[derive(Debug)]
pub(super) struct AfXdpDriver {
    netdev: String,
    /// The netdev's MAC address when the port opened.
    mac: Option<[u8; 6]>,
    /// `None` once stopped: dropping it detaches it.
    program: Mutex<Option<SteeringProgram>>,
    /// The sockets' rings until the tasks take them.
    sockets: Mutex<Vec<QueueSocket>>,
    /// Each socket's queue, mode and statistics handle, for the link's
    /// state; emptied at stop, so the last descriptor of every socket closes
    /// before the engine can drop the regions its UMEM is.
    handles: Mutex<Vec<(u32, xsk::SocketMode, SocketHandle)>>,
    tag: u32,
}

/// A tag for the program's metadata that stale bytes in a frame's
/// headroom will not carry by chance.
fn fresh_tag() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() as u32) | 1
}

/// The netdev's MAC address, for TX queues that fill the Ethernet source.
fn netdev_mac(netdev: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{netdev}/address")).ok()?;
    let bytes: Vec<u8> = text.trim().split(':').filter_map(|b| u8::from_str_radix(b, 16).ok()).collect();
    bytes.try_into().ok()
}

/// The socket of each NIC queue: RX queue k and TX queue k share the
/// socket bound to NIC queue k, and so the UMEM of one region.
fn plans<'a>(netdev: &str, port: &Port, regions: &'a RegionTable) -> Result<Vec<SocketPlan<'a>>> {
    let available = super::driver::netdev_rx_queues(netdev)?;
    if port.rx.len() > available {
        return Err(Error::new(
            Status::InvalidParameter,
            format!(
                "interface \"{}\" has {} RX queues and netdev {netdev} has {available}: each RX queue binds the NIC queue of its position (ethtool -L {netdev} combined {})",
                port.name,
                port.rx.len(),
                port.rx.len()
            ),
        ));
    }
    // A socket receives only its own NIC queue: frames the NIC spread to a
    // queue with no socket would go to the kernel, and the config would be
    // received in part. Refused, so the NIC's channels are set to match.
    if available > port.rx.len() && !port.rx.is_empty() {
        return Err(Error::new(
            Status::NotSupported,
            format!(
                "interfaces[{}].rx.queues: interface \"{}\" has {} RX queues and netdev {netdev} has {available} (ethtool -l {netdev}): frames the NIC puts on queues {}..{} would reach no socket; give the interface {available} RX queues, or the NIC {} (ethtool -L {netdev} combined {}; a veth: rx {})",
                port.id,
                port.name,
                port.rx.len(),
                port.rx.len(),
                available - 1,
                port.rx.len(),
                port.rx.len(),
                port.rx.len()
            ),
        ));
    }
    (0..port.rx.len().max(port.tx.len()))
        .map(|k| {
            let rx = port.rx.get(k).map(|q| q.segment_regions[0]);
            let tx = port.tx.get(k).map(|q| q.segment_regions[0]);
            if let (Some(r), Some(t)) = (rx, tx)
                && r != t
            {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "TX queue \"{}\" of \"{}\" sends from region \"{}\", but NIC queue {k} already has RX queue \"{}\"'s region \"{}\" as its UMEM (the kernel takes one per NIC queue): give both queues one region",
                        port.tx[k].name,
                        port.name,
                        regions.get(t).name(),
                        port.rx[k].name,
                        regions.get(r).name()
                    ),
                ));
            }
            let region = regions.get(rx.or(tx).expect("k is below one of the counts"));
            if region.backing().host_base().is_none() {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "{}.queues[{k}].memory_regions of interface \"{}\": region \"{}\" is {} memory, and an AF_XDP UMEM must be host memory",
                        if rx.is_some() { "rx" } else { "tx" },
                        port.name,
                        region.name(),
                        region.kind().as_str()
                    ),
                ));
            }
            let busy_poll = port.rx.get(k).and_then(|q| q.busy_poll_us.map(|us| (us, q.batch_size as u32)));
            Ok(SocketPlan { nic_queue: k as u32, region, rx: rx.is_some(), tx: tx.is_some(), busy_poll })
        })
        .collect()
}

pub(super) fn open(netdev: &str, port: &Port, regions: &RegionTable) -> Result<Box<dyn PortDriver>> {
    let plans = plans(netdev, port, regions)?;
    let tag = fresh_tag();
    let mut program = SteeringProgram::load(&port.flows.load(), tag)?;
    let sockets = xsk::open(netdev, &plans)?;
    let mut handles = Vec::with_capacity(sockets.len());
    for socket in &sockets {
        if socket.rx.is_some() {
            program.add_socket(socket.nic_queue, &socket.handle)?;
        }
        handles.push((socket.nic_queue, socket.mode, socket.handle.try_clone()?));
    }
    // Attached last: every socket is in the map before the first frame.
    program.attach(netdev)?;
    let modes: Vec<&str> = sockets.iter().map(|s| s.mode.as_str()).collect();
    tracing::info!(interface = %port.name, netdev, xdp = program.mode().as_str(), sockets = ?modes, "AF_XDP port started");
    Ok(Box::new(AfXdpDriver {
        netdev: netdev.to_owned(),
        mac: netdev_mac(netdev),
        program: Mutex::new(Some(program)),
        sockets: Mutex::new(sockets),
        handles: Mutex::new(handles),
        tag,
    }))
}

impl AfXdpDriver {
    fn program(&self) -> std::sync::MutexGuard<'_, Option<SteeringProgram>> {
        self.program.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl PortDriver for AfXdpDriver {
    fn tasks(&mut self, port: &Port) -> Vec<Task> {
        let sockets = std::mem::take(&mut *self.sockets.lock().unwrap_or_else(|e| e.into_inner()));
        let mac = self.mac;
        let rx_sockets = sockets.iter().filter(|s| s.rx.is_some()).count();
        let inboxes = Arc::new(Inboxes::new(port.rx.len(), INBOX_PACKETS, rx_sockets));
        let mut tasks = Vec::new();
        for socket in sockets {
            let k = socket.nic_queue as usize;
            if let Some((fill, rx)) = socket.rx {
                let q = &port.rx[k];
                let region = port.regions.get(q.segment_regions[0]);
                let busy = q.busy_poll_us.is_some();
                let socket = RxSocket::new(k, fill, rx, socket.handle, region, busy);
                let receiver = Receiver::new(port, socket, Arc::clone(&inboxes), self.tag);
                // The rings are polled; nothing here blocks.
                tasks.push(Task::receiver(port, q, Box::new(receiver)).polling());
            }
            if let Some(halves) = socket.tx {
                let q = &port.tx[k];
                let region = port.regions.get(q.segment_regions[0]);
                let mac = mac.filter(|_| q.fill_eth_src);
                let sender = Sender::new(k, halves, region, mac, Pacer::for_queue(q));
                tasks.push(Task::sender(port, q, Box::new(sender)));
            }
        }
        tasks
    }

    fn apply_flows(&self, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        let mut program = self.program();
        let Some(program) = program.as_mut() else {
            port.flows.store(table);
            return Ok(());
        };
        // The receiver's table first: a frame the old rules steered then
        // meets a table without its flow, and is steered in software.
        let old = port.flows.swap(Arc::clone(&table));
        if let Err(e) = program.replace_rules(&table) {
            port.flows.store(old);
            return Err(e);
        }
        Ok(())
    }

    fn mac_address(&self) -> Option<[u8; 6]> {
        self.mac
    }

    fn link_stats(&self) -> LinkStats {
        let program = self.program();
        let mut counters = Vec::new();
        if let Some(program) = program.as_ref() {
            let outcomes = program.outcomes();
            counters.push(("xdp_passed_unmatched".to_owned(), outcomes.passed_unmatched));
            counters.push(("xdp_passed_no_socket".to_owned(), outcomes.passed_no_socket));
        }
        let handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        for (queue, _, handle) in handles.iter() {
            let c = handle.counters();
            counters.push((format!("q{queue}_rx_dropped"), c.rx_dropped));
            counters.push((format!("q{queue}_rx_ring_full"), c.rx_ring_full));
            counters.push((format!("q{queue}_rx_invalid_descs"), c.rx_invalid_descs));
            counters.push((format!("q{queue}_tx_invalid_descs"), c.tx_invalid_descs));
        }
        let af_xdp = AfXdpLink {
            xdp_mode: program.as_ref().map_or("detached", |p| p.mode().as_str()),
            sockets: handles
                .iter()
                .map(|(q, mode, handle)| AfXdpSocket {
                    nic_queue: *q,
                    mode: mode.as_str(),
                    busy_poll_us: Some(handle.busy_poll_us()).filter(|&us| us > 0),
                })
                .collect(),
        };
        LinkStats { nic_counters: counters, af_xdp: Some(af_xdp), ..LinkStats::default() }
    }

    fn stop(&self) {
        // Detached now, not when the engine drops: the interface is as it was.
        if self.program().take().is_some() {
            tracing::info!(netdev = %self.netdev, "XDP program detached");
        }
        // The workers, and with them the rings, are gone: this closes the sockets.
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
