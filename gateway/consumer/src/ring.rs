//! The descriptor ring of one subscription, in a memory file the gateway
//! makes and the consumer maps: bursts go one way as slot numbers, and
//! come back the same way when the consumer is done with them.
//!
//! ```text
//! header     6 cache lines: magic, version, slots, descriptors per slot,
//!            missing-slot words per slot; then one counter each: delivered
//!            (gateway), taken, released (consumer), reclaimed (gateway),
//!            and the consumer's flag that it sleeps on the doorbell
//! delivery   slots x u32: slot numbers, gateway to consumer
//! release    slots x u32: slot numbers, consumer to gateway
//! slots      slots x (BurstHeader, descriptors per slot x SegmentDescriptor,
//!            missing-slot words x u64: a reorder aggregate's empty slots)
//! ```
//!
//! A slot is the gateway's until it is delivered and the consumer's until
//! it is released, so neither queue can hold more than `slots` numbers.
//! The gateway trusts nothing the consumer writes: a release counter that
//! runs ahead or a slot number it did not deliver is an error
//! ([`Broken`]), and the gateway closes that subscription.

use std::cell::Cell;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::mapped::Mapped;
use crate::protocol::{MAX_SLOTS, RingShape};

/// The ring file's first eight bytes.
pub const MAGIC: u64 = u64::from_le_bytes(*b"DAQRING1");
/// The layout's version.
pub const LAYOUT_VERSION: u32 = 3;
/// What a ring's file is sealed against: any resize, and further seals.
pub const SEALS: rustix::fs::SealFlags =
    rustix::fs::SealFlags::SHRINK.union(rustix::fs::SealFlags::GROW).union(rustix::fs::SealFlags::SEAL);
const LINE: usize = 64;
const PAGE: usize = 4096;

/// A burst's flags: DAQIRI's burst flag bits, as the engine sets them.
pub mod flags {
    /// The burst is one reorder aggregate (DAQIRI's `REORDERED`).
    pub const REORDERED: u32 = 1 << 28;
    /// The aggregate was emitted by the queue's timeout before every slot
    /// was filled (DAQIRI's `REORDER_TIMEOUT`).
    pub const REORDER_TIMEOUT: u32 = 1 << 29;
}

/// What a slot says of its burst.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BurstHeader {
    /// The burst's number in this subscription, from 0; bursts dropped for
    /// the consumer take no number.
    pub sequence: u64,
    /// Bursts dropped for this consumer (its ring was full) since the
    /// previous one it got.
    pub lost_before: u64,
    /// When the gateway delivered it: `CLOCK_MONOTONIC` nanoseconds (one
    /// clock for every process of the host), for the hand-off's latency.
    pub delivered_ns: u64,
    /// The gateway's port id.
    pub port: u16,
    /// The gateway's RX queue id.
    pub queue: u16,
    /// Packets in the burst.
    pub packets: u32,
    /// Segment descriptors in the slot.
    pub descriptors: u32,
    /// DAQIRI's burst flags (see [`flags`]).
    pub flags: u32,
    /// A reorder aggregate's batch id; [`NO_BATCH`] for other bursts.
    pub batch_id: u64,
    /// A reorder aggregate's source packets: how many went into it.
    pub source_packets: u32,
    /// A reorder aggregate's slots (packets per batch, or fewer where its
    /// buffer holds fewer); 0 for other bursts.
    pub aggregate_slots: u32,
    /// How many of them are empty (zero-filled: their packet never came);
    /// which, the slot's missing-slot words say.
    pub missing_slots: u32,
    reserved: [u32; 1],
}

/// [`BurstHeader::batch_id`] of a burst that is no reorder aggregate.
pub const NO_BATCH: u64 = u64::MAX;

/// Where one segment of one packet lies.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentDescriptor {
    /// Bytes from the region's first byte.
    pub offset: u64,
    /// Its bytes.
    pub len: u32,
    /// The region (see [`crate::protocol::RegionShape::index`]).
    pub region: u16,
    /// The segment's number in its packet (0 unless header-data split).
    pub segment: u16,
    /// The packet's number in its burst.
    pub packet: u32,
    /// The flow the packet matched; `u32::MAX` for none.
    pub flow_id: u32,
    /// Its receive timestamp in nanoseconds; `u64::MAX` for none.
    pub timestamp: u64,
    /// The packet's immediate (RDMA write-with-immediate, SEND with
    /// immediate), where [`HAS_IMMEDIATE`] is set in `has`.
    pub immediate: u32,
    /// Which of the optional fields above are set ([`HAS_IMMEDIATE`]).
    pub has: u32,
}

/// [`SegmentDescriptor::has`]: the packet carries an immediate.
pub const HAS_IMMEDIATE: u32 = 1;

const _: () = assert!(size_of::<BurstHeader>() == LINE && size_of::<SegmentDescriptor>() == 40);

/// Where things are in a ring of a given shape.
#[derive(Debug, Clone, Copy)]
struct Layout {
    slots: u32,
    per_slot: u32,
    /// u64 words of missing-slot bits per slot.
    missing_words: u32,
}

impl Layout {
    fn delivery(&self) -> usize {
        6 * LINE
    }
    fn release(&self) -> usize {
        self.delivery() + 4 * self.slots as usize
    }
    fn first_slot(&self) -> usize {
        (self.release() + 4 * self.slots as usize).next_multiple_of(LINE)
    }
    fn slot_size(&self) -> usize {
        self.missing_bits() + self.missing_words as usize * size_of::<u64>()
    }
    /// Where a slot's missing-slot words start, from the slot's start.
    fn missing_bits(&self) -> usize {
        size_of::<BurstHeader>() + self.per_slot as usize * size_of::<SegmentDescriptor>()
    }
    fn slot(&self, slot: u32) -> usize {
        self.first_slot() + slot as usize * self.slot_size()
    }
    fn len(&self) -> usize {
        self.slot(self.slots).next_multiple_of(PAGE)
    }
}

/// The counters, by their cache line.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Delivered = 1,
    Taken = 2,
    Released = 3,
    Reclaimed = 4,
    /// Non-zero while the consumer sleeps on the doorbell: the gateway
    /// rings it only then, not once per burst.
    Sleeping = 5,
}

/// A mapped ring.
#[derive(Debug)]
struct Ring {
    map: Mapped,
    layout: Layout,
}

impl Ring {
    fn at<T>(&self, offset: usize) -> *mut T {
        debug_assert!(offset + size_of::<T>() <= self.map.len());
        // SAFETY: every offset the layout gives lies inside the mapping,
        // which is at least `layout.len()` bytes.
        unsafe { self.map.base().as_ptr().add(offset).cast() }
    }

    fn counter(&self, counter: Counter) -> &AtomicU32 {
        // SAFETY: a 4-byte aligned word inside the mapping, only ever
        // accessed atomically by both processes.
        unsafe { &*self.at::<AtomicU32>(counter as usize * LINE) }
    }

    /// Entry `n` (mod slots) of the queue at `queue`.
    fn entry(&self, queue: usize, n: u32) -> &AtomicU32 {
        // SAFETY: as in `counter`: an aligned word of the queue.
        unsafe { &*self.at::<AtomicU32>(queue + 4 * (n % self.layout.slots) as usize) }
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Why a consumer's ring can no longer be trusted.
#[derive(Debug, thiserror::Error)]
#[error("the consumer broke its ring: {0}")]
pub struct Broken(String);

/// The gateway's end of a ring.
#[derive(Debug)]
pub struct Producer {
    ring: Ring,
    /// Slots the gateway may fill.
    free: Vec<u32>,
    /// Slots delivered and not released yet.
    outstanding: Vec<bool>,
    delivered: u32,
    reclaimed: u32,
    sequence: u64,
    lost: u64,
}

impl Producer {
    /// A new ring of `slots` bursts of `per_slot` descriptors each, and
    /// room for the missing-slot bits of aggregates of up to `aggregate_slots`
    /// slots, in a memory file: the producer, and the descriptor to hand the
    /// consumer.
    pub fn create(slots: u32, per_slot: u32, aggregate_slots: u32) -> std::io::Result<(Self, OwnedFd)> {
        if !(1..=MAX_SLOTS).contains(&slots) || per_slot == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a ring of 1 to 4096 slots"));
        }
        let layout = Layout { slots, per_slot, missing_words: aggregate_slots.div_ceil(64) };
        let file = rustix::fs::memfd_create(
            "daqiri-consumer-ring",
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&file, layout.len() as u64)?;
        // The consumer writes its counters and releases, so the ring stays
        // writable; but a resize by its descriptor would make the gateway's
        // accesses fault (SIGBUS), so its size is sealed.
        rustix::fs::fcntl_add_seals(&file, SEALS)?;
        let ring = Ring { map: Mapped::new(&file, layout.len(), true)?, layout };
        // SAFETY: the header's first words, inside the fresh mapping, which
        // no consumer has yet.
        unsafe {
            ring.at::<u64>(0).write(MAGIC);
            ring.at::<u32>(8).write(LAYOUT_VERSION);
            ring.at::<u32>(12).write(slots);
            ring.at::<u32>(16).write(per_slot);
            ring.at::<u32>(20).write(layout.missing_words);
        }
        let producer = Self {
            ring,
            free: (0..slots).rev().collect(),
            outstanding: vec![false; slots as usize],
            delivered: 0,
            reclaimed: 0,
            sequence: 0,
            lost: 0,
        };
        Ok((producer, file))
    }

    /// The ring's shape, for the welcome.
    pub fn shape(&self) -> RingShape {
        let layout = self.ring.layout;
        RingShape {
            slots: layout.slots,
            descriptors_per_slot: layout.per_slot,
            missing_words: layout.missing_words,
            len: layout.len() as u64,
        }
    }

    /// Takes back the slots the consumer released, into `out`.
    pub fn reclaim(&mut self, out: &mut Vec<u32>) -> Result<(), Broken> {
        let released = self.ring.counter(Counter::Released).load(Ordering::Acquire);
        let pending = released.wrapping_sub(self.reclaimed);
        if pending > self.ring.layout.slots {
            return Err(Broken(format!("{pending} releases pending in a ring of {} slots", self.ring.layout.slots)));
        }
        for _ in 0..pending {
            let slot = self.ring.entry(self.ring.layout.release(), self.reclaimed).load(Ordering::Relaxed);
            if !self.outstanding.get(slot as usize).copied().unwrap_or(false) {
                return Err(Broken(format!("released slot {slot}, which it did not hold")));
            }
            self.outstanding[slot as usize] = false;
            self.free.push(slot);
            out.push(slot);
            self.reclaimed = self.reclaimed.wrapping_add(1);
        }
        self.ring.counter(Counter::Reclaimed).store(self.reclaimed, Ordering::Release);
        Ok(())
    }

    /// Delivers `burst` in `descriptors` (at most the ring's per-slot
    /// count): the slot it took, or `None` when the consumer holds every
    /// slot. An aggregate's `missing` bits (a set bit per empty slot) beyond
    /// the ring's room are not told; the count is.
    pub fn deliver(&mut self, burst: &Delivery, descriptors: &[SegmentDescriptor], missing: &[u64]) -> Option<u32> {
        assert!(descriptors.len() <= self.ring.layout.per_slot as usize, "a burst larger than its ring's slots");
        let slot = self.free.pop()?;
        let at = self.ring.layout.slot(slot);
        let header = BurstHeader {
            sequence: self.sequence,
            lost_before: std::mem::take(&mut self.lost),
            port: burst.port,
            queue: burst.queue,
            packets: burst.packets,
            descriptors: descriptors.len() as u32,
            delivered_ns: monotonic_ns(),
            flags: burst.flags,
            source_packets: burst.source_packets,
            batch_id: burst.batch_id.unwrap_or(NO_BATCH),
            aggregate_slots: burst.aggregate_slots,
            missing_slots: burst.missing_slots,
            reserved: [0; 1],
        };
        let words = self.ring.layout.missing_words as usize;
        // SAFETY: the slot is free (the consumer released it or never had
        // it), so nothing reads it; header, descriptors and missing-slot
        // words fit its size.
        unsafe {
            self.ring.at::<BurstHeader>(at).write_volatile(header);
            let first = self.ring.at::<SegmentDescriptor>(at + size_of::<BurstHeader>());
            std::ptr::copy_nonoverlapping(descriptors.as_ptr(), first, descriptors.len());
            let bits = self.ring.at::<u64>(at + self.ring.layout.missing_bits());
            std::ptr::write_bytes(bits, 0, words);
            std::ptr::copy_nonoverlapping(missing.as_ptr(), bits, missing.len().min(words));
        }
        self.sequence += 1;
        self.outstanding[slot as usize] = true;
        self.ring.entry(self.ring.layout.delivery(), self.delivered).store(slot, Ordering::Relaxed);
        self.delivered = self.delivered.wrapping_add(1);
        self.ring.counter(Counter::Delivered).store(self.delivered, Ordering::SeqCst);
        Some(slot)
    }

    /// Whether the consumer sleeps on its doorbell, and so must be woken
    /// for what was just delivered (clears the flag). Read after
    /// [`deliver`](Self::deliver): either the consumer sees the burst
    /// before it sleeps, or this sees it sleeping.
    pub fn take_sleeper(&self) -> bool {
        self.ring.counter(Counter::Sleeping).swap(0, Ordering::SeqCst) != 0
    }

    /// Counts a burst lost for the consumer (its ring was full, and the
    /// gateway dropped it for it): the next burst delivered says so.
    pub fn note_lost(&mut self) {
        self.lost += 1;
    }

    /// Bursts delivered and not released yet.
    pub fn held(&self) -> usize {
        self.outstanding.iter().filter(|held| **held).count()
    }
}

/// What the gateway says of a burst besides its segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The gateway's port id.
    pub port: u16,
    /// The gateway's RX queue id.
    pub queue: u16,
    /// Packets in it.
    pub packets: u32,
    /// DAQIRI's burst flags (see [`flags`]).
    pub flags: u32,
    /// A reorder aggregate's source packets.
    pub source_packets: u32,
    /// A reorder aggregate's batch id.
    pub batch_id: Option<u64>,
    /// A reorder aggregate's slots.
    pub aggregate_slots: u32,
    /// How many of them are empty.
    pub missing_slots: u32,
}

/// The consumer's end of a ring.
#[derive(Debug)]
pub struct Reader {
    ring: Ring,
    taken: Cell<u32>,
    released: Cell<u32>,
}

impl Reader {
    /// Maps the ring the gateway handed over, checking it is of `shape`.
    pub fn open(fd: OwnedFd, shape: RingShape) -> std::io::Result<Self> {
        let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        if !(1..=MAX_SLOTS).contains(&shape.slots) || shape.descriptors_per_slot == 0 {
            return Err(invalid("the welcome's ring shape is out of range"));
        }
        let layout =
            Layout { slots: shape.slots, per_slot: shape.descriptors_per_slot, missing_words: shape.missing_words };
        if shape.missing_words > MAX_SLOTS || shape.len != layout.len() as u64 {
            return Err(invalid("the welcome's ring length does not match its shape"));
        }
        let ring = Ring { map: Mapped::new(&fd, layout.len(), true)?, layout };
        // SAFETY: the header's first words, inside the mapping.
        let (magic, version, words) =
            unsafe { (ring.at::<u64>(0).read(), ring.at::<u32>(8).read(), ring.at::<u32>(20).read()) };
        if magic != MAGIC || version != LAYOUT_VERSION || words != shape.missing_words {
            return Err(invalid("not a ring of this layout"));
        }
        let taken = ring.counter(Counter::Taken).load(Ordering::Relaxed);
        let released = ring.counter(Counter::Released).load(Ordering::Relaxed);
        Ok(Self { ring, taken: Cell::new(taken), released: Cell::new(released) })
    }

    /// The next burst delivered, by its slot.
    pub fn next(&self) -> Option<u32> {
        let taken = self.taken.get();
        if self.ring.counter(Counter::Delivered).load(Ordering::Acquire) == taken {
            return None;
        }
        let slot = self.ring.entry(self.ring.layout.delivery(), taken).load(Ordering::Relaxed);
        self.taken.set(taken.wrapping_add(1));
        self.ring.counter(Counter::Taken).store(taken.wrapping_add(1), Ordering::Relaxed);
        (slot < self.ring.layout.slots).then_some(slot)
    }

    /// Whether every burst delivered so far was taken.
    pub fn is_empty(&self) -> bool {
        self.ring.counter(Counter::Delivered).load(Ordering::Acquire) == self.taken.get()
    }

    /// Says it is about to sleep on the doorbell; `false` when a burst came
    /// meanwhile (then it should not sleep). Pairs with
    /// [`Producer::take_sleeper`].
    pub fn going_to_sleep(&self) -> bool {
        self.ring.counter(Counter::Sleeping).store(1, Ordering::SeqCst);
        if self.ring.counter(Counter::Delivered).load(Ordering::SeqCst) != self.taken.get() {
            self.ring.counter(Counter::Sleeping).store(0, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// What slot `slot` says of its burst.
    pub fn header(&self, slot: u32) -> BurstHeader {
        // SAFETY: a delivered slot's header, which the gateway wrote before
        // delivering it and does not touch until it is released.
        unsafe { self.ring.at::<BurstHeader>(self.ring.layout.slot(slot)).read_volatile() }
    }

    /// Slot `slot`'s segment descriptors.
    pub fn descriptors(&self, slot: u32) -> &[SegmentDescriptor] {
        let count = self.header(slot).descriptors.min(self.ring.layout.per_slot) as usize;
        let first = self.ring.at::<SegmentDescriptor>(self.ring.layout.slot(slot) + size_of::<BurstHeader>());
        // SAFETY: `count` descriptors inside the slot, written before the
        // slot was delivered and left alone until it is released.
        unsafe { std::slice::from_raw_parts(first, count) }
    }

    /// The empty slots of slot `slot`'s aggregate, lowest first (none for
    /// a burst that is no aggregate, or a complete one).
    pub fn missing_slots(&self, slot: u32) -> Vec<u32> {
        let header = self.header(slot);
        let words = self.ring.layout.missing_words as usize;
        let bits = self.ring.at::<u64>(self.ring.layout.slot(slot) + self.ring.layout.missing_bits());
        // SAFETY: the slot's missing-slot words, inside it, written before
        // it was delivered and left alone until it is released.
        let bits = unsafe { std::slice::from_raw_parts(bits, words) };
        (0..header.aggregate_slots.min(words as u32 * 64))
            .filter(|s| bits[*s as usize / 64] & (1 << (s % 64)) != 0)
            .collect()
    }

    /// Gives slot `slot` back to the gateway.
    pub fn release(&self, slot: u32) {
        let released = self.released.get();
        self.ring.entry(self.ring.layout.release(), released).store(slot, Ordering::Relaxed);
        self.released.set(released.wrapping_add(1));
        self.ring.counter(Counter::Released).store(released.wrapping_add(1), Ordering::Release);
    }
}

/// Plays a broken or hostile consumer: writes `values` (byte offset,
/// word) anywhere in a ring of `len` bytes (offsets wrap and align to 4),
/// as a consumer may, since it maps the ring writable. For tests and the
/// fuzz target of the gateway's end.
#[cfg(feature = "testing")]
pub fn scribble(ring: &OwnedFd, len: usize, values: &[(usize, u32)]) -> std::io::Result<()> {
    let map = Mapped::new(ring, len, true)?;
    for &(offset, value) in values {
        let at = (offset % len) & !3;
        // SAFETY: an aligned word inside the mapping, written atomically as
        // the gateway reads the ring's words.
        unsafe { (*map.base().as_ptr().add(at).cast::<AtomicU32>()).store(value, Ordering::Release) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_go_round_and_a_full_ring_loses_them_for_its_reader_alone() {
        let (mut producer, fd) = Producer::create(2, 4, 0).unwrap();
        let reader = Reader::open(fd, producer.shape()).unwrap();
        let segment =
            |packet| SegmentDescriptor { offset: 64 * u64::from(packet), len: 60, packet, ..Default::default() };
        let burst = |packets| Delivery { port: 0, queue: 1, packets, ..Default::default() };
        assert!(producer.deliver(&burst(2), &[segment(0), segment(1)], &[]).is_some());
        assert!(producer.deliver(&burst(1), &[segment(0)], &[]).is_some());
        assert_eq!(producer.deliver(&burst(1), &[segment(0)], &[]), None, "both slots held");
        producer.note_lost();
        let first = reader.next().unwrap();
        assert_eq!(reader.header(first).sequence, 0);
        assert_eq!(reader.descriptors(first), &[segment(0), segment(1)]);
        reader.release(first);
        let mut reclaimed = Vec::new();
        producer.reclaim(&mut reclaimed).unwrap();
        assert_eq!(reclaimed, vec![first]);
        producer.deliver(&burst(1), &[segment(3)], &[]).unwrap();
        let second = reader.next().unwrap();
        let third = reader.next().unwrap();
        assert_eq!((reader.header(second).sequence, reader.header(second).lost_before), (1, 0));
        assert_eq!((reader.header(third).sequence, reader.header(third).lost_before), (2, 1), "one lost before it");
        assert_eq!(reader.next(), None);
    }

    #[test]
    fn an_aggregates_batch_flags_and_missing_slots_reach_the_reader() {
        let (mut producer, fd) = Producer::create(2, 1, 70).unwrap();
        let reader = Reader::open(fd, producer.shape()).unwrap();
        let aggregate = Delivery {
            packets: 1,
            flags: flags::REORDERED | flags::REORDER_TIMEOUT,
            source_packets: 67,
            batch_id: Some(41),
            aggregate_slots: 70,
            missing_slots: 3,
            ..Default::default()
        };
        let descriptor = SegmentDescriptor { immediate: 7, has: HAS_IMMEDIATE, ..Default::default() };
        producer.deliver(&aggregate, &[descriptor], &[1 << 3, (1 << 0) | (1 << 5)]).unwrap();
        let slot = reader.next().unwrap();
        let header = reader.header(slot);
        assert_eq!((header.batch_id, header.flags, header.source_packets), (41, aggregate.flags, 67));
        assert_eq!(reader.missing_slots(slot), [3, 64, 69]);
        assert_eq!(reader.descriptors(slot), [descriptor]);
        reader.release(slot);
        // A reused slot tells no stale bits.
        producer.reclaim(&mut Vec::new()).unwrap();
        producer.deliver(&Delivery { packets: 1, ..Default::default() }, &[descriptor], &[]).unwrap();
        producer.deliver(&Delivery { packets: 1, ..Default::default() }, &[descriptor], &[]).unwrap();
        let (first, second) = (reader.next().unwrap(), reader.next().unwrap());
        for slot in [first, second] {
            assert_eq!((reader.header(slot).batch_id, reader.missing_slots(slot)), (NO_BATCH, vec![]));
        }
    }

    #[test]
    fn a_release_of_a_slot_not_held_or_a_counter_run_ahead_breaks_the_ring() {
        let (mut producer, fd) = Producer::create(4, 1, 0).unwrap();
        let reader = Reader::open(fd, producer.shape()).unwrap();
        reader.release(3);
        assert!(producer.reclaim(&mut Vec::new()).is_err(), "slot 3 was never delivered");
        let (mut producer, fd) = Producer::create(4, 1, 0).unwrap();
        let reader = Reader::open(fd, producer.shape()).unwrap();
        reader.ring.counter(Counter::Released).store(1000, Ordering::Release);
        assert!(producer.reclaim(&mut Vec::new()).is_err(), "1000 releases pending");
    }
}
