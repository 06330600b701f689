//! Software loopback (`loopback: "sw"`): TX bursts of an interface come back
//! on its own RX queues, steered by the RX flow rules as the NIC would. The
//! "wire" is a copy from TX buffers into the RX queue's regions, split over
//! the RX segments in order (header-data split by segment size). A TX queue
//! with `offloads: [tx_eth_src]` gets the port's MAC ([`port_mac`]) written
//! into each frame's source address, as a NIC would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::driver::PortDriver;
use crate::burst::{Burst, PacketSlot};
use crate::delivery::{Assembler, FullRing, RuleTally, Steer, Steered};
use crate::error::Result;
use crate::inbox::Inboxes;
use crate::memory::RegionTable;
use crate::pacing::{self, Pacer};
use crate::port::Port;
use crate::queue::Queue;
use crate::sleep::SleepSet;
use crate::stats::DropReason;
use crate::task::{QueueTask, Task, sender_sleeps_on};

/// Largest frame the loop carries (jumbo).
const MAX_FRAME: usize = 16 * 1024;

#[derive(Debug)]
pub(super) struct LoopbackDriver {
    mac: [u8; 6],
}

pub(super) fn open(port: &Port, regions: &RegionTable) -> Result<Box<dyn PortDriver>> {
    super::driver::prepare_cpu_landing(port, regions)?;
    Ok(Box::new(LoopbackDriver { mac: port_mac(port.id) }))
}

/// Packets an RX queue's inbox holds at least; and at least two of the
/// largest TX bursts, so one whole burst lands while the RX worker is
/// still assembling the last.
const INBOX_PACKETS: usize = 4096;

impl PortDriver for LoopbackDriver {
    /// A carrier per TX queue on its core (the "wire"), a receiver per RX
    /// queue on its core (burst assembly, reorder).
    fn tasks(&mut self, p: &Port) -> Vec<Task> {
        let largest_burst = p.tx.iter().map(|q| q.batch_size).max().unwrap_or(0);
        let capacity = INBOX_PACKETS.max(2 * largest_burst);
        let inboxes = Arc::new(Inboxes::new(p.rx.len(), capacity, p.rx.len() + p.tx.len()));
        let carriers = p.tx.iter().enumerate().map(|(queue, q)| {
            let carrier = Carrier {
                queue,
                inboxes: Arc::clone(&inboxes),
                frame: vec![0u8; MAX_FRAME],
                pacer: Pacer::for_queue(q),
                tally: RuleTally::default(),
            };
            Task::sender(p, q, Box::new(carrier))
        });
        let receivers = p.rx.iter().enumerate().map(|(queue, q)| {
            let receiver =
                Receiver { queue, assembler: Assembler::new(p, queue, FullRing::Drop), inboxes: Arc::clone(&inboxes) };
            Task::receiver(p, q, Box::new(receiver)).polling()
        });
        carriers.chain(receivers).collect()
    }

    fn mac_address(&self) -> Option<[u8; 6]> {
        Some(self.mac)
    }
}

/// One TX queue's side of the loop's "wire": its ring in, RX inboxes out.
struct Carrier {
    queue: usize,
    inboxes: Arc<Inboxes>,
    frame: Vec<u8>,
    pacer: Option<Pacer>,
    tally: RuleTally,
}

impl QueueTask for Carrier {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let p = port;
        let q = &p.tx[self.queue];
        let mut moved = 0;
        while let Some(burst) = pacing::next_burst(q, self.pacer.as_mut()) {
            moved += burst.num_packets().max(1);
            let steer = Steer::new(p, &mut self.tally);
            self.inboxes.whole_burst(|| carry(steer, q, &burst, &self.inboxes, &mut self.frame));
        }
        moved
    }

    fn sleeps_on(&self, port: &Port, set: &mut SleepSet) -> bool {
        sender_sleeps_on(&port.tx[self.queue], self.pacer.is_some(), set)
    }

    fn finish(&mut self, port: &Port) {
        self.inboxes.task_finished(&port.rx, &port.regions);
    }
}

/// One RX queue's side: assembles what the carriers posted.
struct Receiver {
    queue: usize,
    assembler: Assembler,
    inboxes: Arc<Inboxes>,
}

impl QueueTask for Receiver {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let p = port;
        let rx = &p.rx[self.queue];
        // A TX burst comes off the loop whole, as off a wire: no timeout runs
        // out half-way through one. Asked before draining, so what was posted
        // by then is all taken before any timeout is looked at; and timeouts
        // are judged at that moment, so a batch begun by this drain is never
        // due because this thread was preempted before its flush.
        let whole = !self.inboxes.arriving();
        let asked = Instant::now();
        let taken = self.inboxes.of(self.queue).drain_into(&mut self.assembler, rx, &port.regions);
        if whole {
            self.assembler.flush_if_due(rx, asked, &port.regions);
        }
        taken
    }

    fn finish(&mut self, port: &Port) {
        let p = port;
        let rx = &p.rx[self.queue];
        self.inboxes.of(self.queue).drain_into(&mut self.assembler, rx, &port.regions);
        self.assembler.finish(rx, &port.regions);
        self.inboxes.task_finished(&p.rx, &port.regions);
    }
}

/// The loop's port MAC: locally administered, unicast, the port id in the last two bytes.
pub(crate) fn port_mac(port: u16) -> [u8; 6] {
    let [high, low] = port.to_be_bytes();
    [0x02, 0, 0, 0, high, low]
}

/// Moves one TX burst onto the RX side.
fn carry(mut steer: Steer<'_>, tx: &Queue, burst: &Burst, inboxes: &Inboxes, frame: &mut [u8]) {
    let p = steer.port();
    let regions = &p.regions;
    let (mut sent, mut bytes) = (0u64, 0u64);
    for packet in burst.packets() {
        let len = packet.len();
        if len > frame.len() {
            tx.stats.dropped(DropReason::Truncated, 1);
            continue;
        }
        let mut at = 0;
        for piece in (0..crate::burst::MAX_SEGMENTS).filter_map(|s| packet.sendable_segment(s)) {
            frame[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        if tx.fill_eth_src && len >= 12 {
            frame[6..12].copy_from_slice(&port_mac(p.id));
        }
        sent += 1;
        bytes += len as u64;
        if p.rx.is_empty() {
            continue;
        }
        let frame = &frame[..len];
        let Some(Steered { queue, flow_id }) = steer.frame(frame, len as u32) else { continue };
        if let Some(slot) = land(&p.rx[queue], regions, frame, flow_id) {
            inboxes.of(queue).post(&p.rx[queue], slot, regions);
        }
    }
    tx.stats.delivered(sent, bytes);
}

/// Copies a frame into fresh buffers of an RX queue, segment by segment.
fn land(rx: &Queue, regions: &RegionTable, frame: &[u8], flow_id: Option<u32>) -> Option<PacketSlot> {
    let mut slot = PacketSlot::default();
    slot.set_flow_id(flow_id);
    let mut rest = frame;
    let last = rx.segment_regions.len() - 1;
    for (segment, &r) in rx.segment_regions.iter().enumerate() {
        let region = regions.get(r);
        let take = if segment == last { rest.len() } else { rest.len().min(region.buf_size()) };
        if take > region.buf_size() {
            slot.release(regions, &rx.segment_regions);
            rx.stats.dropped(DropReason::Truncated, 1);
            return None;
        }
        let Some(mut token) = region.take() else {
            slot.release(regions, &rx.segment_regions);
            rx.stats.dropped(DropReason::NoFreePacketBuffers, 1);
            return None;
        };
        region.bytes_mut(&mut token)[..take].copy_from_slice(&rest[..take]);
        slot.set_segment(segment, token, take as u32);
        rest = &rest[take..];
        if rest.is_empty() {
            break;
        }
    }
    Some(slot)
}
