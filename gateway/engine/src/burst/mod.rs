//! Bursts: DAQIRI's unit of delivery, a batch of packets that owns its buffers.
//!
//! A [`Burst`] holds one metadata entry from its queue's pool
//! (`rx_meta_buffers` / `tx_meta_buffers`) and the buffers of its packets.
//! Dropping it returns both, which replaces DAQIRI's `free_*` calls; single
//! packets or segments can still be released early with
//! [`Burst::free_packet`] and [`Burst::free_packet_segment`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::headers::{self, UdpFrame};
use crate::memory::{BufToken, RegionTable, SegmentMemory};
use crate::missing_slots::MissingSlots;

mod meta_pool;
pub(crate) use meta_pool::MetaPool;

/// Most segments a packet can have (header-data split uses two).
pub const MAX_SEGMENTS: usize = 4;

/// Burst flags, as in DAQIRI's `burst_flags`.
pub mod flags {
    /// The burst holds one reordered aggregate.
    pub const REORDERED: u32 = 1 << 28;
    /// The aggregate was emitted by the timeout path.
    pub const REORDER_TIMEOUT: u32 = 1 << 29;
}

/// What marks a burst as one reorder plan's aggregate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Aggregate {
    pub(crate) flags: u32,
    pub(crate) source_packets: u32,
    pub(crate) batch_id: u64,
    pub(crate) timestamp_ns: u64,
    pub(crate) plan: u16,
}

/// Which engine a burst belongs to: a process-wide number, so a burst kept
/// across a reload cannot be sent through the engine that replaced its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EngineId(u32);

impl EngineId {
    pub(crate) fn next() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// Device work still running on a burst's buffers (a GPU copy or kernel
/// that writes them, a DMA that reads them): the burst waits for it before
/// its buffers go back to their pools.
pub trait Completion: Send + Sync + std::fmt::Debug {
    /// Blocks until the work is done.
    fn wait(&self);

    /// The CUDA event that completes with the work, for GPU code that orders
    /// itself after it without blocking (`cuStreamWaitEvent`).
    #[cfg(feature = "cuda")]
    fn cuda_event(&self) -> Option<&cudarc::driver::CudaEvent> {
        None
    }
}

/// One packet on its way into a burst: a buffer and length per segment.
/// Backends build it on the stack; [`Burst::push`] stores it by column.
#[derive(Debug, Default)]
pub(crate) struct PacketSlot {
    segments: [Option<(BufToken, u32)>; MAX_SEGMENTS],
    /// Where each segment's bytes start in its buffer (after a NIC's headroom).
    offsets: [u16; MAX_SEGMENTS],
    flow_id: Option<u32>,
    source: Option<SocketAddr>,
    rx_timestamp: Option<u64>,
    immediate: Option<u32>,
    remote: Option<RemoteMemory>,
}

/// The peer's memory an RDMA packet goes to or came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteMemory {
    /// A TX packet WRITTEN there (address, remote key), not sent.
    Write(u64, u32),
    /// A TX packet's buffer filled by an RDMA READ from there; on RX, the
    /// READ's result.
    Read(u64, u32),
}

impl PacketSlot {
    /// A single-segment packet.
    pub(crate) fn single(token: BufToken, len: u32, flow_id: Option<u32>) -> Self {
        let mut slot = PacketSlot { flow_id, ..Default::default() };
        slot.set_segment(0, token, len);
        slot
    }

    /// Records the datagram's sender (socket streams).
    pub(crate) fn with_source(mut self, source: Option<SocketAddr>) -> Self {
        self.source = source;
        self
    }

    /// Places a buffer as segment `index`.
    pub(crate) fn set_segment(&mut self, index: usize, token: BufToken, len: u32) {
        debug_assert!(self.segments[index].is_none(), "segment {index} set twice");
        self.segments[index] = Some((token, len));
    }

    /// Says that segment `index`'s bytes start `offset` bytes into its buffer.
    #[cfg_attr(not(any(feature = "dpdk", feature = "af_xdp", feature = "rdma")), allow(dead_code))]
    pub(crate) fn set_segment_offset(&mut self, index: usize, offset: u16) {
        self.offsets[index] = offset;
    }

    /// Records the NIC's receive timestamp.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn set_rx_timestamp(&mut self, timestamp: Option<u64>) {
        self.rx_timestamp = timestamp;
    }

    /// Records the 32 bits an RDMA message carried beside its bytes.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub(crate) fn set_immediate(&mut self, immediate: Option<u32>) {
        self.immediate = immediate;
    }

    /// Records the peer's memory an RDMA READ filled the packet from.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub(crate) fn set_remote(&mut self, remote: RemoteMemory) {
        self.remote = Some(remote);
    }

    /// Sets the flow id.
    pub(crate) fn set_flow_id(&mut self, flow_id: Option<u32>) {
        self.flow_id = flow_id;
    }

    /// The flow the packet matched, if any.
    pub(crate) fn flow_id(&self) -> Option<u32> {
        self.flow_id
    }

    /// The first segment's buffer, where its bytes start in it, and their length.
    pub(crate) fn first_segment(&self) -> Option<(&BufToken, u16, u32)> {
        self.segments[0].as_ref().map(|(token, len)| (token, self.offsets[0], *len))
    }

    /// Takes the first segment out of the packet: its buffer, where its
    /// bytes start in it, and their length.
    pub(crate) fn take_first_segment(&mut self) -> Option<(BufToken, u16, u32)> {
        self.segments[0].take().map(|(token, len)| (token, self.offsets[0], len))
    }

    /// Returns the packet's buffers; segment `s` belongs to region `segment_regions[s]`.
    pub(crate) fn release(self, regions: &RegionTable, segment_regions: &[u16]) {
        for (s, seg) in self.segments.into_iter().enumerate() {
            if let Some((token, _)) = seg {
                regions.get(segment_regions[s]).release(token);
            }
        }
    }
}

/// One segment of every packet of a burst: its buffer, offset and length.
#[derive(Debug)]
struct SegmentColumn {
    region: u16,
    /// [`BufToken::RELEASED`] once a packet's segment was freed early.
    buffers: Vec<BufToken>,
    offsets: Vec<u16>,
    lengths: Vec<u32>,
}

/// A frame a device landed in one buffer of a region: the buffer's index,
/// where the frame starts in it, and its length.
#[cfg(feature = "dpdk")]
pub(crate) type Frame = (u32, u16, u32);

/// "No flow matched" in the flow-id column.
const NO_FLOW: u32 = u32::MAX;

/// "Not stamped" in the receive-timestamp column.
const NO_TIMESTAMP: u64 = u64::MAX;

/// Burst metadata, stored by column: per packet 10 bytes per segment
/// (buffer, offset, length) and 4 for the flow id; 2 more for the sender
/// index where the backend has senders. The columns are sized for
/// `batch_size` once and reused.
#[derive(Debug)]
struct BurstMeta {
    engine: EngineId,
    port: u16,
    queue: u16,
    flags: u32,
    source_packets: u32,
    batch_id: Option<u64>,
    /// Aggregates: when the batch's first packet was placed (ns since the Unix epoch).
    timestamp_ns: Option<u64>,
    /// Aggregates: the plan's position in the interface's `reorder_configs`.
    plan: Option<u16>,
    /// Aggregates: slots in the batch, and one bit per slot a packet filled.
    slots: u32,
    filled_slots: Vec<u64>,
    total_bytes: u64,
    capacity: usize,
    segments: Vec<SegmentColumn>,
    flow_ids: Vec<u32>,
    /// Socket backends: per packet an index into `senders`, which holds each
    /// distinct sender once (a stream usually has one).
    sender_index: Option<Vec<u16>>,
    senders: Vec<SocketAddr>,
    /// `rx.hardware_timestamps`: per packet the NIC's receive timestamp (`NO_TIMESTAMP`: none).
    rx_timestamps: Option<Vec<u64>>,
    /// RDMA queues: per packet the immediate its message carried, if any.
    immediates: Option<Vec<Option<u32>>>,
    /// RDMA queues: per packet the peer's memory a TX packet is written to
    /// or read from (if it is no SEND), or an RX packet was read from.
    remote: Option<Vec<Option<RemoteMemory>>>,
    /// Whether a TX packet may be an RDMA READ: its queue shares the
    /// region of the RX queue of its position, where the bytes read are delivered.
    rdma_reads: bool,
    completion: Option<Box<dyn Completion>>,
}

impl BurstMeta {
    fn len(&self) -> usize {
        self.flow_ids.len()
    }

    /// Returns every buffer, one bulk release per segment's region, and
    /// resets the entry for reuse.
    fn clear(&mut self, regions: &RegionTable) {
        if let Some(done) = self.completion.take() {
            done.wait();
        }
        for column in &mut self.segments {
            regions.get(column.region).release_all(column.buffers.drain(..));
            column.offsets.clear();
            column.lengths.clear();
        }
        self.flow_ids.clear();
        if let Some(index) = &mut self.sender_index {
            index.clear();
        }
        self.senders.clear();
        if let Some(stamps) = &mut self.rx_timestamps {
            stamps.clear();
        }
        if let Some(immediates) = &mut self.immediates {
            immediates.clear();
        }
        if let Some(remote) = &mut self.remote {
            remote.clear();
        }
        self.flags = 0;
        self.source_packets = 0;
        self.batch_id = None;
        self.timestamp_ns = None;
        self.plan = None;
        self.slots = 0;
        self.filled_slots.clear();
        self.total_bytes = 0;
    }
}

/// What a queue's bursts look like: set once per queue.
#[derive(Debug, Clone)]
pub(crate) struct BurstShape {
    pub(crate) engine: EngineId,
    pub(crate) port: u16,
    pub(crate) queue: u16,
    pub(crate) batch_size: usize,
    /// Region index per segment.
    pub(crate) segment_regions: Vec<u16>,
    /// What packets carry besides their bytes and flow id.
    pub(crate) fields: PacketFields,
}

/// Per-packet fields a queue's bursts hold only where its backend fills them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PacketFields {
    /// The sender's address (sockets; raw frames carry it in their headers).
    pub(crate) senders: bool,
    /// The NIC's receive timestamp (`rx.hardware_timestamps`).
    pub(crate) rx_timestamps: bool,
    /// An RDMA message's immediate (RoCE queues, both directions).
    pub(crate) immediates: bool,
    /// The peer's memory an RDMA packet goes to or came from (RoCE queues).
    pub(crate) remote: bool,
    /// TX packets may be RDMA READs (a RoCE TX queue sharing its RX queue's region).
    pub(crate) rdma_reads: bool,
}

/// A batch of packets with the buffers they live in.
#[derive(Debug)]
pub struct Burst {
    /// Always `Some` until `Drop` hands the entry back.
    meta: Option<Box<BurstMeta>>,
    home: Arc<MetaPool>,
}

impl Burst {
    fn meta(&self) -> &BurstMeta {
        self.meta.as_deref().expect("present until drop")
    }

    fn meta_mut(&mut self) -> &mut BurstMeta {
        self.meta.as_deref_mut().expect("present until drop")
    }

    /// The engine this burst belongs to.
    pub fn engine_id(&self) -> EngineId {
        self.meta().engine
    }

    /// Port (interface index) the burst belongs to.
    pub fn port_id(&self) -> u16 {
        self.meta().port
    }

    /// Queue id the burst belongs to.
    pub fn queue_id(&self) -> u16 {
        self.meta().queue
    }

    /// Packets in the burst, released ones included.
    pub fn num_packets(&self) -> usize {
        self.meta().len()
    }

    /// Whether the burst holds no packets.
    pub fn is_empty(&self) -> bool {
        self.num_packets() == 0
    }

    /// Most packets this burst can hold (the queue's `batch_size`).
    pub fn capacity(&self) -> usize {
        self.meta().capacity
    }

    /// Whether the burst holds `batch_size` packets.
    pub fn is_full(&self) -> bool {
        self.num_packets() >= self.capacity()
    }

    /// Burst flags (see [`flags`]).
    pub fn flags(&self) -> u32 {
        self.meta().flags
    }

    /// For reordered bursts: source packets aggregated; otherwise the packet count.
    pub fn source_packets(&self) -> u32 {
        let meta = self.meta();
        if meta.flags & flags::REORDERED != 0 { meta.source_packets } else { meta.len() as u32 }
    }

    /// For reordered bursts: the batch id of the aggregate.
    pub fn batch_id(&self) -> Option<u64> {
        self.meta().batch_id
    }

    /// For reordered bursts: when the batch's first packet was placed, in
    /// nanoseconds since the Unix epoch (the host clock; this build reads no
    /// NIC timestamps).
    pub fn timestamp_ns(&self) -> Option<u64> {
        self.meta().timestamp_ns
    }

    /// For reordered bursts: the plan that built the aggregate, as its
    /// position in the interface's `rx.reorder_configs`.
    pub fn reorder_plan(&self) -> Option<u16> {
        self.meta().plan
    }

    /// For reordered bursts: the aggregate's slots that no packet filled
    /// (zero-filled; none in a complete aggregate), as DAQIRI's
    /// `get_reorder_missing_info()`.
    pub fn reorder_missing(&self) -> Option<MissingSlots<'_>> {
        let meta = self.meta();
        meta.plan.map(|_| MissingSlots::new(meta.slots, &meta.filled_slots))
    }

    /// Marks the burst as a reorder plan's aggregate of `slots` slots, those
    /// set in `filled` holding a packet.
    pub(crate) fn set_aggregate(&mut self, aggregate: Aggregate, slots: u32, filled: &[u64]) {
        let meta = self.meta_mut();
        meta.slots = slots;
        meta.filled_slots.extend_from_slice(filled);
        meta.flags = aggregate.flags;
        meta.source_packets = aggregate.source_packets;
        meta.batch_id = Some(aggregate.batch_id);
        meta.timestamp_ns = Some(aggregate.timestamp_ns);
        meta.plan = Some(aggregate.plan);
    }

    /// Bytes over all packets and segments (kept as packets are added,
    /// resized and freed, so reading it costs nothing).
    pub fn total_bytes(&self) -> u64 {
        self.meta().total_bytes
    }

    /// Packet `index`; panics when out of range, like slice indexing.
    pub fn packet(&self, index: usize) -> Packet<'_> {
        assert!(index < self.num_packets(), "packet {index} of a {}-packet burst", self.num_packets());
        Packet { meta: self.meta(), index, regions: &self.home.regions }
    }

    /// All packets in order.
    pub fn packets(&self) -> impl ExactSizeIterator<Item = Packet<'_>> {
        let (meta, regions) = (self.meta(), &*self.home.regions);
        (0..meta.len()).map(move |index| Packet { meta, index, regions })
    }

    /// Packet `index`, writable (to fill TX packets).
    pub fn packet_mut(&mut self, index: usize) -> PacketMut<'_> {
        assert!(index < self.num_packets(), "packet {index} of a {}-packet burst", self.num_packets());
        let meta = self.meta.as_deref_mut().expect("present until drop");
        PacketMut { meta, index, regions: &self.home.regions }
    }

    /// Returns all buffers of packet `index` to their pools now.
    pub fn free_packet(&mut self, index: usize) {
        for segment in 0..self.meta().segments.len() {
            self.free_packet_segment(segment, index);
        }
    }

    /// Returns one segment of packet `index` to its pool now.
    pub fn free_packet_segment(&mut self, segment: usize, index: usize) {
        let regions = &*self.home.regions;
        let meta = self.meta.as_deref_mut().expect("present until drop");
        let Some(column) = meta.segments.get_mut(segment) else { return };
        let Some(slot) = column.buffers.get_mut(index) else { return };
        if slot.is_released() {
            return;
        }
        let token = std::mem::replace(slot, BufToken::RELEASED);
        regions.get(column.region).release(token);
        meta.total_bytes -= u64::from(std::mem::take(&mut column.lengths[index]));
    }

    /// Takes segment `segment` of packet `index` out of the burst: its
    /// region, buffer, offset and length, for a backend that hands the
    /// buffer itself to a device (a DPDK TX queue). `None` once freed.
    #[cfg(any(feature = "dpdk", feature = "af_xdp", feature = "rdma"))]
    pub(crate) fn take_segment(&mut self, segment: usize, index: usize) -> Option<(u16, BufToken, u16, u32)> {
        let meta = self.meta.as_deref_mut().expect("present until drop");
        let column = meta.segments.get_mut(segment)?;
        let slot = column.buffers.get_mut(index)?;
        if slot.is_released() {
            return None;
        }
        let token = std::mem::replace(slot, BufToken::RELEASED);
        let len = std::mem::take(&mut column.lengths[index]);
        meta.total_bytes -= u64::from(len);
        Some((column.region, token, column.offsets[index], len))
    }

    /// The number of segments each packet has (the queue's regions).
    #[cfg(feature = "dpdk")]
    pub(crate) fn segments_per_packet(&self) -> usize {
        self.meta().segments.len()
    }

    /// Returns segment `segment` of every packet to its pool now.
    pub fn free_all_segment_packets(&mut self, segment: usize) {
        for index in 0..self.num_packets() {
            self.free_packet_segment(segment, index);
        }
    }

    /// Blocks until device work on the burst's buffers is done (a GPU
    /// aggregate's kernel, a burst's copy into GPU memory); returns at once
    /// when there is none.
    pub fn wait_ready(&self) {
        if let Some(done) = &self.meta().completion {
            done.wait();
        }
    }

    /// The CUDA event that completes once the burst's GPU segments are
    /// written, for GPU work that must follow (`CudaStream::wait`); `None`
    /// when nothing is pending.
    #[cfg(feature = "cuda")]
    pub fn cuda_event(&self) -> Option<&cudarc::driver::CudaEvent> {
        self.meta().completion.as_deref()?.cuda_event()
    }

    /// Whether device work on the burst's buffers was attached.
    #[cfg(feature = "cuda")]
    pub(crate) fn has_completion(&self) -> bool {
        self.meta().completion.is_some()
    }

    /// The copies between the burst's `device` segments and their regions'
    /// staging twins, (source, destination, bytes): twin to device for a
    /// received burst, device to twin for one to send.
    #[cfg(feature = "cuda")]
    pub(crate) fn staged_copies(
        &self,
        direction: crate::direction::Direction,
        out: &mut Vec<(crate::memory::DevicePtr, crate::memory::DevicePtr, usize)>,
    ) {
        let meta = self.meta();
        for column in &meta.segments {
            let region = self.home.regions.get(column.region);
            for (token, &len) in column.buffers.iter().zip(&column.lengths).filter(|(t, _)| !t.is_released()) {
                let Some((twin, device)) = region.staged_copy(token, len as usize) else { break };
                out.push(match direction {
                    crate::direction::Direction::Rx => (twin, device, len as usize),
                    crate::direction::Direction::Tx => (device, twin, len as usize),
                });
            }
        }
    }

    /// Makes dropping the burst wait for `completion` before its buffers are reused.
    pub fn set_completion(&mut self, completion: Box<dyn Completion>) {
        if let Some(previous) = self.meta_mut().completion.replace(completion) {
            previous.wait();
        }
    }

    /// Appends a one-buffer frame: `len` bytes from `offset` in `token`.
    /// The same as [`push`](Self::push) of a one-segment slot, written out
    /// so the worker's hot path stores straight into the columns: a
    /// [`PacketSlot`] is a hundred bytes, and moving one per packet through
    /// the stack cost more than the rest of a DPDK receive.
    #[inline]
    #[cfg_attr(not(any(feature = "dpdk", feature = "af_xdp", feature = "rdma")), allow(dead_code))]
    pub(crate) fn push_frame(
        &mut self,
        (token, offset, len): (BufToken, u16, u32),
        flow_id: Option<u32>,
        stamp: Option<u64>,
    ) {
        debug_assert!(!self.is_full(), "burst pushed past batch_size");
        let meta = self.meta_mut();
        let (first, rest) = meta.segments.split_first_mut().expect("a queue has a segment");
        first.buffers.push(token);
        first.offsets.push(offset);
        first.lengths.push(len);
        for column in rest {
            column.buffers.push(BufToken::RELEASED);
            column.offsets.push(0);
            column.lengths.push(0);
        }
        meta.total_bytes += u64::from(len);
        meta.flow_ids.push(flow_id.unwrap_or(NO_FLOW));
        if let Some(index) = &mut meta.sender_index {
            index.push(u16::MAX);
        }
        if let Some(stamps) = &mut meta.rx_timestamps {
            stamps.push(stamp.unwrap_or(NO_TIMESTAMP));
        }
        if let Some(immediates) = &mut meta.immediates {
            immediates.push(None);
        }
        if let Some(remote) = &mut meta.remote {
            remote.push(None);
        }
    }

    /// Appends one-buffer frames of `region` (buffer index, offset, length)
    /// with no flow, as many [`push_frame`](Self::push_frame)s do, a column
    /// at a time: each column grows once, not once a packet.
    #[cfg(feature = "dpdk")]
    pub(crate) fn extend_frames(&mut self, region: &crate::memory::Region, frames: &[Frame]) {
        debug_assert!(self.num_packets() + frames.len() <= self.capacity(), "burst pushed past batch_size");
        let n = frames.len();
        let meta = self.meta_mut();
        let (first, rest) = meta.segments.split_first_mut().expect("a queue has a segment");
        first.buffers.extend(frames.iter().map(|&(index, ..)| region.adopt(index)));
        first.offsets.extend(frames.iter().map(|&(_, offset, _)| offset));
        first.lengths.extend(frames.iter().map(|&(.., len)| len));
        for column in rest {
            column.buffers.extend(std::iter::repeat_with(|| BufToken::RELEASED).take(n));
            column.offsets.extend(std::iter::repeat_n(0, n));
            column.lengths.extend(std::iter::repeat_n(0, n));
        }
        meta.total_bytes += frames.iter().map(|&(.., len)| u64::from(len)).sum::<u64>();
        meta.flow_ids.extend(std::iter::repeat_n(NO_FLOW, n));
        if let Some(index) = &mut meta.sender_index {
            index.extend(std::iter::repeat_n(u16::MAX, n));
        }
        if let Some(stamps) = &mut meta.rx_timestamps {
            stamps.extend(std::iter::repeat_n(NO_TIMESTAMP, n));
        }
        if let Some(immediates) = &mut meta.immediates {
            immediates.extend(std::iter::repeat_n(None, n));
        }
        if let Some(remote) = &mut meta.remote {
            remote.extend(std::iter::repeat_n(None, n));
        }
    }

    /// Asks for the lines the pushes will write (the entry's header and its
    /// columns) in exclusive state, all at once, before the first push. An
    /// entry comes back from the application's core, which read it last, so
    /// each line the receiver writes would otherwise wait for its own
    /// cross-core transfer (docs/benchmarks.md, "Scaling over RX queues").
    pub(crate) fn prefetch_for_write(&self) {
        let meta = self.meta();
        prefetch_lines_for_write(std::ptr::from_ref(meta).cast(), std::mem::size_of::<BurstMeta>());
        for column in &meta.segments {
            prefetch_vec_for_write(&column.buffers);
            prefetch_vec_for_write(&column.offsets);
            prefetch_vec_for_write(&column.lengths);
        }
        prefetch_vec_for_write(&meta.flow_ids);
    }

    /// Appends a packet. Segments the slot lacks are stored as released.
    pub(crate) fn push(&mut self, slot: PacketSlot) {
        debug_assert!(!self.is_full(), "burst pushed past batch_size");
        let meta = self.meta_mut();
        let mut bytes = 0u64;
        let mut segments = slot.segments.into_iter().zip(slot.offsets);
        for column in &mut meta.segments {
            let (segment, offset) = segments.next().unwrap_or((None, 0));
            let (token, len) = segment.unwrap_or((BufToken::RELEASED, 0));
            bytes += u64::from(len);
            column.buffers.push(token);
            column.offsets.push(offset);
            column.lengths.push(len);
        }
        debug_assert!(segments.all(|(s, _)| s.is_none()), "packet has more segments than its queue");
        meta.total_bytes += bytes;
        meta.flow_ids.push(slot.flow_id.unwrap_or(NO_FLOW));
        if let Some(index) = &mut meta.sender_index {
            let sender = slot.source.map_or(u16::MAX, |addr| match meta.senders.iter().rposition(|s| *s == addr) {
                Some(i) => i as u16,
                None if meta.senders.len() < usize::from(u16::MAX) => {
                    meta.senders.push(addr);
                    (meta.senders.len() - 1) as u16
                }
                None => u16::MAX,
            });
            index.push(sender);
        }
        if let Some(stamps) = &mut meta.rx_timestamps {
            stamps.push(slot.rx_timestamp.unwrap_or(NO_TIMESTAMP));
        }
        if let Some(immediates) = &mut meta.immediates {
            immediates.push(slot.immediate);
        }
        if let Some(remote) = &mut meta.remote {
            remote.push(slot.remote);
        }
    }

    /// Appends `n` empty packets with a fresh buffer per segment, as
    /// `get_tx_packet_burst` hands them out, taking each region's buffers
    /// in bulk. On a shortage, the region that ran out; the burst then
    /// holds some of them, which go back when it is dropped.
    pub(crate) fn push_fresh(&mut self, n: usize) -> Result<(), u16> {
        debug_assert!(self.num_packets() + n <= self.meta().capacity, "burst pushed past batch_size");
        let regions = &self.home.regions;
        let meta = self.meta.as_deref_mut().expect("present until drop");
        for column in &mut meta.segments {
            if regions.get(column.region).take_each(n, |token| column.buffers.push(token)) < n {
                return Err(column.region);
            }
            column.offsets.resize(column.buffers.len(), 0);
            column.lengths.resize(column.buffers.len(), 0);
        }
        let packets = meta.flow_ids.len() + n;
        meta.flow_ids.resize(packets, NO_FLOW);
        if let Some(index) = &mut meta.sender_index {
            index.resize(packets, u16::MAX);
        }
        if let Some(stamps) = &mut meta.rx_timestamps {
            stamps.resize(packets, NO_TIMESTAMP);
        }
        if let Some(immediates) = &mut meta.immediates {
            immediates.resize(packets, None);
        }
        if let Some(remote) = &mut meta.remote {
            remote.resize(packets, None);
        }
        Ok(())
    }

    /// Packet `index`'s immediate, for a backend sending it.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub(crate) fn immediate(&self, index: usize) -> Option<u32> {
        *self.meta().immediates.as_ref()?.get(index)?
    }

    /// The peer's memory packet `index` is written to or read from; `None` for a SEND.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub(crate) fn remote(&self, index: usize) -> Option<RemoteMemory> {
        *self.meta().remote.as_ref()?.get(index)?
    }
}

impl Drop for Burst {
    fn drop(&mut self) {
        if let Some(meta) = self.meta.take() {
            self.home.give_back(meta);
        }
    }
}

/// A read-only view of one packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    meta: &'a BurstMeta,
    index: usize,
    regions: &'a RegionTable,
}

impl<'a> Packet<'a> {
    /// Segment 0: the whole packet unless header-data split is configured.
    pub fn data(&self) -> &'a [u8] {
        self.segment(0).unwrap_or_default()
    }

    /// Segment `index` as host bytes; `None` when absent, released, or in
    /// memory the CPU cannot read (see [`segment_memory`](Self::segment_memory)).
    pub fn segment(&self, index: usize) -> Option<&'a [u8]> {
        match self.segment_memory(index)? {
            SegmentMemory::Host(bytes) => Some(bytes),
            SegmentMemory::Device(_) => None,
        }
    }

    /// Segment `index`'s bytes for the CPU: host bytes in place, GPU bytes
    /// copied from the device once the GPU's work is done (a CUDA build;
    /// without one, `NOT_SUPPORTED`). `None` when absent or released. A
    /// synchronous copy per call: for writers and tools, not the data path.
    pub fn segment_to_host(&self, index: usize) -> crate::Result<Option<std::borrow::Cow<'a, [u8]>>> {
        let Some((region, token, offset, len)) = self.held_segment(index) else { return Ok(None) };
        let region = self.regions.get(region);
        match region.segment(token, offset, len) {
            SegmentMemory::Host(bytes) => Ok(Some(std::borrow::Cow::Borrowed(bytes))),
            #[cfg(feature = "cuda")]
            SegmentMemory::Device(slice) => {
                let gpu = region.backing().gpu().unwrap_or(0);
                Ok(Some(std::borrow::Cow::Owned(crate::gpu::copy_to_host(gpu, slice)?)))
            }
            #[cfg(not(feature = "cuda"))]
            SegmentMemory::Device(_) => Err(crate::Error::new(
                crate::Status::NotSupported,
                format!("segment {index} lies in GPU memory, and this build has no CUDA to copy it to the host"),
            )),
        }
    }

    /// Segment `index` as a backend that sends with the CPU reads it: host
    /// bytes, or a `device` segment's copy in its region's staging twin
    /// (`send_tx_burst` starts the copy; the sender waits for it).
    pub(crate) fn sendable_segment(&self, index: usize) -> Option<&'a [u8]> {
        let (region, token, offset, len) = self.held_segment(index)?;
        self.regions.get(region).host_bytes(token)?.get(offset..offset + len)
    }

    /// Segment `index` where it lives: host bytes, or a device slice.
    pub fn segment_memory(&self, index: usize) -> Option<SegmentMemory<'a>> {
        let (region, token, offset, len) = self.held_segment(index)?;
        Some(self.regions.get(region).segment(token, offset, len))
    }

    /// Segment `index`'s region, its byte offset in the region and its
    /// length; `None` when absent or released.
    pub(crate) fn segment_place(&self, index: usize) -> Option<(u16, usize, u32)> {
        let (region, token, offset, len) = self.held_segment(index)?;
        Some((region, self.regions.get(region).byte_offset(token, offset), len as u32))
    }

    /// Segment `index`'s region, buffer, offset in the buffer and length;
    /// `None` when absent or released.
    fn held_segment(&self, index: usize) -> Option<(u16, &'a BufToken, usize, usize)> {
        let column = self.meta.segments.get(index)?;
        let token = &column.buffers[self.index];
        if token.is_released() {
            return None;
        }
        Some((column.region, token, usize::from(column.offsets[self.index]), column.lengths[self.index] as usize))
    }

    /// Segments present.
    pub fn num_segments(&self) -> usize {
        self.meta.segments.iter().filter(|c| !c.buffers[self.index].is_released()).count()
    }

    /// Length of segment `index` (0 when absent).
    pub fn segment_len(&self, index: usize) -> usize {
        self.meta.segments.get(index).map_or(0, |c| c.lengths[self.index] as usize)
    }

    /// Total length over all segments.
    pub fn len(&self) -> usize {
        self.meta.segments.iter().map(|c| c.lengths[self.index] as usize).sum()
    }

    /// Whether the packet has no bytes (or was released).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The flow that matched the packet; `None` when it reached a default queue unmatched.
    pub fn flow_id(&self) -> Option<u32> {
        Some(self.meta.flow_ids[self.index]).filter(|&id| id != NO_FLOW)
    }

    /// For datagrams received on a socket: who sent it.
    pub fn source(&self) -> Option<SocketAddr> {
        let index = *self.meta.sender_index.as_ref()?.get(self.index)?;
        self.meta.senders.get(usize::from(index)).copied()
    }

    /// The NIC's receive timestamp in nanoseconds since the Unix epoch
    /// (DAQIRI's unit), on queues of an interface with
    /// `rx.hardware_timestamps` whose PMD stamped this packet. DPDK leaves
    /// the unit to the PMD: `net_pcap`'s microseconds are scaled, a NIC's
    /// clock ticks are converted at the rate measured at start (where the
    /// NIC's clock follows PTP, as mlx5's real-time mode does, so does this).
    pub fn rx_timestamp(&self) -> Option<u64> {
        let stamp = *self.meta.rx_timestamps.as_ref()?.get(self.index)?;
        (stamp != NO_TIMESTAMP).then_some(stamp)
    }

    /// The 32 bits of immediate data its RDMA message carried (SEND or
    /// WRITE with immediate), in host order; `None` for a message without,
    /// and on every other backend.
    pub fn immediate(&self) -> Option<u32> {
        *self.meta.immediates.as_ref()?.get(self.index)?
    }

    /// For the result of an RDMA READ this port's TX queue asked for
    /// ([`PacketMut::set_rdma_read`]): the peer's address it was read from.
    pub fn rdma_read_from(&self) -> Option<u64> {
        match (*self.meta.remote.as_ref()?.get(self.index)?)? {
            RemoteMemory::Read(addr, _) => Some(addr),
            RemoteMemory::Write(..) => None,
        }
    }

    /// Whether the packet's buffers were released early.
    pub fn is_freed(&self) -> bool {
        self.num_segments() == 0
    }
}

/// A writable view of one packet, for filling TX bursts.
#[derive(Debug)]
pub struct PacketMut<'a> {
    meta: &'a mut BurstMeta,
    index: usize,
    regions: &'a RegionTable,
}

impl PacketMut<'_> {
    /// The whole host buffer of segment `index` (its region's `buf_size`
    /// bytes); `None` when absent or not host memory. A `device` segment's
    /// staging twin is the engine's, not the application's: what is sent is
    /// what the device buffer holds.
    pub fn segment_buffer(&mut self, index: usize) -> Option<&mut [u8]> {
        let column = self.meta.segments.get_mut(index)?;
        let token = &mut column.buffers[self.index];
        let region = self.regions.get(column.region);
        if token.is_released() || region.backing().host_base().is_none() {
            return None;
        }
        region.host_bytes_mut(token)
    }

    /// Sets the length of each segment, in order (DAQIRI's `set_packet_lengths`).
    pub fn set_lengths(&mut self, lengths: &[usize]) -> crate::Result<()> {
        for (index, &len) in lengths.iter().enumerate() {
            let column = self
                .meta
                .segments
                .get(index)
                .filter(|c| !c.buffers[self.index].is_released())
                .ok_or_else(|| crate::Error::invalid(format!("packet has no segment {index}")))?;
            let capacity = self.regions.get(column.region).buf_size() - usize::from(column.offsets[self.index]);
            if len > capacity {
                return Err(crate::Error::invalid(format!(
                    "segment {index} length {len} exceeds its buffer of {capacity} bytes"
                )));
            }
        }
        for (index, &len) in lengths.iter().enumerate() {
            let old = std::mem::replace(&mut self.meta.segments[index].lengths[self.index], len as u32);
            self.meta.total_bytes = self.meta.total_bytes - u64::from(old) + len as u64;
        }
        Ok(())
    }

    /// Sets the flow id carried with the packet.
    pub fn set_flow_id(&mut self, flow_id: Option<u32>) {
        self.meta.flow_ids[self.index] = flow_id.unwrap_or(NO_FLOW);
    }

    /// Writes a whole single-segment packet: copies `bytes` and sets the length.
    pub fn write(&mut self, bytes: &[u8]) -> crate::Result<()> {
        let buf = self.buffer0()?;
        let capacity = buf.len();
        let dst = buf
            .get_mut(..bytes.len())
            .ok_or_else(|| crate::Error::invalid(format!("{} bytes exceed the {capacity}-byte buffer", bytes.len())))?;
        dst.copy_from_slice(bytes);
        self.set_lengths(&[bytes.len()])
    }

    /// Sends the packet with 32 bits of immediate data (an RDMA SEND with
    /// immediate); `NOT_SUPPORTED` on a queue of any other backend.
    pub fn set_immediate(&mut self, immediate: u32) -> crate::Result<()> {
        let column =
            self.meta.immediates.as_mut().ok_or_else(|| {
                crate::Error::new(crate::Status::NotSupported, "only RoCE queues carry immediate data")
            })?;
        column[self.index] = Some(immediate);
        Ok(())
    }

    /// Sends the packet as an RDMA WRITE into the peer's memory at
    /// `remote_addr` under its `rkey` (what the peer registered for remote
    /// write and told the application out of band), rather than as a
    /// SEND; with an immediate set, a WRITE with immediate, which also
    /// completes a receive at the peer. `NOT_SUPPORTED` on a queue of any
    /// other backend.
    pub fn set_rdma_write(&mut self, remote_addr: u64, rkey: u32) -> crate::Result<()> {
        let column = self.meta.remote.as_mut().ok_or_else(|| {
            crate::Error::new(crate::Status::NotSupported, "only RoCE TX queues write into a peer's memory")
        })?;
        column[self.index] = Some(RemoteMemory::Write(remote_addr, rkey));
        Ok(())
    }

    /// Makes the packet an RDMA READ of `len` bytes of the peer's memory at
    /// `remote_addr` under its `rkey`, into this packet's buffer, rather
    /// than a SEND. The bytes read arrive on the RX queue of the TX queue's
    /// position (whose connection it sends on) as one packet in that very
    /// buffer ([`Packet::rdma_read_from`] says from where), so the TX queue
    /// must use that RX queue's region; a queue that does not, or of any
    /// other backend, answers `NOT_SUPPORTED`.
    pub fn set_rdma_read(&mut self, remote_addr: u64, rkey: u32, len: usize) -> crate::Result<()> {
        if !self.meta.rdma_reads || self.meta.remote.is_none() {
            return Err(crate::Error::new(
                crate::Status::NotSupported,
                "an RDMA READ is a RoCE TX queue's, and delivers the bytes read on the RX queue of the TX queue's position in the buffer they landed in: give the TX queue that RX queue's region",
            ));
        }
        self.set_lengths(&[len])?;
        if let Some(column) = self.meta.remote.as_mut() {
            column[self.index] = Some(RemoteMemory::Read(remote_addr, rkey));
        }
        Ok(())
    }

    fn buffer0(&mut self) -> crate::Result<&mut [u8]> {
        self.segment_buffer(0).ok_or_else(|| crate::Error::invalid("packet has no host segment 0"))
    }

    /// Writes the Ethernet header (DAQIRI's `set_eth_header`).
    pub fn set_eth_header(&mut self, src_mac: [u8; 6], dst_mac: [u8; 6]) -> crate::Result<()> {
        headers::write_eth(self.buffer0()?, src_mac, dst_mac)
    }

    /// Writes the IPv4 header after Ethernet (DAQIRI's `set_ipv4_header`).
    pub fn set_ipv4_header(
        &mut self,
        ip_payload_len: u16,
        protocol: u8,
        src: std::net::Ipv4Addr,
        dst: std::net::Ipv4Addr,
    ) -> crate::Result<()> {
        headers::write_ipv4(self.buffer0()?, ip_payload_len, protocol, src, dst)
    }

    /// Writes the UDP header after IPv4 (DAQIRI's `set_udp_header`).
    pub fn set_udp_header(&mut self, udp_payload_len: u16, src_port: u16, dst_port: u16) -> crate::Result<()> {
        headers::write_udp(self.buffer0()?, udp_payload_len, src_port, dst_port)
    }

    /// Copies the UDP payload after the headers (DAQIRI's `set_udp_payload`).
    pub fn set_udp_payload(&mut self, payload: &[u8]) -> crate::Result<()> {
        headers::write_udp_payload(self.buffer0()?, payload)
    }

    /// Writes a complete Ethernet/IPv4/UDP frame carrying `payload` and sets the length.
    pub fn write_udp_frame(&mut self, frame: &UdpFrame, payload: &[u8]) -> crate::Result<usize> {
        let len = frame.write(self.buffer0()?, payload)?;
        self.set_lengths(&[len])?;
        Ok(len)
    }
}

/// [`prefetch_lines_for_write`] over a column's whole allocation.
fn prefetch_vec_for_write<T>(column: &Vec<T>) {
    prefetch_lines_for_write(column.as_ptr().cast(), column.capacity() * std::mem::size_of::<T>());
}

/// Asks for the cache lines of `bytes` from `start` in exclusive state
/// (`prefetchw`): a hint, which never faults; CPUs without it ignore it.
#[allow(unsafe_code)]
fn prefetch_lines_for_write(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..bytes).step_by(64) {
        // SAFETY: a hint for an address inside the allocation; it neither
        // faults nor changes anything a program observes.
        unsafe {
            std::arch::asm!("prefetchw [{}]", in(reg) start.wrapping_add(at), options(nostack, preserves_flags, readonly));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}
