//! The receive side of one DPDK RX queue, on the queue's own core: polls
//! its `rte_eth_rx_burst`, turns each mbuf back into the region buffer it
//! is (or, split, the two buffers of its headers and payload), steers, and
//! assembles bursts. The NIC chose the queue; the flow id is the packet's
//! MARK or, without one, the first flow that matches it, as in software
//! steering. The port's NIC drop counters are read by queue 0's receiver.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::rte::{self, EthPort, Mempool, PortCounters, Received, RxMbufs, RxPools, TimestampField};
use crate::burst::PacketSlot;
use crate::delivery::{Assembler, FullRing, RuleTally, Steer};
use crate::memory::{BufToken, Region, RegionTable};
use crate::port::Port;
use crate::queue::Queue;
use crate::stats::DropReason;
use crate::task::QueueTask;

/// Most mbufs one `rte_eth_rx_burst` returns (DPDK's usual burst).
const RX_BURST: usize = 64;
/// How often the receiver turns the NIC's drop counters into drops.
const COUNTER_PERIOD: Duration = Duration::from_millis(100);

pub(super) struct Receiver {
    /// The RX queue's position in the port (its DPDK queue id).
    queue: usize,
    eth: Arc<EthPort>,
    pools: RxPools,
    assembler: Assembler,
    tally: RuleTally,
    mbufs: RxMbufs,
    timestamps: Option<TimestampField>,
    registered: bool,
    /// The NIC's counters as last turned into drops (queue 0 only: they are the port's).
    counted: Option<PortCounters>,
    next_count: Instant,
}

impl Receiver {
    /// The receiver of RX queue `queue` of `port`.
    pub(super) fn new(
        port: &crate::port::Port,
        queue: usize,
        eth: Arc<EthPort>,
        pools: RxPools,
        timestamps: Option<TimestampField>,
    ) -> Self {
        Self {
            queue,
            eth,
            pools,
            assembler: Assembler::new(port, queue, FullRing::Drop).taking_entries_ahead(),
            tally: RuleTally::default(),
            mbufs: RxMbufs::with_capacity(RX_BURST),
            timestamps,
            registered: false,
            counted: (queue == 0).then(PortCounters::default),
            next_count: Instant::now(),
        }
    }

    /// Adds what the NIC dropped since the last look to the port's drops.
    fn count_nic_drops(&mut self, port: &Port) {
        let Some(counted) = &mut self.counted else { return };
        let now = self.eth.counters();
        let drops = &port.rx_drops;
        let before = std::mem::replace(counted, now);
        drops.dropped(DropReason::NicMissed, now.rx_missed.saturating_sub(before.rx_missed));
        drops.dropped(DropReason::NicRxError, now.rx_errors.saturating_sub(before.rx_errors));
        drops.dropped(DropReason::NoFreePacketBuffers, now.rx_no_mbuf.saturating_sub(before.rx_no_mbuf));
    }

    /// Lands, steers and assembles what the last poll received. The NIC
    /// chose the queue; steering gives the flow id, or drops the packet.
    fn deliver(&mut self, port: &Port, now: Instant) {
        if let Some(stamps) = &mut self.timestamps {
            stamps.keep_anchored(now, || self.eth.read_clock());
        }
        let rx = &port.rx[self.queue];
        let mut steer = Steer::new(port, &mut self.tally);
        let plain = if self.timestamps.is_none() && !self.assembler.reorders() && steer.passes_everything() {
            deliver_plain(&self.mbufs, &self.pools.head, &mut self.assembler, rx, &port.regions, now)
        } else {
            0
        };
        for (at, packet) in self.mbufs.received(&self.pools, self.timestamps, plain) {
            let landed = match Landed::from(&self.mbufs, at, &packet, rx, &port.regions) {
                Ok(landed) => landed,
                Err(reason) => {
                    rx.stats.dropped(reason, 1);
                    continue;
                }
            };
            let (token, offset, len) = &landed.head;
            let headers =
                || &port.regions.get(rx.segment_regions[0]).bytes(token)[usize::from(*offset)..][..*len as usize];
            let Some(steered) = steer.marked(packet.mark, headers, landed.len()) else {
                landed.release(rx, &port.regions);
                continue;
            };
            match landed.tail {
                None => self.assembler.push_frame(rx, landed.head, steered.flow_id, packet.timestamp, &port.regions),
                Some(_) => {
                    let mut slot = landed.into_slot(steered.flow_id);
                    slot.set_rx_timestamp(packet.timestamp);
                    self.assembler.push(rx, slot, &port.regions);
                }
            }
        }
    }
}

impl QueueTask for Receiver {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        if !self.registered {
            rte::register_thread();
            self.registered = true;
        }
        let received = self.eth.rx_burst(self.queue as u16, &mut self.mbufs);
        // One clock read a poll: the bursts this poll starts start now.
        let now = Instant::now();
        if received > 0 {
            self.deliver(port, now);
        }
        let rx = &port.rx[self.queue];
        self.assembler.flush_if_due(rx, now, &port.regions);
        if now >= self.next_count {
            self.count_nic_drops(port);
            self.next_count = now + COUNTER_PERIOD;
        }
        received
    }

    fn finish(&mut self, port: &Port) {
        self.count_nic_drops(port);
        self.assembler.finish(&port.rx[self.queue], &port.regions);
    }
}

/// The common case, a column at a time: the poll's leading frames that are
/// each one unmarked mbuf of the queue's pool, where nothing steers and
/// nothing stamps. How many it delivered; the rest go one by one.
fn deliver_plain(
    mbufs: &RxMbufs,
    pool: &Mempool,
    assembler: &mut Assembler,
    rx: &Queue,
    regions: &RegionTable,
    now: Instant,
) -> usize {
    let mut frames = [(0, 0, 0); RX_BURST];
    let n = mbufs.plain_frames(pool, &mut frames);
    assembler.push_frames(rx, &frames[..n], regions, now);
    n
}

/// A received packet in its queue's regions: the first (or only) segment,
/// and for a split packet its payload, each as (buffer, offset, length).
struct Landed {
    head: (BufToken, u16, u32),
    tail: Option<(BufToken, u16, u32)>,
}

impl Landed {
    /// Takes over the buffers a poll filled, or copies a packet in other
    /// mbufs (another pool's, or a chain) into a buffer of the queue's
    /// first region.
    fn from(
        mbufs: &RxMbufs,
        at: usize,
        packet: &Received,
        rx: &Queue,
        regions: &RegionTable,
    ) -> Result<Self, DropReason> {
        let head = regions.get(rx.segment_regions[0]);
        match packet.index {
            Some(index) => Ok(Landed {
                head: (head.adopt(index), packet.offset, packet.len),
                tail: packet.tail.map(|t| (regions.get(rx.segment_regions[1]).adopt(t.index), t.offset, t.len)),
            }),
            None => land_foreign(mbufs, at, head).map(|(token, len)| Landed { head: (token, 0, len), tail: None }),
        }
    }

    fn len(&self) -> u32 {
        self.head.2 + self.tail.as_ref().map_or(0, |t| t.2)
    }

    fn release(self, rx: &Queue, regions: &RegionTable) {
        regions.get(rx.segment_regions[0]).release(self.head.0);
        if let Some((token, ..)) = self.tail {
            regions.get(rx.segment_regions[1]).release(token);
        }
    }

    fn into_slot(self, flow_id: Option<u32>) -> PacketSlot {
        let (token, offset, len) = self.head;
        let mut slot = PacketSlot::single(token, len, flow_id);
        slot.set_segment_offset(0, offset);
        if let Some((token, offset, len)) = self.tail {
            slot.set_segment(1, token, len);
            slot.set_segment_offset(1, offset);
        }
        slot
    }
}

/// Copies a frame whose mbuf is not the queue's (a PMD passed on another
/// pool's mbuf, or a chain) into a buffer of the queue's region.
fn land_foreign(mbufs: &RxMbufs, at: usize, region: &Region) -> Result<(BufToken, u32), DropReason> {
    let Some(mut token) = region.take() else {
        mbufs.take_foreign(at, &mut []);
        return Err(DropReason::NoFreePacketBuffers);
    };
    match mbufs.take_foreign(at, region.bytes_mut(&mut token)) {
        Some(len) => Ok((token, len as u32)),
        None => {
            region.release(token);
            Err(DropReason::Truncated)
        }
    }
}
