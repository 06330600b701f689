//! An instrument's ring (`roce_config.ingest`, our extension): a sender
//! programmed out of band (an FPGA, a sensor) writes each frame into a page
//! of the RX queue's region with RDMA WRITEs, then ends it with a WRITE
//! with immediate, its immediate the frame's sequence number. The region is
//! registered for remote write at address 0 (page `p` at `p * page_size`);
//! the queue pair is made by hand from config and never connects.
//!
//! Each WRITE with immediate completes one receive without a buffer; the
//! frame it ends is page `sequence % pages`, delivered zero-copy as one
//! packet with the immediate. The sender never waits: a page it writes
//! while the application still holds it is counted, not delivered twice;
//! sequence numbers it skipped are frames lost on the way, and counted.
//!
//! A sender's error can put the queue pair in the error state (on RC, a
//! WRITE outside the ring or with a wrong key): its receives come back
//! flushed. The port then says why, brings the queue pair back through
//! RESET under the same number, expecting the configured first PSN again,
//! and counts the recovery; the pages already delivered are untouched.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use daqiri_config::model::{RoceIngest, TransportMode};

use super::connection::{DEVICE_REMOVED, Device, FLUSH_WAIT, Removal, device_stats};
use super::errors::invalid;
use super::sysfs;
use super::verbs::{self, CompletionQueue, DevicePort, QueuePair, Rtr, ibv_wc};
use crate::backend::driver::PortDriver;
use crate::backend::link::{IngestRing, LinkStats, RoceLink};
use crate::burst::PacketSlot;
use crate::delivery::{Assembler, FullRing};
use crate::error::Result;
use crate::memory::{LentBuffers, Region};
use crate::port::Port;
use crate::stats::DropReason;
use crate::task::{QueueTask, Task};

/// Completions taken per poll.
const RX_BATCH: usize = 64;
/// Receives posted at once: each WRITE with immediate takes one, and each
/// is posted again as its completion is taken.
const RECV_DEPTH: u32 = 1024;

/// The queue pair's run-time errors, for the status: how often it was
/// brought back, and why the last time.
#[derive(Debug, Default)]
struct Recoveries {
    count: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Recoveries {
    fn broke(&self, why: &str) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.to_owned());
    }

    fn recovered(&self) {
        self.count.fetch_add(1, Relaxed);
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// An ingest port: its receive task until the engine takes it, and what
/// the status shows a control plane that programs the sender.
pub(super) struct IngestDriver {
    receiver: Mutex<Option<IngestReceiver>>,
    link: RoceLink,
    removal: Arc<Removal>,
    recoveries: Arc<Recoveries>,
}

/// Brings up the queue pair of an ingest port, its ring registered at
/// address 0 on the device that holds `local`, and posts its receives.
pub(super) fn open(
    port: &Port,
    local: IpAddr,
    ingest: &RoceIngest,
    transport: TransportMode,
    device: Arc<Device>,
) -> Result<Box<dyn PortDriver>> {
    let queue = &port.rx[0];
    let ring = port.regions.get(queue.segment_regions[0]);
    let place =
        DevicePort::of(&device.anchor).ok_or_else(|| invalid(port, format!("{local} is no RDMA device's address")))?;
    let name = place.device_name();
    let gid_index = sysfs::roce_v2_gid_index(&name, place.port_num, local).map_err(|e| invalid(port, e))?;
    let rtr = Rtr {
        qp_type: verbs::qp_type(transport),
        port: place,
        gid_index,
        peer_gid: sysfs::gid_of(ingest.peer_ip).octets(),
        peer_qpn: ingest.peer_qpn,
        peer_psn: ingest.peer_psn,
        mtu: ingest.mtu,
    };
    let cq = CompletionQueue::new(place.context(), RECV_DEPTH + 1).map_err(|e| invalid(port, e))?;
    let qp = QueuePair::ready_to_receive(&device.pd, &cq, RECV_DEPTH, &rtr).map_err(|e| invalid(port, e))?;
    let index = queue.segment_regions[0];
    let registration = device.registrations.iter().find(|(r, _)| *r == index).map(|(_, mr)| mr);
    let link = RoceLink {
        device: name,
        port: place.port_num,
        gid: sysfs::gid_of(local),
        ingest: Some(IngestRing {
            qpn: qp.qpn(),
            rkey: registration.map_or(0, |mr| mr.rkey()),
            base: 0,
            page_size: ring.buf_size() as u64,
            pages: ring.num_bufs(),
            transport: if transport == TransportMode::Uc { "UC" } else { "RC" },
        }),
    };
    tracing::info!(port = port.name, qpn = qp.qpn(), peer = %ingest.peer_ip, peer_qpn = ingest.peer_qpn, "RoCE ingest ring ready");
    let ring_qp = RingQueuePair { qp, cq, device };
    ring_qp.post_receives().map_err(|e| invalid(port, e))?;
    let (removal, recoveries) = (Arc::new(Removal::default()), Arc::new(Recoveries::default()));
    let shared = (Arc::clone(&removal), Arc::clone(&recoveries));
    let receiver = IngestReceiver::new(port, ring_qp, shared);
    Ok(Box::new(IngestDriver { receiver: Mutex::new(Some(receiver)), link, removal, recoveries }))
}

impl std::fmt::Debug for IngestDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestDriver").field("link", &self.link).finish_non_exhaustive()
    }
}

impl PortDriver for IngestDriver {
    fn tasks(&mut self, port: &Port) -> Vec<Task> {
        let Some(receiver) = self.receiver.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Vec::new() };
        vec![Task::receiver(port, &port.rx[0], Box::new(receiver)).polling()]
    }

    fn link_stats(&self) -> LinkStats {
        LinkStats {
            recoveries: Some(self.recoveries.count.load(Relaxed)),
            last_error: self.recoveries.last_error(),
            ..device_stats(Some(&self.link), &self.removal)
        }
    }
}

/// The ring's queue pair. Fields drop in order: the queue pair before its
/// completion queue, both before the device's registration and domain.
struct RingQueuePair {
    qp: QueuePair,
    cq: CompletionQueue,
    device: Arc<Device>,
}

impl RingQueuePair {
    /// Posts an empty receive in every slot.
    fn post_receives(&self) -> std::io::Result<()> {
        (0..RECV_DEPTH).try_for_each(|wr_id| self.qp.post_empty_receive(u64::from(wr_id)))
    }

    /// Whether the device is being removed.
    fn device_removed(&self) -> bool {
        std::iter::from_fn(|| self.device.channel.next().ok().flatten())
            .any(|event| event.kind == verbs::event::RDMA_CM_EVENT_DEVICE_REMOVAL)
    }
}

/// The receive task of an ingest port.
struct IngestReceiver {
    /// The queue pair, until its device is removed.
    ring_qp: Option<RingQueuePair>,
    /// Receives posted and not completed yet.
    posted: u32,
    /// Since when the queue pair is in the error state (why is in `recoveries`).
    broken: Option<Instant>,
    removal: Arc<Removal>,
    recoveries: Arc<Recoveries>,
    assembler: Assembler,
    /// The ring's pages not with the application, by page (buffer) index.
    free_pages: LentBuffers,
    /// The sequence number the next frame should carry.
    expected: Option<u32>,
    completions: [ibv_wc; RX_BATCH],
}

impl IngestReceiver {
    fn new(port: &Port, ring_qp: RingQueuePair, (removal, recoveries): (Arc<Removal>, Arc<Recoveries>)) -> Self {
        let mut receiver = Self {
            ring_qp: Some(ring_qp),
            posted: RECV_DEPTH,
            broken: None,
            removal,
            recoveries,
            assembler: Assembler::new(port, 0, FullRing::Drop),
            free_pages: LentBuffers::keyed(ring(port).num_bufs()),
            expected: None,
            completions: verbs::completions(),
        };
        receiver.take_back_pages(port);
        receiver
    }

    /// Files every page back in the pool (all, at start; those the
    /// application released, later) under its index.
    fn take_back_pages(&mut self, port: &Port) {
        let ring = ring(port);
        // `available` is one atomic read: the pool's lock only when a page came back.
        while ring.available() > 0
            && let Some(token) = ring.take()
        {
            let page = token.index();
            if let Err(token) = self.free_pages.lend_as(page, token) {
                ring.release(token);
                return;
            }
        }
    }

    /// Counts the frames between the one expected and `sequence`.
    fn count_gap(&mut self, port: &Port, sequence: u32) {
        if let Some(expected) = self.expected {
            let skipped = sequence.wrapping_sub(expected);
            // Behind by more than half the space: the sender started over.
            if skipped != 0 && skipped < u32::MAX / 2 {
                port.rx_drops.dropped(DropReason::SequenceGap, u64::from(skipped));
            }
        }
        self.expected = Some(sequence.wrapping_add(1));
    }

    fn deliver(&mut self, port: &Port, immediate: Option<u32>) {
        let Some(sequence) = immediate else {
            // A WRITE with immediate always carries one; anything else is not the ring's protocol.
            port.rx_drops.dropped(DropReason::NicRxError, 1);
            return;
        };
        self.count_gap(port, sequence);
        let ring = ring(port);
        let page = sequence % ring.num_bufs();
        let Some(token) = self.free_pages.reclaim(page) else {
            port.rx_drops.dropped(DropReason::NoFreePacketBuffers, 1);
            return;
        };
        let mut slot = PacketSlot::single(token, ring.buf_size() as u32, None);
        slot.set_immediate(Some(sequence));
        self.assembler.push(&port.rx[0], slot, &port.regions);
    }
}

impl IngestReceiver {
    /// Notes that the queue pair is in the error state, and why (a
    /// completion's status where one said more than "flushed").
    fn broke(&mut self, port: &Port, status: Option<u32>) {
        if self.broken.is_some() && status.is_none() {
            return;
        }
        let cause = status.map_or_else(|| "its receives came back flushed".to_owned(), verbs::status_text);
        let why = format!(
            "the ingest queue pair went to the error state ({cause}); on RC a sender's WRITE outside the ring or with another key does this"
        );
        tracing::error!(port = port.name, "{why}; bringing it back once its receives are flushed");
        self.recoveries.broke(&why);
        self.broken = Some(Instant::now());
    }

    /// Brings a queue pair in the error state back once every receive
    /// came back (or [`FLUSH_WAIT`] passed) and posts them again.
    fn recover_when_flushed(&mut self, port: &Port) {
        let (Some(since), Some(ring_qp)) = (self.broken, &self.ring_qp) else { return };
        if self.posted > 0 && since.elapsed() < FLUSH_WAIT {
            return;
        }
        // RESET drops whatever was still posted.
        self.posted = 0;
        if let Err(e) = ring_qp.qp.restart().and_then(|()| ring_qp.post_receives()) {
            tracing::error!(
                port = port.name,
                "cannot bring the ingest queue pair back, trying again in {FLUSH_WAIT:?}: {e}"
            );
            self.broken = Some(Instant::now());
            return;
        }
        self.posted = RECV_DEPTH;
        self.broken = None;
        self.recoveries.recovered();
        tracing::warn!(
            port = port.name,
            qpn = ring_qp.qp.qpn(),
            "ingest queue pair back, expecting the sender's first PSN again"
        );
    }
}

fn ring(port: &Port) -> &Region {
    port.regions.get(port.rx[0].segment_regions[0])
}

impl QueueTask for IngestReceiver {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        self.take_back_pages(port);
        let asked = std::time::Instant::now();
        let Some(ring_qp) = self.ring_qp.as_ref() else {
            self.assembler.flush_if_due(&port.rx[0], asked, &port.regions);
            return 0;
        };
        if ring_qp.device_removed() {
            // The ring's pages are the engine's, not lent to the device one by one: nothing to flush.
            ring_qp.qp.to_error();
            self.ring_qp = None;
            self.removal.note();
            tracing::error!(port = port.name, "RoCE ingest port down: {DEVICE_REMOVED}");
            return 0;
        }
        let taken = match ring_qp.cq.poll(&mut self.completions) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(port = port.name, "{e}");
                0
            }
        };
        for i in 0..taken {
            let wc = &self.completions[i];
            let (status, opcode, wr_id, immediate) = (wc.status, wc.opcode, wc.wr_id, verbs::immediate(wc));
            self.posted = self.posted.saturating_sub(1);
            match (status, opcode) {
                (verbs::IBV_WC_SUCCESS, verbs::IBV_WC_RECV_RDMA_WITH_IMM) => self.deliver(port, immediate),
                (verbs::IBV_WC_SUCCESS, _) => port.rx_drops.dropped(DropReason::NicRxError, 1),
                // Only an error state flushes a receive while the port runs.
                (verbs::IBV_WC_WR_FLUSH_ERR, _) => self.broke(port, None),
                (status, _) => {
                    port.rx_drops.dropped(DropReason::NicRxError, 1);
                    self.broke(port, Some(status));
                }
            }
            if self.broken.is_some() {
                continue;
            }
            let Some(ring_qp) = self.ring_qp.as_ref() else { break };
            match ring_qp.qp.post_empty_receive(wr_id) {
                Ok(()) => self.posted += 1,
                Err(e) => tracing::error!(port = port.name, "ibv_post_recv: {e}"),
            }
        }
        self.recover_when_flushed(port);
        self.assembler.flush_if_due(&port.rx[0], asked, &port.regions);
        taken
    }

    fn finish(&mut self, port: &Port) {
        if let Some(ring_qp) = self.ring_qp.take() {
            ring_qp.qp.to_error();
        }
        self.assembler.finish(&port.rx[0], &port.regions);
        ring(port).release_all(self.free_pages.reclaim_all());
    }
}
