//! A DPDK TX queue's task: the application's bursts go out as mbuf chains
//! over the very buffers it wrote. Sending hands each buffer to the PMD,
//! which frees the mbuf into its mempool once the NIC is done with it; the
//! mempool is the region's free list, so that free is the completion and
//! no lent-buffer table is needed.

use std::sync::Arc;
use std::time::Duration;

use super::rte::{self, EthPort, Mempool, TxMbufs};
use crate::burst::MAX_SEGMENTS;
use crate::pacing::{self, Pacer};
use crate::port::Port;
use crate::stats::DropReason;
use crate::task::{QueueTask, SENDER_POLL_BUDGET};

/// Packets given to one `rte_eth_tx_burst`.
const TX_BURST: usize = 64;

pub(super) struct Sender {
    /// The TX queue's position on the port (its DPDK queue index).
    queue: usize,
    eth: Arc<EthPort>,
    /// The queue's pools, one per segment.
    pools: Vec<Arc<Mempool>>,
    mac: [u8; 6],
    /// Packets the PMD has not taken yet (its ring was full).
    pending: TxMbufs,
    registered: bool,
    pacer: Option<Pacer>,
    /// Packets went out since the PMD last freed what the NIC sent.
    unreclaimed: bool,
    /// The PMD can free sent mbufs on request (`rte_eth_tx_done_cleanup`).
    reclaims: bool,
}

impl Sender {
    pub(super) fn new(
        queue: usize,
        eth: Arc<EthPort>,
        pools: Vec<Arc<Mempool>>,
        mac: [u8; 6],
        pacer: Option<Pacer>,
    ) -> Self {
        Self {
            queue,
            eth,
            pools,
            mac,
            pending: TxMbufs::with_capacity(TX_BURST),
            registered: false,
            pacer,
            unreclaimed: false,
            reclaims: true,
        }
    }

    /// Offers the pending packets to the PMD; true once none is left.
    fn flush(&mut self, port: &Port) -> bool {
        if self.pending.len() > 0 {
            let (packets, bytes) = self.eth.tx_burst(self.queue as u16, &mut self.pending);
            if packets > 0 {
                port.tx[self.queue].stats.delivered(packets as u64, bytes);
                self.unreclaimed = true;
            }
        }
        self.pending.len() == 0
    }
}

impl QueueTask for Sender {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        if !self.registered {
            rte::register_thread();
            self.registered = true;
        }
        // Behind a full PMD ring, new bursts wait in the queue's ring.
        if !self.flush(port) {
            return 0;
        }
        let q = &port.tx[self.queue];
        let mut moved = 0;
        while self.pending.len() == 0
            && moved < SENDER_POLL_BUDGET
            && let Some(mut burst) = pacing::next_burst(q, self.pacer.as_mut())
        {
            let segments = burst.segments_per_packet().min(MAX_SEGMENTS);
            for index in 0..burst.num_packets() {
                let mut parts: [(&Mempool, u32, u16, u16); MAX_SEGMENTS] = [(&self.pools[0], 0, 0, 0); MAX_SEGMENTS];
                let mut n = 0;
                for s in 0..segments {
                    let Some((region, mut token, offset, len)) = burst.take_segment(s, index) else { continue };
                    let region = port.regions.get(region);
                    if n == 0 && q.fill_eth_src && len >= 12 {
                        let frame = &mut region.bytes_mut(&mut token)[usize::from(offset)..];
                        frame[6..12].copy_from_slice(&self.mac);
                    }
                    // Segments fit an mbuf: buf_size <= 65535 (checked at the mempool).
                    parts[n] = (&self.pools[s], region.hand_over(token), offset, len as u16);
                    n += 1;
                }
                if n > 0 {
                    self.pending.push(&parts[..n]);
                    moved += 1;
                }
                if self.pending.len() == TX_BURST {
                    self.flush(port);
                }
            }
            // The burst, now empty of buffers, returns its metadata as it drops.
        }
        self.flush(port);
        if moved == 0 && self.unreclaimed && self.reclaims && self.pending.len() == 0 {
            // Idle: the buffers the NIC sent go back to the region now, not
            // when the PMD's ring next needs room (a PCI NIC's ring holds
            // hundreds). PMDs that cannot (virtio) keep them until then.
            self.reclaims = self.eth.reclaim_sent(self.queue as u16);
            self.unreclaimed = false;
        }
        moved
    }

    fn finish(&mut self, port: &Port) {
        let unsent = self.pending.free_all();
        port.tx[self.queue].stats.dropped(DropReason::SendFailed, unsent as u64);
    }
}
