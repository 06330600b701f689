//! The batches of a queue's plans, kept by batch id.
//!
//! A packet goes to the open batch of its id. A batch not open is opened
//! when its id is ahead of the newest seen (by at most half the id space:
//! ids wrap around, whatever `cyclic_sequence` says, which upstream reads
//! for `reorder_engine: hw` only) or at most [`MAX_OPEN_BATCHES`] behind
//! it and not yet emitted; a packet
//! of a batch already emitted is late; one further behind is out of
//! window. A batch is emitted once every slot is filled, once the queue's
//! `timeout_us` has passed since its first packet (it does not slide), or
//! when a newer batch needs its place in the window (the oldest goes
//! first). Slots still empty are counted as missing and zero-filled, or,
//! under `missing_action: drop`, the incomplete batch is discarded.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Instant, SystemTime};

use daqiri_config::model::MissingAction;

use super::held::{HeldBatch, HeldPacket};
use super::on_gpu;
use super::{BatchRule, MAX_OPEN_BATCHES, Plan, add, bits, bump, convert};
use crate::burst::{Aggregate, PacketSlot, flags};
use crate::memory::{BufToken, RegionTable};
use crate::queue::Queue;
use crate::stats::DropReason;

/// Emitted batch ids remembered to tell a late packet from a new batch.
const REMEMBERED: usize = 2 * MAX_OPEN_BATCHES;

/// The plans of one RX queue and their open batches; owned by the worker
/// that delivers to the queue.
#[derive(Debug)]
pub(crate) struct Reorderer {
    /// Each plan with the batches it has open.
    windows: Vec<(Arc<Plan>, Window)>,
}

impl Reorderer {
    pub(crate) fn new(plans: &[Arc<Plan>]) -> Self {
        Self { windows: plans.iter().map(|plan| (Arc::clone(plan), Window::default())).collect() }
    }

    /// Takes a packet whose flow belongs to one of the plans: places it and
    /// gives its buffers back. Any other packet is handed back untouched.
    pub(crate) fn accept(&mut self, queue: &Queue, slot: PacketSlot, regions: &RegionTable) -> Option<PacketSlot> {
        let Some(plan) = slot.flow_id().and_then(|flow| self.plan_of(flow)) else { return Some(slot) };
        if self.windows[plan].0.gpu.is_some() {
            let mut slot = slot;
            if let Some((token, offset, len)) = slot.take_first_segment() {
                let (plan, window) = &mut self.windows[plan];
                window.hold(plan, HeldPacket { token, offset }, len as usize, queue, regions);
            }
            slot.release(regions, &queue.segment_regions);
            return None;
        }
        if let Some((token, offset, len)) = slot.first_segment() {
            let source = regions.get(queue.segment_regions[0]);
            let frame = &source.bytes(token)[usize::from(offset)..][..len as usize];
            self.place(plan, queue, frame, regions);
        }
        slot.release(regions, &queue.segment_regions);
        None
    }

    /// The position of the plan of this queue that takes packets of `flow`.
    pub(crate) fn plan_of(&self, flow: u32) -> Option<usize> {
        self.windows.iter().position(|(plan, _)| plan.flow_ids.contains(&flow))
    }

    /// Places the bytes of one packet into the batch of plan `at` (from [`Self::plan_of`]).
    pub(crate) fn place(&mut self, at: usize, queue: &Queue, data: &[u8], regions: &RegionTable) {
        let (plan, window) = &mut self.windows[at];
        window.accept(plan, data, queue, regions);
    }

    /// Emits the batches whose timeout has passed; GPU plans hand back the
    /// buffers of kernels that finished.
    pub(crate) fn flush_due(&mut self, queue: &Queue, now: Instant, regions: &RegionTable) {
        for (plan, window) in &mut self.windows {
            window.in_flight.reap(plan, queue, false);
            let Some(timeout) = queue.timeout else { continue };
            while let Some(at) = window.open.iter().position(|b| now.duration_since(b.started) >= timeout) {
                window.emit(plan, at, Emitted::Timeout, queue, regions);
            }
        }
    }

    /// Emits every open batch (the engine is stopping) and waits for GPU plans' kernels.
    pub(crate) fn flush_all(&mut self, queue: &Queue, regions: &RegionTable) {
        for (plan, window) in &mut self.windows {
            while !window.open.is_empty() {
                window.emit(plan, 0, Emitted::Evicted, queue, regions);
            }
            window.in_flight.reap(plan, queue, true);
        }
    }
}

/// Why a batch was emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emitted {
    Complete,
    Timeout,
    Evicted,
}

/// One plan's batches; the plan itself is passed to each call.
#[derive(Debug, Default)]
struct Window {
    open: Vec<OpenBatch>,
    /// The newest batch id opened.
    newest: Option<u64>,
    /// The last batch ids emitted, newest last.
    emitted: VecDeque<u64>,
    /// GPU plans: launched batches whose kernels may still run.
    in_flight: on_gpu::InFlight,
}

#[derive(Debug)]
struct OpenBatch {
    id: u64,
    /// The output buffer.
    token: BufToken,
    /// One bit per slot.
    filled: Vec<u64>,
    placed: u32,
    /// Output bytes per slot, from the batch's first packet.
    slot_len: usize,
    /// Slots that fit the output buffer.
    slots: u32,
    started: Instant,
    timestamp_ns: u64,
    /// GPU plans: per slot, the buffer of the packet placed there, and
    /// payload bytes per packet (empty and 0 for CPU plans).
    held: Vec<Option<HeldPacket>>,
    payload_len: usize,
}

impl OpenBatch {
    /// Gives the batch's buffers back unused: its output buffer, and the
    /// packets a GPU plan held for its kernel (in the queue's region).
    fn give_back(self, plan: &Plan, queue: &Queue, regions: &RegionTable) {
        regions.get(queue.segment_regions[0]).release_all(self.held.into_iter().flatten().map(|p| p.token));
        regions.get(plan.output_region).release(self.token);
    }
}

/// Where a packet goes: its open batch and its slot there.
struct Target {
    at: usize,
    slot: usize,
}

/// Where a batch id not open stands.
enum Standing {
    /// Newer than every batch seen: opens and becomes the newest.
    Ahead,
    /// Older than the newest, within the window and not emitted: opens.
    Behind,
    Late,
    OutOfWindow,
}

impl Window {
    /// CPU plans: copies (converting) the payload into its slot.
    fn accept(&mut self, plan: &Plan, data: &[u8], queue: &Queue, regions: &RegionTable) {
        let Some(Target { at, slot }) = self.locate(plan, data, queue, regions) else { return };
        let batch = &mut self.open[at];
        let len = batch.slot_len;
        let payload = &data[plan.payload_offset..];
        let out = &mut regions.get(plan.output_region).bytes_mut(&mut batch.token)[slot * len..][..len];
        match &plan.data_types {
            Some(types) => convert::convert(types, payload, out),
            None => out.copy_from_slice(payload),
        }
        self.filled(plan, Target { at, slot }, queue, regions);
    }

    /// GPU plans: keeps the packet's buffer (a frame of `len` bytes) in its
    /// slot until the batch's kernel has read it; gives it back otherwise.
    fn hold(&mut self, plan: &Plan, packet: HeldPacket, len: usize, queue: &Queue, regions: &RegionTable) {
        let source = regions.get(queue.segment_regions[0]);
        let data = &source.bytes(&packet.token)[usize::from(packet.offset)..][..len];
        let Some(Target { at, slot }) = self.locate(plan, data, queue, regions) else {
            return source.release(packet.token);
        };
        let batch = &mut self.open[at];
        batch.payload_len = len - plan.payload_offset;
        batch.held[slot] = Some(packet);
        self.filled(plan, Target { at, slot }, queue, regions);
    }

    /// Finds the open batch (opening it if needed) and the slot of a
    /// packet; `None`, counted, when it has no place.
    fn locate(&mut self, plan: &Plan, data: &[u8], queue: &Queue, regions: &RegionTable) -> Option<Target> {
        let counters = &plan.counters;
        let reject = || {
            bump(&counters.packets_rejected);
            None
        };
        let Some(sequence) = bits::read(data, plan.sequence) else { return reject() };
        let (quotient, slot) = plan.split(sequence);
        let id = match plan.batch {
            BatchRule::Field(field) => match bits::read(data, field) {
                Some(id) => u64::from(id),
                None => return reject(),
            },
            BatchRule::SequenceDivided => u64::from(quotient),
        };
        let slot = slot as usize;
        let Some(payload) = data.get(plan.payload_offset..) else { return reject() };
        let slot_len = match &plan.data_types {
            Some(types) => match convert::output_len(types, payload.len()) {
                Some(len) => len,
                None => return reject(),
            },
            None => payload.len(),
        };
        let at = match self.open.iter().position(|b| b.id == id) {
            Some(at) => at,
            None => match self.standing(plan, id) {
                Standing::Late => {
                    bump(&counters.packets_late);
                    return None;
                }
                Standing::OutOfWindow => {
                    bump(&counters.packets_out_of_window);
                    return None;
                }
                standing => self.open_batch(plan, id, slot_len, standing, queue, regions)?,
            },
        };
        let batch = &self.open[at];
        if batch.slot_len != slot_len || slot >= batch.slots as usize {
            return reject();
        }
        if batch.filled[slot / 64] & (1u64 << (slot % 64)) != 0 {
            bump(&counters.packets_duplicate);
            return None;
        }
        Some(Target { at, slot })
    }

    /// Marks a slot filled; a batch with every slot filled is emitted.
    fn filled(&mut self, plan: &Plan, Target { at, slot }: Target, queue: &Queue, regions: &RegionTable) {
        let batch = &mut self.open[at];
        batch.filled[slot / 64] |= 1u64 << (slot % 64);
        batch.placed += 1;
        bump(&plan.counters.packets_placed);
        if batch.placed == batch.slots {
            self.emit(plan, at, Emitted::Complete, queue, regions);
        }
    }

    fn standing(&self, plan: &Plan, id: u64) -> Standing {
        let Some(newest) = self.newest else { return Standing::Ahead };
        let ahead = (id + plan.batch_ids - newest) % plan.batch_ids;
        if ahead != 0 && ahead <= plan.batch_ids / 2 {
            Standing::Ahead
        } else if self.emitted.contains(&id) {
            Standing::Late
        } else if self.age(plan, id) <= MAX_OPEN_BATCHES as u64 {
            Standing::Behind
        } else {
            Standing::OutOfWindow
        }
    }

    /// How far `id` is behind the newest batch, modulo the id space.
    fn age(&self, plan: &Plan, id: u64) -> u64 {
        let Some(newest) = self.newest else { return 0 };
        (newest + plan.batch_ids - id) % plan.batch_ids
    }

    /// Opens batch `id`, making room by emitting the oldest if the window is
    /// full; its position in `open`, or `None` when it cannot open.
    fn open_batch(
        &mut self,
        plan: &Plan,
        id: u64,
        slot_len: usize,
        standing: Standing,
        queue: &Queue,
        regions: &RegionTable,
    ) -> Option<usize> {
        if let Standing::Ahead = standing {
            self.newest = Some(id);
            self.emitted.retain(|&e| e != id);
        }
        if self.open.len() == MAX_OPEN_BATCHES {
            let (oldest, age) =
                self.open.iter().enumerate().map(|(i, b)| (i, self.age(plan, b.id))).max_by_key(|&(_, age)| age)?;
            if self.age(plan, id) > age {
                bump(&plan.counters.packets_out_of_window);
                return None;
            }
            self.emit(plan, oldest, Emitted::Evicted, queue, regions);
        }
        let region = regions.get(plan.output_region);
        let Some(token) = region.take() else {
            queue.stats.dropped(DropReason::NoFreePacketBuffers, 1);
            return None;
        };
        // Slots beyond the output buffer are refused (empty payloads all fit).
        let fitting = region.buf_size().checked_div(slot_len).map_or(u32::MAX, |n| n.min(u32::MAX as usize) as u32);
        let slots = plan.packets_per_batch.min(fitting);
        let timestamp_ns = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        self.open.push(OpenBatch {
            id,
            token,
            filled: vec![0; (plan.packets_per_batch as usize).div_ceil(64)],
            placed: 0,
            slot_len,
            slots,
            started: Instant::now(),
            timestamp_ns,
            held: if plan.gpu.is_some() { (0..slots).map(|_| None).collect() } else { Vec::new() },
            payload_len: 0,
        });
        plan.counters.open_batches.store(self.open.len() as u32, Relaxed);
        Some(self.open.len() - 1)
    }

    /// Delivers open batch `at` as one aggregate burst: a CPU plan
    /// zero-fills its empty slots, a GPU plan launches its kernel.
    fn emit(&mut self, plan: &Plan, at: usize, why: Emitted, queue: &Queue, regions: &RegionTable) {
        let mut batch = self.open.swap_remove(at);
        let counters = &plan.counters;
        counters.open_batches.store(self.open.len() as u32, Relaxed);
        self.emitted.push_back(batch.id);
        if self.emitted.len() > REMEMBERED {
            self.emitted.pop_front();
        }
        add(&counters.packets_missing, u64::from(batch.slots - batch.placed));
        if why != Emitted::Complete && plan.missing_action == MissingAction::Drop {
            bump(&counters.batches_discarded);
            add(&counters.packets_discarded, u64::from(batch.placed));
            return batch.give_back(plan, queue, regions);
        }
        bump(match why {
            Emitted::Complete => &counters.batches_complete,
            Emitted::Timeout => &counters.batches_timed_out,
            Emitted::Evicted => &counters.batches_evicted,
        });
        let dropped = |batch: OpenBatch| {
            bump(&counters.batches_dropped);
            queue.stats.dropped(DropReason::NoFreeBurstBuffers, u64::from(batch.placed));
            batch.give_back(plan, queue, regions);
        };
        let Some(mut burst) = plan.meta.take() else { return dropped(batch) };
        burst.set_aggregate(
            Aggregate {
                flags: flags::REORDERED | if why == Emitted::Complete { 0 } else { flags::REORDER_TIMEOUT },
                source_packets: batch.placed,
                batch_id: batch.id,
                timestamp_ns: batch.timestamp_ns,
                plan: plan.index,
            },
            batch.slots,
            &batch.filled,
        );
        if let Some(gpu) = &plan.gpu {
            let held = HeldBatch {
                output: batch.token,
                held: batch.held,
                payload_len: batch.payload_len,
                slot_len: batch.slot_len,
            };
            if !self.in_flight.launch(plan, gpu, held, burst, queue) {
                bump(&counters.batches_dropped);
                queue.stats.dropped(DropReason::DeviceError, u64::from(batch.placed));
            }
            return;
        }
        let len = batch.slot_len;
        let out = regions.get(plan.output_region).bytes_mut(&mut batch.token);
        for slot in (0..batch.slots as usize).filter(|&s| batch.filled[s / 64] & (1 << (s % 64)) == 0) {
            out[slot * len..][..len].fill(0);
        }
        let bytes = batch.slots as usize * len;
        burst.push(PacketSlot::single(batch.token, bytes as u32, None));
        if !queue.deliver(burst) {
            bump(&counters.batches_dropped);
        }
    }
}
