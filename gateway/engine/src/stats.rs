//! Per-queue, per-port and per-flow counters. Workers bump plain atomics;
//! readers (status line, admin API, metrics) take [`QueueStatsSnapshot`]s.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use crate::error::Status;

/// Why a packet was dropped. Each maps onto the DAQIRI status of its cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The memory region had no free buffer for the packet.
    NoFreePacketBuffers,
    /// The queue had no free burst metadata entry.
    NoFreeBurstBuffers,
    /// The queue's burst ring was full: the application is not keeping up.
    RingFull,
    /// The datagram was larger than the buffer.
    Truncated,
    /// No flow matched and flow isolation is on.
    UnmatchedFlow,
    /// The kernel dropped it before the worker read it (socket buffer
    /// overflow): one per buffer dropped, so exact, or under UDP GRO the
    /// first datagram of each coalesced run dropped.
    SocketOverflow,
    /// Under UDP GRO, the estimated rest of the coalesced runs the kernel
    /// dropped: it counts a run once and does not say how long it was.
    SocketOverflowEstimated,
    /// `drop_all_traffic` was in effect.
    DropAllTraffic,
    /// Discarded by `flush_port_queue`.
    Flushed,
    /// The kernel refused to send it.
    SendFailed,
    /// A GPU kernel or copy meant for it failed.
    DeviceError,
    /// The NIC had no free RX descriptor: the poller fell behind (DPDK `imissed`).
    NicMissed,
    /// The NIC received it damaged (DPDK `ierrors`: bad CRC, runt, ...).
    NicRxError,
    /// Never arrived: the sender's sequence numbers skipped it (a RoCE
    /// ingest ring's immediates), so it was lost on the way.
    SequenceGap,
    /// TX: taken by `send_tx_burst`, still queued when the engine shut
    /// down, so never sent.
    Unsent,
}

impl DropReason {
    /// Every reason, in a fixed order.
    pub const ALL: [DropReason; 15] = [
        DropReason::NoFreePacketBuffers,
        DropReason::NoFreeBurstBuffers,
        DropReason::RingFull,
        DropReason::Truncated,
        DropReason::UnmatchedFlow,
        DropReason::SocketOverflow,
        DropReason::SocketOverflowEstimated,
        DropReason::DropAllTraffic,
        DropReason::Flushed,
        DropReason::SendFailed,
        DropReason::DeviceError,
        DropReason::NicMissed,
        DropReason::NicRxError,
        DropReason::SequenceGap,
        DropReason::Unsent,
    ];

    /// The label value (`daqiri.drop.reason`).
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::NoFreePacketBuffers => "no_free_packet_buffers",
            DropReason::NoFreeBurstBuffers => "no_free_burst_buffers",
            DropReason::RingFull => "ring_full",
            DropReason::Truncated => "truncated",
            DropReason::UnmatchedFlow => "unmatched_flow",
            DropReason::SocketOverflow => "socket_overflow",
            DropReason::SocketOverflowEstimated => "socket_overflow_estimated",
            DropReason::DropAllTraffic => "drop_all_traffic",
            DropReason::Flushed => "flushed",
            DropReason::SendFailed => "send_failed",
            DropReason::DeviceError => "device_error",
            DropReason::NicMissed => "nic_missed",
            DropReason::NicRxError => "nic_rx_error",
            DropReason::SequenceGap => "sequence_gap",
            DropReason::Unsent => "unsent",
        }
    }

    /// The DAQIRI status of the failure behind this drop; `None` for drops
    /// that are policy (isolation, `drop_all_traffic`, flush), not failure.
    pub const fn status(self) -> Option<Status> {
        match self {
            DropReason::NoFreePacketBuffers => Some(Status::NoFreePacketBuffers),
            DropReason::NoFreeBurstBuffers => Some(Status::NoFreeBurstBuffers),
            DropReason::RingFull
            | DropReason::SocketOverflow
            | DropReason::SocketOverflowEstimated
            | DropReason::NicMissed => Some(Status::NoSpaceAvailable),
            DropReason::Truncated => Some(Status::InvalidParameter),
            DropReason::UnmatchedFlow | DropReason::DropAllTraffic | DropReason::Flushed | DropReason::Unsent => None,
            DropReason::SendFailed | DropReason::DeviceError | DropReason::NicRxError | DropReason::SequenceGap => {
                Some(Status::GenericFailure)
            }
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Drop counts by reason, in [`DropReason::ALL`] order.
pub type DropCounts = [u64; DropReason::ALL.len()];

/// Live counters of one queue (or of a port, for drops before a queue is known).
#[derive(Debug, Default)]
pub struct QueueStats {
    packets: CachePadded<AtomicU64>,
    bytes: AtomicU64,
    bursts: AtomicU64,
    drops: [AtomicU64; DropReason::ALL.len()],
}

impl QueueStats {
    /// Counts one delivered burst.
    pub(crate) fn delivered(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
        self.bursts.fetch_add(1, Relaxed);
    }

    /// Counts dropped packets.
    pub(crate) fn dropped(&self, reason: DropReason, packets: u64) {
        self.drops[reason.index()].fetch_add(packets, Relaxed);
    }

    /// A consistent-enough copy for display (each counter is read once).
    pub fn snapshot(&self) -> QueueStatsSnapshot {
        let mut drops = [0; DropReason::ALL.len()];
        for (d, counter) in drops.iter_mut().zip(&self.drops) {
            *d = counter.load(Relaxed);
        }
        QueueStatsSnapshot {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            bursts: self.bursts.load(Relaxed),
            drops,
        }
    }
}

/// Counter values at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStatsSnapshot {
    /// Packets delivered (RX: handed to the application; TX: sent).
    pub packets: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Bursts delivered.
    pub bursts: u64,
    /// Drops by reason, in [`DropReason::ALL`] order.
    pub drops: DropCounts,
}

impl QueueStatsSnapshot {
    /// Drops for one reason.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    /// Drops over all reasons.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Non-zero drop counts with their reason.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.drops(*r))).filter(|(_, n)| *n > 0)
    }
}

/// Live counters of one flow.
#[derive(Debug, Default)]
pub struct FlowStats {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl FlowStats {
    pub(crate) fn matched(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    /// `(packets, bytes)` matched so far.
    pub fn snapshot(&self) -> (u64, u64) {
        (self.packets.load(Relaxed), self.bytes.load(Relaxed))
    }
}
