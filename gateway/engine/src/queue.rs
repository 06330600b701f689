//! RX and TX queues: the burst ring between a worker and the application,
//! the queue's burst metadata pool and its counters.

use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use daqiri_config::model::{PollMode, Queue as QueueConfig, TxOffload};

use crate::burst::{Burst, BurstShape, EngineId, MetaPool, PacketFields};
use crate::doorbell::Doorbell;
use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::staging::QueueCopier;
use crate::stats::{DropReason, QueueStats};

/// Most packets one direct-mode poll can return (a socket's UDP GRO batch).
pub(crate) const DIRECT_BURST_PACKETS: usize = 512;

/// One queue of a port, either direction.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) id: u16,
    pub(crate) name: String,
    pub(crate) cpu_core: Option<u32>,
    pub(crate) poll_mode: PollMode,
    pub(crate) batch_size: usize,
    /// RX: deliver a partial burst after this long; `None` = full bursts only.
    pub(crate) timeout: Option<Duration>,
    /// Region index per segment, in segment order.
    pub(crate) segment_regions: Vec<u16>,
    pub(crate) ring: ArrayQueue<Burst>,
    pub(crate) meta: Arc<MetaPool>,
    pub(crate) stats: QueueStats,
    /// TX `offloads: [tx_eth_src]`: the port's MAC goes into each frame's source address.
    pub(crate) fill_eth_src: bool,
    /// TX `pacing_mbps` above 0: the rate its sender keeps to.
    pub(crate) pacing_mbps: Option<u64>,
    /// RX `busy_poll_us` (AF_XDP): how long a poll may busy-poll the socket's NAPI.
    #[cfg_attr(not(feature = "af_xdp"), allow(dead_code))]
    pub(crate) busy_poll_us: Option<u32>,
    /// The worker thread that runs this queue, once started (none in direct mode).
    pub(crate) worker: OnceLock<WorkerThread>,
    /// RX into a `device` region through a CPU backend: copies each burst's
    /// staged segments to the GPU as it is delivered.
    pub(crate) copier: QueueCopier,
    /// TX: rung by `send_tx_burst`, so a sleeping worker wakes; made the
    /// first time a worker would sleep on it (`None` inside: no eventfd).
    doorbell: OnceLock<Option<Doorbell>>,
    /// TX: sends a burst in the caller's thread when nothing is queued before
    /// it (a backend that can, set when its tasks are made).
    pub(crate) inline: OnceLock<Box<dyn InlineSend>>,
}

/// A TX queue's sender, callable from `send_tx_burst`'s thread: it sends a
/// burst now, or hands it back to be queued for the worker. It must hand
/// back any burst that could overtake one queued before it.
pub(crate) trait InlineSend: Send + Sync {
    fn send_now(&self, queue: &Queue, burst: Burst) -> std::result::Result<(), Burst>;
}

impl std::fmt::Debug for dyn InlineSend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InlineSend")
    }
}

impl Queue {
    /// A queue of `port`; `fields` says what its packets carry besides their bytes.
    pub(crate) fn new(
        config: &QueueConfig,
        port: u16,
        meta_entries: u32,
        regions: &Arc<RegionTable>,
        engine: EngineId,
        fields: PacketFields,
    ) -> Result<Self> {
        let segment_regions = config
            .memory_regions
            .iter()
            .map(|name| regions.index_of(name).expect("validated: queue regions exist"))
            .collect::<Vec<_>>();
        if segment_regions.len() > crate::burst::MAX_SEGMENTS {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "queue \"{}\" has {} memory regions; at most {} segments are supported",
                    config.name,
                    segment_regions.len(),
                    crate::burst::MAX_SEGMENTS
                ),
            ));
        }
        // Direct queues have no batch_size: a burst is what one poll returned.
        let batch_size = match config.poll_mode {
            PollMode::Indirect => config.batch_size() as usize,
            PollMode::Direct => DIRECT_BURST_PACKETS,
        };
        let timeout = match config.timeout_us() {
            0 => None,
            us => Some(Duration::from_micros(us)),
        };
        let shape =
            BurstShape { engine, port, queue: config.id, batch_size, segment_regions: segment_regions.clone(), fields };
        Ok(Self {
            id: config.id,
            name: config.name.clone(),
            cpu_core: config.pinned_core().map(|c| c.0),
            poll_mode: config.poll_mode,
            batch_size,
            timeout,
            segment_regions,
            ring: ArrayQueue::new(meta_entries.max(1) as usize),
            meta: MetaPool::new(meta_entries, &shape, Arc::clone(regions)),
            stats: QueueStats::default(),
            fill_eth_src: config.offloads.contains(&TxOffload::TxEthSrc),
            pacing_mbps: config.pacing_mbps.filter(|&mbps| mbps > 0),
            busy_poll_us: config.busy_poll_us,
            worker: OnceLock::new(),
            copier: QueueCopier::new(),
            doorbell: OnceLock::new(),
            inline: OnceLock::new(),
        })
    }

    /// The queue's doorbell, for a worker about to sleep.
    pub(crate) fn doorbell(&self) -> Option<&Doorbell> {
        self.doorbell.get_or_init(Doorbell::new).as_ref()
    }

    /// Wakes the worker sleeping on this queue's doorbell, if one is; call
    /// after a burst went into the ring.
    pub(crate) fn ring_doorbell(&self) {
        // Pairs with the fence in `Doorbell::arm`: a worker that armed
        // after our look at the lock sees the burst on its last look.
        fence(Ordering::SeqCst);
        if let Some(Some(doorbell)) = self.doorbell.get() {
            doorbell.ring();
        }
    }

    /// Hands a finished RX burst to the application; a full ring drops it
    /// (counted). Whether it was delivered.
    pub(crate) fn deliver(&self, burst: Burst) -> bool {
        self.try_deliver(burst)
            .map_err(|dropped| self.stats.dropped(DropReason::RingFull, u64::from(dropped.source_packets())))
            .is_ok()
    }

    /// Hands a finished RX burst over, or hands it back when the ring is full
    /// (byte streams, where a drop would corrupt the stream, retry later).
    /// An aggregate counts the packets that went into it. A burst whose copy
    /// to the GPU cannot start is dropped (counted as `device_error`).
    pub(crate) fn try_deliver(&self, mut burst: Burst) -> Result<(), Burst> {
        let (packets, bytes) = (u64::from(burst.source_packets()), burst.total_bytes());
        if let Err(e) = self.copier.copy(&mut burst) {
            tracing::error!(queue = %self.name, error = %e, "cannot copy a burst into GPU memory; it is dropped");
            self.stats.dropped(DropReason::DeviceError, packets);
            return Ok(());
        }
        self.ring.push(burst)?;
        self.stats.delivered(packets, bytes);
        Ok(())
    }

    /// Drops every burst waiting in the ring; returns the packets discarded.
    pub(crate) fn flush(&self) -> u64 {
        self.discard(DropReason::Flushed)
    }

    /// Drops every burst waiting in the ring, counted as `reason`; returns
    /// the packets discarded.
    pub(crate) fn discard(&self, reason: DropReason) -> u64 {
        let mut packets = 0;
        while let Some(burst) = self.ring.pop() {
            packets += burst.num_packets() as u64;
        }
        self.stats.dropped(reason, packets);
        packets
    }
}

/// The thread that runs a queue's work, as `/api/v1/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerThread {
    /// Thread name (`rx-<interface>-<queue>`, `tx-...`, or `core-<n>` when
    /// queues share the core).
    pub name: String,
    /// Kernel thread id (`/proc/<pid>/task/<tid>`).
    pub tid: u32,
    /// The core it is pinned to; `None` when it runs unpinned.
    pub core: Option<u32>,
}
