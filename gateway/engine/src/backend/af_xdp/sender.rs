//! An AF_XDP TX queue's task: each packet goes out as a descriptor of the
//! very buffer the application wrote, lent to the kernel through the
//! queue's lent-buffer table until its address comes back on the
//! completion ring. Pacing is the core's software pacer.

use std::time::Duration;

use xdpilone::xdp::XdpDesc;
use xdpilone::{CompletionQueue, RingTx};

use crate::burst::Burst;
use crate::memory::{LentBuffers, Region};
use crate::pacing::{self, Pacer};
use crate::port::Port;
use crate::stats::DropReason;
use crate::task::{QueueTask, SENDER_POLL_BUDGET};

/// Most descriptors written to the TX ring per poll.
const TX_BATCH: u32 = 64;

pub(super) struct Sender {
    queue: usize,
    tx: RingTx,
    completions: CompletionQueue,
    /// Buffers the kernel is sending, by buffer index.
    lent: LentBuffers,
    mac: Option<[u8; 6]>,
    pacer: Option<Pacer>,
    /// A burst the TX ring had no room for all of, and its next packet.
    current: Option<(Burst, usize)>,
}

impl Sender {
    pub(super) fn new(
        queue: usize,
        (tx, completions): (RingTx, CompletionQueue),
        region: &Region,
        mac: Option<[u8; 6]>,
        pacer: Option<Pacer>,
    ) -> Self {
        Self { queue, tx, completions, lent: LentBuffers::keyed(region.num_bufs()), mac, pacer, current: None }
    }

    /// Gives the buffers of sent frames back to the region.
    fn reap(&mut self, region: &Region) {
        let frame = region.buf_size() as u64;
        let mut done = self.completions.complete(u32::MAX);
        let lent = &mut self.lent;
        region.release_all(std::iter::from_fn(|| done.read()).filter_map(|addr| lent.reclaim((addr / frame) as u32)));
        done.release();
    }

    /// Puts packets of the current burst on the TX ring until it is full or
    /// the burst is sent; the number put.
    fn put(&mut self, port: &Port, region: &Region) -> usize {
        let Some((burst, next)) = self.current.as_mut() else { return 0 };
        let q = &port.tx[self.queue];
        let frame = region.buf_size() as u64;
        let mut writer = self.tx.transmit(TX_BATCH.min((burst.num_packets() - *next) as u32));
        let (mut packets, mut bytes) = (0, 0);
        while (packets as u32) < writer.capacity() && *next < burst.num_packets() {
            let index = *next;
            *next += 1;
            let Some((_, mut token, offset, len)) = burst.take_segment(0, index) else { continue };
            if let Some(mac) = self.mac.filter(|_| len >= 12) {
                region.bytes_mut(&mut token)[usize::from(offset) + 6..][..6].copy_from_slice(&mac);
            }
            let buffer = token.index();
            if let Err(token) = self.lent.lend_as(buffer, token) {
                region.release(token);
                q.stats.dropped(DropReason::SendFailed, 1);
                continue;
            }
            writer.insert_once(XdpDesc { addr: u64::from(buffer) * frame + u64::from(offset), len, options: 0 });
            packets += 1;
            bytes += u64::from(len);
        }
        writer.commit();
        drop(writer);
        if packets > 0 {
            q.stats.delivered(packets as u64, bytes);
            if self.tx.needs_wakeup() {
                self.tx.wake();
            }
        }
        if *next >= burst.num_packets() {
            // The burst, empty of buffers now, returns its metadata as it drops.
            self.current = None;
        }
        packets
    }
}

impl QueueTask for Sender {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let q = &port.tx[self.queue];
        let region = port.regions.get(q.segment_regions[0]);
        self.reap(region);
        let mut moved = self.put(port, region);
        while self.current.is_none()
            && moved < SENDER_POLL_BUDGET
            && let Some(burst) = pacing::next_burst(q, self.pacer.as_mut())
        {
            self.current = Some((burst, 0));
            moved += self.put(port, region);
        }
        // Frames on the ring that the kernel has not taken yet get a kick.
        if self.tx.pending() > 0 && self.tx.needs_wakeup() {
            self.tx.wake();
        }
        moved
    }

    fn finish(&mut self, port: &Port) {
        let q = &port.tx[self.queue];
        let region = port.regions.get(q.segment_regions[0]);
        self.reap(region);
        if let Some((burst, next)) = self.current.take() {
            q.stats.dropped(DropReason::SendFailed, (burst.num_packets() - next) as u64);
        }
        // The socket closes with this task; what it still held comes back.
        region.release_all(self.lent.reclaim_all());
    }
}
