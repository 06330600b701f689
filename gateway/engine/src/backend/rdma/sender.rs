//! The task of a RoCE port's TX queue, on the queue's core, sending on
//! the connection of the RX queue of its position: each packet of a TX
//! burst goes out as one SEND, or one RDMA WRITE where the application
//! named the peer's memory (each with its immediate, where the application
//! set one), of the very buffer the application wrote, lent to the device
//! until its completion; or it is an RDMA READ into that buffer, which
//! then goes to that RX queue's task to be delivered. While no connection
//! is up the bursts wait in the queue's ring (an RC sender loses nothing; a full ring tells the
//! application to slow down). A request the peer refuses (a WRITE outside
//! what it registered) leaves an RC queue pair in the error state, so the
//! sender then ends the connection: a client connects again, a server
//! takes the next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::{Connection, LendsToDevice, Link, ReadResult};
use super::verbs::{self, ibv_wc};
use crate::burst::{Burst, RemoteMemory};
use crate::memory::{LentBuffers, Region};
use crate::pacing::{self, Pacer};
use crate::port::Port;
use crate::stats::DropReason;
use crate::task::{QueueTask, SENDER_POLL_BUDGET};

/// Completions taken per poll.
const TX_BATCH: usize = 64;

pub(super) struct Sender {
    /// The TX queue's position in the port.
    queue: usize,
    link: Arc<Link>,
    lkey: u32,
    /// Most SENDs outstanding (the queue pair's send depth).
    depth: u32,
    /// The connection our SENDs are posted on.
    posted_on: Option<Arc<Connection>>,
    /// Whether we ended that connection (a request was refused): nothing
    /// more is posted on it.
    ended: bool,
    /// Buffers the device is sending, by buffer index (the work request id).
    lent: LentBuffers,
    /// By buffer index: the READ it is lent for (bytes, from where).
    reading: Vec<Option<(u32, RemoteMemory)>>,
    pacer: Option<Pacer>,
    /// A burst not all of whose packets are posted yet, and its next packet.
    current: Option<(Burst, usize)>,
    completions: [ibv_wc; TX_BATCH],
}

impl Sender {
    pub(super) fn new((port, queue): (&Port, usize), link: Arc<Link>, lkey: u32, depth: u32) -> Self {
        let q = &port.tx[queue];
        let num_bufs = region(port, queue).num_bufs();
        Self {
            queue,
            link,
            lkey,
            depth,
            posted_on: None,
            ended: false,
            lent: LentBuffers::keyed(num_bufs),
            reading: vec![None; num_bufs as usize],
            pacer: Pacer::for_queue(q),
            current: None,
            completions: verbs::completions(),
        }
    }

    /// Gives back the buffers of completed SENDs; counts the failed ones.
    fn reap(&mut self, port: &Port, connection: &Connection) -> usize {
        let Ok(taken) = connection.send_cq.poll(&mut self.completions) else { return 0 };
        let region = region(port, self.queue);
        let mut refused = None;
        for wc in &self.completions[..taken] {
            let buffer = wc.wr_id as u32;
            let Some(token) = self.lent.reclaim(buffer) else { continue };
            let read = self.reading[buffer as usize].take();
            if wc.status == verbs::IBV_WC_SUCCESS {
                self.link.finished.ok();
            } else {
                port.tx[self.queue].stats.dropped(DropReason::SendFailed, 1);
                self.link.finished.failed(1);
            }
            if !matches!(wc.status, verbs::IBV_WC_SUCCESS | verbs::IBV_WC_WR_FLUSH_ERR) {
                refused.get_or_insert(wc.status);
            }
            match read {
                Some((len, from)) if wc.status == verbs::IBV_WC_SUCCESS => {
                    if let Err(result) = self.link.reads.hand(ReadResult { token, len, from }) {
                        region.release(result.token);
                    }
                }
                _ => region.release(token),
            }
        }
        if let Some(status) = refused {
            tracing::error!(
                port = port.name,
                "a send failed ({}); ending the connection, whose queue pair is in the error state",
                verbs::status_text(status)
            );
            verbs::disconnect(&connection.id);
            self.ended = true;
        }
        taken
    }

    /// Posts SENDs of the current burst while the send queue has room; the number posted.
    fn post(&mut self, port: &Port, connection: &Connection) -> usize {
        let Some((burst, next)) = self.current.as_mut() else { return 0 };
        let q = &port.tx[self.queue];
        let region = region(port, self.queue);
        let (mut packets, mut bytes) = (0u64, 0u64);
        while (self.lent.lent() as u32) < self.depth && *next < burst.num_packets() {
            let index = *next;
            *next += 1;
            let (immediate, remote) = (burst.immediate(index), burst.remote(index));
            let Some((_, token, offset, len)) = burst.take_segment(0, index) else {
                // A packet the program freed before sending: nothing to post.
                self.link.finished.failed(1);
                continue;
            };
            let at = verbs::buffer_address(region, &token) + u64::from(offset);
            let buffer = token.index();
            let local = (at, len, self.lkey);
            self.reading[buffer as usize] = match remote {
                Some(from @ RemoteMemory::Read(..)) => {
                    // Delivered from offset 0 of the buffer: read to where its bytes start.
                    debug_assert_eq!(offset, 0, "TX buffers start at 0");
                    Some((len, from))
                }
                _ => None,
            };
            if let Err(e) = verbs::post_send(&connection.id, u64::from(buffer), local, immediate, remote) {
                self.reading[buffer as usize] = None;
                tracing::warn!(port = port.name, "ibv_post_send: {e}");
                region.release(token);
                q.stats.dropped(DropReason::SendFailed, 1);
                self.link.finished.failed(1);
                continue;
            }
            if let Err(token) = self.lent.lend_as(buffer, token) {
                region.release(token);
            }
            packets += 1;
            bytes += u64::from(len);
        }
        if packets > 0 {
            q.stats.delivered(packets, bytes);
        }
        if *next >= burst.num_packets() {
            self.current = None;
        }
        packets as usize
    }

    /// Lets go of a closed connection: its queue pair to the error state,
    /// then every SEND's buffer back once the device has completed or
    /// flushed it (the device may read a buffer until then). A flushed SEND
    /// counts as failed in `reap`, the peer may not have it; so does one
    /// never flushed.
    fn retire(&mut self, port: &Port) {
        let Some(old) = self.posted_on.take() else { return };
        self.ended = false;
        let stuck = self.flush(port, &old, region(port, self.queue).num_bufs());
        if stuck > 0 {
            port.tx[self.queue].stats.dropped(DropReason::SendFailed, stuck as u64);
            self.link.finished.failed(stuck as u64);
        }
    }
}

impl LendsToDevice for Sender {
    const WORK: &'static str = "send";

    fn lent(&mut self) -> &mut LentBuffers {
        &mut self.lent
    }

    fn complete(&mut self, port: &Port, connection: &Connection) -> usize {
        self.reap(port, connection)
    }
}

/// The region of TX queue `queue` (its one region, checked at open).
fn region(port: &Port, queue: usize) -> &Region {
    port.regions.get(port.tx[queue].segment_regions[0])
}

impl QueueTask for Sender {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let live = self.link.connection();
        if self.posted_on.as_ref().is_some_and(|on| !live.as_ref().is_some_and(|l| Arc::ptr_eq(l, on))) {
            self.retire(port);
        }
        let Some(connection) = live else { return 0 };
        self.posted_on = Some(Arc::clone(&connection));
        let mut moved = self.reap(port, &connection);
        if self.ended {
            return moved;
        }
        moved += self.post(port, &connection);
        while self.current.is_none()
            && moved < SENDER_POLL_BUDGET
            && let Some(burst) = pacing::next_burst(&port.tx[self.queue], self.pacer.as_mut())
        {
            self.current = Some((burst, 0));
            moved += self.post(port, &connection);
        }
        moved
    }

    fn finish(&mut self, port: &Port) {
        // Wait briefly for what is in flight, so a clean stop confirms it.
        if let Some(connection) = self.posted_on.clone() {
            let deadline = Instant::now() + Duration::from_millis(500);
            while self.lent.lent() > 0 && Instant::now() < deadline {
                if self.reap(port, &connection) == 0 {
                    std::thread::yield_now();
                }
            }
        }
        self.retire(port);
        if let Some((burst, next)) = self.current.take() {
            let unsent = (burst.num_packets() - next) as u64;
            port.tx[self.queue].stats.dropped(DropReason::SendFailed, unsent);
            self.link.finished.failed(unsent);
        }
    }
}
