//! RX reorder plans (`rx.reorder_configs`, `reorder_type: cpu`): packets of
//! the plan's flows are placed by sequence number into one output buffer
//! per batch, converted if `data_types` asks, and delivered as one
//! aggregate burst (`REORDERED`) through the queue's ordinary ring.
//!
//! Batches are kept **by batch id**, several open at once, not by arrival
//! as DAQIRI does: see [`window`] for the rules and `../shared/reorder.md`
//! for the semantics both follow.

mod bits;
pub mod convert;
mod encode;
#[cfg(target_arch = "x86_64")]
mod fp16_x86;
// The GPU side of `reorder_type: gpu` plans; builds without CUDA get twins
// in which no GPU plan exists.
#[cfg_attr(not(feature = "cuda"), path = "gpu_plan_absent.rs")]
mod gpu_plan;
mod held;
#[cfg_attr(not(feature = "cuda"), path = "on_gpu_absent.rs")]
mod on_gpu;
mod replay;
mod window;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use daqiri_config::model::{BitField, DataTypes, MissingAction, ReorderConfig, ReorderType};

use crate::burst::{BurstShape, EngineId, MetaPool};
use crate::error::Result;
use crate::memory::RegionTable;

pub use replay::Replay;
pub(crate) use window::Reorderer;

/// Most batches of one plan open at once; opening one more emits the oldest.
pub const MAX_OPEN_BATCHES: usize = 8;
/// Most aggregates of one plan in flight (in the ring or held by the application).
const MAX_AGGREGATES: u32 = 1024;

/// How a packet's batch id is found.
#[derive(Debug, Clone, Copy)]
enum BatchRule {
    /// `seq_batch_number`: a field of its own.
    Field(BitField),
    /// `seq_packets_per_batch`: the sequence number divided by packets per batch.
    SequenceDivided,
}

/// One plan, fixed for the engine's life: what the window code reads.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Position in the interface's `reorder_configs` (a burst names its plan by it).
    pub(crate) index: u16,
    pub(crate) name: String,
    pub(crate) flow_ids: Vec<u32>,
    /// RX queue id the plan's flows steer to.
    pub(crate) queue_id: u16,
    payload_offset: usize,
    sequence: BitField,
    batch: BatchRule,
    packets_per_batch: u32,
    /// Distinct batch ids before they wrap around.
    batch_ids: u64,
    /// `missing_action`: whether an incomplete aggregate is delivered or discarded.
    missing_action: MissingAction,
    data_types: Option<DataTypes>,
    /// The output region, and the metadata pool of the aggregates it holds.
    pub(crate) output_region: u16,
    pub(crate) meta: Arc<MetaPool>,
    pub(crate) counters: PlanCounters,
    /// `reorder_type: gpu`: the kernels and the stream the plan's batches run on.
    pub(crate) gpu: Option<gpu_plan::GpuPlan>,
}

impl Plan {
    /// The plan of `config`, the `index`-th of port `port`, taking packets
    /// that land in region `source_region` and delivering into queue `queue_id`.
    pub(crate) fn new(
        config: &ReorderConfig,
        index: u16,
        (port, queue_id, source_region): (u16, u16, u16),
        regions: &Arc<RegionTable>,
        engine: EngineId,
    ) -> Result<Self> {
        let output_region = regions.index_of(&config.memory_region).expect("validated: the output region exists");
        let (sequence, batch, packets_per_batch, batch_ids) =
            match (&config.method.seq_batch_number, &config.method.seq_packets_per_batch) {
                (Some(m), _) => {
                    let (seq, batch) = (m.sequence_number.bit_width, m.batch_number.bit_width);
                    (m.sequence_number, BatchRule::Field(m.batch_number), 1u32 << (seq - batch), 1u64 << batch)
                }
                (None, Some(m)) => (
                    m.sequence_number,
                    BatchRule::SequenceDivided,
                    m.packets_per_batch,
                    (1u64 << m.sequence_number.bit_width) / u64::from(m.packets_per_batch),
                ),
                (None, None) => unreachable!("validated: one method"),
            };
        let shape = BurstShape {
            engine,
            port,
            queue: queue_id,
            batch_size: 1,
            segment_regions: vec![output_region],
            fields: Default::default(),
        };
        let aggregates = regions.get(output_region).num_bufs().min(MAX_AGGREGATES);
        let gpu = match config.reorder_type {
            ReorderType::Cpu => None,
            ReorderType::Gpu => Some(gpu_plan::GpuPlan::new(
                &config.name,
                (regions.get(source_region), regions.get(output_region)),
                packets_per_batch,
                regions,
            )?),
        };
        Ok(Self {
            index,
            name: config.name.clone(),
            flow_ids: config.flow_ids.clone(),
            queue_id,
            payload_offset: config.payload_byte_offset as usize,
            sequence,
            batch,
            packets_per_batch,
            batch_ids,
            missing_action: config.missing_action(),
            data_types: config.data_types.clone(),
            output_region,
            meta: MetaPool::new(aggregates, &shape, Arc::clone(regions)),
            counters: PlanCounters::default(),
            gpu,
        })
    }

    /// The GPU the plan's kernels run on; `None` for a CPU plan.
    pub(crate) fn gpu_ordinal(&self) -> Option<u32> {
        self.gpu.as_ref().map(gpu_plan::GpuPlan::ordinal)
    }

    /// A sequence number as (its quotient, its remainder) by packets per
    /// batch: the batch id under `seq_packets_per_batch`, and the slot.
    /// Shifts for a power of two, the usual case: a division per packet
    /// costs more than the rest of the bookkeeping.
    fn split(&self, sequence: u32) -> (u32, u32) {
        let n = self.packets_per_batch;
        if n.is_power_of_two() {
            (sequence >> n.trailing_zeros(), sequence & (n - 1))
        } else {
            (sequence / n, sequence % n)
        }
    }

    /// Counters and state, for stats, status and metrics.
    pub(crate) fn snapshot(&self) -> PlanStats {
        let c = &self.counters;
        PlanStats {
            name: self.name.clone(),
            queue_id: self.queue_id,
            gpu: self.gpu_ordinal(),
            packets_per_batch: self.packets_per_batch,
            open_batches: c.open_batches.load(Relaxed),
            batches_in_flight: c.batches_in_flight.load(Relaxed),
            batches_complete: c.batches_complete.load(Relaxed),
            batches_timed_out: c.batches_timed_out.load(Relaxed),
            batches_evicted: c.batches_evicted.load(Relaxed),
            batches_dropped: c.batches_dropped.load(Relaxed),
            batches_discarded: c.batches_discarded.load(Relaxed),
            packets_discarded: c.packets_discarded.load(Relaxed),
            packets_placed: c.packets_placed.load(Relaxed),
            packets_missing: c.packets_missing.load(Relaxed),
            packets_late: c.packets_late.load(Relaxed),
            packets_duplicate: c.packets_duplicate.load(Relaxed),
            packets_out_of_window: c.packets_out_of_window.load(Relaxed),
            packets_rejected: c.packets_rejected.load(Relaxed),
        }
    }
}

/// Live counters of one plan, bumped by the queue's worker.
#[derive(Debug, Default)]
pub(crate) struct PlanCounters {
    pub(crate) open_batches: AtomicU32,
    pub(crate) batches_in_flight: AtomicU32,
    pub(crate) batches_complete: AtomicU64,
    pub(crate) batches_timed_out: AtomicU64,
    pub(crate) batches_evicted: AtomicU64,
    pub(crate) batches_dropped: AtomicU64,
    pub(crate) batches_discarded: AtomicU64,
    pub(crate) packets_discarded: AtomicU64,
    pub(crate) packets_placed: AtomicU64,
    pub(crate) packets_missing: AtomicU64,
    pub(crate) packets_late: AtomicU64,
    pub(crate) packets_duplicate: AtomicU64,
    pub(crate) packets_out_of_window: AtomicU64,
    pub(crate) packets_rejected: AtomicU64,
}

/// Adds one to a plan counter.
pub(super) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// A plan's counters have one writer, the queue's worker, so adding is a
/// plain load and store: a locked add would wait for the stores of the
/// packet just copied to drain (half the time of a 1 KiB placement).
pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// A point-in-time copy of one plan's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// The plan's `name`.
    pub name: String,
    /// The RX queue its aggregates are delivered to.
    pub queue_id: u16,
    /// `reorder_type: gpu`: the GPU its kernels run on; `None` for a CPU plan.
    pub gpu: Option<u32>,
    /// Packets (slots) per batch.
    pub packets_per_batch: u32,
    /// Batches being filled now.
    pub open_batches: u32,
    /// GPU plans: batches whose kernel was launched and has not finished
    /// (their packets' buffers are still held).
    pub batches_in_flight: u32,
    /// Aggregates emitted with every slot filled.
    pub batches_complete: u64,
    /// Aggregates emitted by the queue's `timeout_us` before they were full.
    pub batches_timed_out: u64,
    /// Aggregates emitted before they were full because a newer batch needed
    /// the window (more than [`MAX_OPEN_BATCHES`] open), or at shutdown.
    pub batches_evicted: u64,
    /// Aggregates lost because the queue had no room (ring or metadata); also
    /// counted in the queue's drops.
    pub batches_dropped: u64,
    /// Aggregates discarded incomplete (`missing_action: drop`), whether a
    /// timeout, the window or shutdown closed them; not in `batches_timed_out`
    /// or `batches_evicted`.
    pub batches_discarded: u64,
    /// Packets placed into aggregates that were then discarded.
    pub packets_discarded: u64,
    /// Packets placed into an aggregate.
    pub packets_placed: u64,
    /// Empty slots of incomplete aggregates (zero-filled, or discarded with
    /// the aggregate): their packet never came.
    pub packets_missing: u64,
    /// Packets whose batch had already been emitted.
    pub packets_late: u64,
    /// Packets for a slot already filled.
    pub packets_duplicate: u64,
    /// Packets of a batch too far behind the newest to open.
    pub packets_out_of_window: u64,
    /// Packets that cannot be placed: shorter than their fields or the
    /// payload offset, not a whole number of samples, a payload length other
    /// than their batch's, or a slot beyond the output buffer.
    pub packets_rejected: u64,
}
