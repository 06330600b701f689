//! Software loopback (`loopback: "sw"`): TX bursts of an interface come back
//! on its own RX queues, steered by the RX flow rules as the NIC would. The
//! "wire" is a copy from TX buffers into the RX queue's regions, split over
//! the RX segments in order (header-data split by segment size). A TX queue
//! with `offloads: [tx_eth_src]` gets the port's MAC ([`port_mac`]) written
//! into each frame's source address, as a NIC would. A port whose queues
//! all use `device` memory of one GPU copies GPU to GPU instead
//! ([`device_wire`]).

#[cfg(feature = "cuda")]
mod device_wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::driver::PortDriver;
use crate::burst::{Burst, PacketSlot};
use crate::delivery::{Assembler, FullRing, RuleTally, Steer, Steered};
use crate::error::Result;
use crate::inbox::Inboxes;
use crate::memory::{BufToken, Region, RegionTable};
use crate::pacing::{self, Pacer};
use crate::port::Port;
use crate::queue::Queue;
use crate::sleep::SleepSet;
use crate::stats::DropReason;
use crate::task::{QueueTask, SENDER_POLL_BUDGET, Task, sender_sleeps_on};

/// Largest frame the loop carries (jumbo).
const MAX_FRAME: usize = 16 * 1024;

/// Where `tx_eth_src` writes the port's MAC in a frame (both wires).
const SRC_MAC: std::ops::Range<usize> = 6..12;

#[derive(Debug)]
pub(super) struct LoopbackDriver {
    mac: [u8; 6],
    /// Each TX queue's wire, handed to its carrier when the workers start.
    wires: Vec<Wire>,
}

pub(super) fn open(port: &Port, regions: &RegionTable) -> Result<Box<dyn PortDriver>> {
    let mac = port_mac(port.id);
    #[cfg(feature = "cuda")]
    if let Some(gpu) = device_wire::port_gpu(port, regions) {
        let wires =
            port.tx.iter().map(|q| Ok(Wire::Device(Box::new(device_wire::DeviceWire::new(gpu, mac, q.batch_size)?))));
        return Ok(Box::new(LoopbackDriver { mac, wires: wires.collect::<Result<_>>()? }));
    }
    super::driver::prepare_cpu_landing(port, regions)?;
    let wires = port.tx.iter().map(|_| Wire::Cpu { frame: vec![0u8; MAX_FRAME] }).collect();
    Ok(Box::new(LoopbackDriver { mac, wires }))
}

/// How a carrier moves a frame's bytes.
#[derive(Debug)]
enum Wire {
    /// Through one CPU core and a frame buffer of its own (staged `device`
    /// memory included, through its pinned twin).
    Cpu { frame: Vec<u8> },
    /// GPU to GPU.
    #[cfg(feature = "cuda")]
    Device(Box<device_wire::DeviceWire>),
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
        let wires = std::mem::take(&mut self.wires);
        let carriers = p.tx.iter().zip(wires).enumerate().map(|(queue, (q, wire))| {
            let carrier = Carrier {
                queue,
                inboxes: Arc::clone(&inboxes),
                wire,
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
    wire: Wire,
    pacer: Option<Pacer>,
    tally: RuleTally,
}

impl QueueTask for Carrier {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let p = port;
        let q = &p.tx[self.queue];
        let mut moved = 0;
        while moved < SENDER_POLL_BUDGET
            && let Some(burst) = pacing::next_burst(q, self.pacer.as_mut())
        {
            moved += burst.num_packets().max(1);
            let steer = Steer::new(p, &mut self.tally);
            let inboxes = &self.inboxes;
            inboxes.whole_burst(|| match &mut self.wire {
                Wire::Cpu { frame } => carry(steer, q, &burst, inboxes, frame),
                #[cfg(feature = "cuda")]
                Wire::Device(wire) => wire.carry(steer, q, &burst, inboxes),
            });
        }
        moved
    }

    fn sleeps_on(&self, port: &Port, set: &mut SleepSet) -> bool {
        sender_sleeps_on(&port.tx[self.queue], self.pacer.is_some(), set)
    }

    fn finish(&mut self, port: &Port) {
        #[cfg(feature = "cuda")]
        if let Wire::Device(wire) = &mut self.wire {
            wire.finish(&port.regions);
        }
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
        if tx.fill_eth_src && len >= SRC_MAC.end {
            frame[SRC_MAC].copy_from_slice(&port_mac(p.id));
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
    let take_buffer = |_, region: &Region| region.take();
    let mut slot = PacketSlot::default();
    let landed = land_with(&mut slot, rx, regions, frame.len(), flow_id, take_buffer, |region, token, from, take| {
        region.bytes_mut(token)[..take].copy_from_slice(&frame[from..from + take]);
    });
    landed.then_some(slot)
}

/// Takes fresh buffers of an RX queue for a frame of `len` bytes into
/// `slot` (empty), split over the queue's segments in order:
/// `take_buffer(region index, region)` takes each, `fill(region, buffer,
/// frame offset, bytes)` writes it. False, the slot emptied again and the
/// drop counted on the queue, when a region has no free buffer or the frame
/// does not fit. The slot is filled where it lies: a hundred bytes moved per
/// packet showed in the loop's profile.
fn land_with(
    slot: &mut PacketSlot,
    rx: &Queue,
    regions: &RegionTable,
    len: usize,
    flow_id: Option<u32>,
    mut take_buffer: impl FnMut(u16, &Region) -> Option<BufToken>,
    mut fill: impl FnMut(&Region, &mut BufToken, usize, usize),
) -> bool {
    slot.set_flow_id(flow_id);
    let mut from = 0;
    let last = rx.segment_regions.len() - 1;
    for (segment, &r) in rx.segment_regions.iter().enumerate() {
        let region = regions.get(r);
        let rest = len - from;
        let take = if segment == last { rest } else { rest.min(region.buf_size()) };
        if take > region.buf_size() {
            std::mem::take(slot).release(regions, &rx.segment_regions);
            rx.stats.dropped(DropReason::Truncated, 1);
            return false;
        }
        let Some(mut token) = take_buffer(r, region) else {
            std::mem::take(slot).release(regions, &rx.segment_regions);
            rx.stats.dropped(DropReason::NoFreePacketBuffers, 1);
            return false;
        };
        fill(region, &mut token, from, take);
        slot.set_segment(segment, token, take as u32);
        from += take;
        if from == len {
            break;
        }
    }
    true
}
