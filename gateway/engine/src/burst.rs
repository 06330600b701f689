//! Bursts: DAQIRI's unit of delivery, a batch of packets that owns its buffers.
//!
//! A [`Burst`] holds one metadata entry from its queue's pool
//! (`rx_meta_buffers` / `tx_meta_buffers`) and the buffers of its packets.
//! Dropping it returns both, which replaces DAQIRI's `free_*` calls; single
//! packets or segments can still be released early with
//! [`Burst::free_packet`] and [`Burst::free_packet_segment`].

use std::mem::ManuallyDrop;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use crate::headers::{self, UdpFrame};
use crate::memory::{BufToken, RegionTable};

/// Most segments a packet can have (header-data split uses two).
pub const MAX_SEGMENTS: usize = 4;

/// Burst flags, as in DAQIRI's `burst_flags`.
pub mod flags {
    /// The burst holds one reordered aggregate.
    pub const REORDERED: u32 = 1 << 0;
    /// The aggregate was emitted by the timeout path.
    pub const REORDER_TIMEOUT: u32 = 1 << 1;
}

#[derive(Debug)]
struct Segment {
    token: BufToken,
    len: u32,
}

/// One packet of a burst, as the engine stores it.
#[derive(Debug, Default)]
pub(crate) struct PacketSlot {
    segments: [Option<Segment>; MAX_SEGMENTS],
    flow_id: Option<u32>,
    /// Sender of a datagram received on a socket.
    source: Option<std::net::SocketAddr>,
}

impl PacketSlot {
    /// A single-segment packet.
    pub(crate) fn single(token: BufToken, len: u32, flow_id: Option<u32>) -> Self {
        let mut slot = PacketSlot { flow_id, ..Default::default() };
        slot.set_segment(0, token, len);
        slot
    }

    /// Records the datagram's sender (socket streams).
    pub(crate) fn with_source(mut self, source: Option<std::net::SocketAddr>) -> Self {
        self.source = source;
        self
    }

    /// Places a buffer as segment `index`.
    pub(crate) fn set_segment(&mut self, index: usize, token: BufToken, len: u32) {
        debug_assert!(self.segments[index].is_none(), "segment {index} set twice");
        self.segments[index] = Some(Segment { token, len });
    }

    /// Sets the flow id.
    pub(crate) fn set_flow_id(&mut self, flow_id: Option<u32>) {
        self.flow_id = flow_id;
    }

    /// Returns the packet's buffers to their regions.
    pub(crate) fn release(&mut self, regions: &RegionTable) {
        for seg in self.segments.iter_mut().filter_map(Option::take) {
            regions.release(seg.token);
        }
    }
}

#[derive(Debug)]
struct BurstMeta {
    port: u16,
    queue: u16,
    flags: u32,
    source_packets: u32,
    batch_id: Option<u64>,
    packets: Vec<PacketSlot>,
}

/// A pool of burst metadata entries for one queue. Entries are allocated once
/// with room for `batch_size` packets and reused, so the data path never allocates.
#[derive(Debug)]
pub(crate) struct MetaPool {
    free: ArrayQueue<Box<BurstMeta>>,
    regions: Arc<RegionTable>,
}

impl MetaPool {
    pub(crate) fn new(entries: u32, batch_size: u32, port: u16, queue: u16, regions: Arc<RegionTable>) -> Arc<Self> {
        let free = ArrayQueue::new(entries.max(1) as usize);
        for _ in 0..entries.max(1) {
            let meta = BurstMeta {
                port,
                queue,
                flags: 0,
                source_packets: 0,
                batch_id: None,
                packets: Vec::with_capacity(batch_size as usize),
            };
            free.push(Box::new(meta)).expect("pool sized for every entry");
        }
        Arc::new(Self { free, regions })
    }

    /// An empty burst, or `None` when every entry is in flight.
    pub(crate) fn take(self: &Arc<Self>) -> Option<Burst> {
        let meta = self.free.pop()?;
        debug_assert!(meta.packets.is_empty());
        Some(Burst { meta: ManuallyDrop::new(meta), home: Arc::clone(self) })
    }

    /// Entries not in flight.
    pub(crate) fn available(&self) -> usize {
        self.free.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.free.capacity()
    }
}

/// A batch of packets with the buffers they live in.
#[derive(Debug)]
pub struct Burst {
    meta: ManuallyDrop<Box<BurstMeta>>,
    home: Arc<MetaPool>,
}

impl Burst {
    /// Port (interface index) the burst belongs to.
    pub fn port_id(&self) -> u16 {
        self.meta.port
    }

    /// Queue id the burst belongs to.
    pub fn queue_id(&self) -> u16 {
        self.meta.queue
    }

    /// Packets in the burst, released ones included.
    pub fn num_packets(&self) -> usize {
        self.meta.packets.len()
    }

    /// Whether the burst holds no packets.
    pub fn is_empty(&self) -> bool {
        self.meta.packets.is_empty()
    }

    /// Most packets this burst can hold (the queue's `batch_size`).
    pub fn capacity(&self) -> usize {
        self.meta.packets.capacity()
    }

    /// Whether the burst holds `batch_size` packets.
    pub fn is_full(&self) -> bool {
        self.meta.packets.len() == self.meta.packets.capacity()
    }

    /// Burst flags (see [`flags`]).
    pub fn flags(&self) -> u32 {
        self.meta.flags
    }

    /// For reordered bursts: source packets aggregated; otherwise the packet count.
    pub fn source_packets(&self) -> u32 {
        if self.meta.flags & flags::REORDERED != 0 { self.meta.source_packets } else { self.num_packets() as u32 }
    }

    /// For reordered bursts: the batch id of the aggregate.
    pub fn batch_id(&self) -> Option<u64> {
        self.meta.batch_id
    }

    /// Bytes over all packets and segments.
    pub fn total_bytes(&self) -> u64 {
        self.packets().map(|p| p.len() as u64).sum()
    }

    /// Packet `index`; panics when out of range, like slice indexing.
    pub fn packet(&self, index: usize) -> Packet<'_> {
        Packet { slot: &self.meta.packets[index], regions: &self.home.regions }
    }

    /// All packets in order.
    pub fn packets(&self) -> impl ExactSizeIterator<Item = Packet<'_>> {
        self.meta.packets.iter().map(|slot| Packet { slot, regions: &self.home.regions })
    }

    /// Packet `index`, writable (to fill TX packets).
    pub fn packet_mut(&mut self, index: usize) -> PacketMut<'_> {
        PacketMut { slot: &mut self.meta.packets[index], regions: &self.home.regions }
    }

    /// Returns all buffers of packet `index` to their pools now.
    pub fn free_packet(&mut self, index: usize) {
        self.meta.packets[index].release(&self.home.regions);
    }

    /// Returns one segment of packet `index` to its pool now.
    pub fn free_packet_segment(&mut self, segment: usize, index: usize) {
        if let Some(seg) = self.meta.packets[index].segments.get_mut(segment).and_then(Option::take) {
            self.home.regions.release(seg.token);
        }
    }

    /// Returns segment `segment` of every packet to its pool now.
    pub fn free_all_segment_packets(&mut self, segment: usize) {
        for index in 0..self.num_packets() {
            self.free_packet_segment(segment, index);
        }
    }

    pub(crate) fn push(&mut self, slot: PacketSlot) {
        debug_assert!(!self.is_full(), "burst pushed past batch_size");
        self.meta.packets.push(slot);
    }
}

impl Drop for Burst {
    fn drop(&mut self) {
        for slot in &mut self.meta.packets {
            slot.release(&self.home.regions);
        }
        self.meta.packets.clear();
        self.meta.flags = 0;
        self.meta.batch_id = None;
        self.meta.source_packets = 0;
        // SAFETY: `meta` is never used again after this take; Drop runs once.
        let meta = unsafe { ManuallyDrop::take(&mut self.meta) };
        // Cannot fail: the entry came from this pool, which has room for all of them.
        let _ = self.home.free.push(meta);
    }
}

/// A read-only view of one packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    slot: &'a PacketSlot,
    regions: &'a RegionTable,
}

impl<'a> Packet<'a> {
    /// Segment 0: the whole packet unless header-data split is configured.
    pub fn data(&self) -> &'a [u8] {
        self.segment(0).unwrap_or_default()
    }

    /// Segment `index`, `None` when absent or released.
    pub fn segment(&self, index: usize) -> Option<&'a [u8]> {
        let seg = self.slot.segments.get(index)?.as_ref()?;
        Some(&self.regions.of(&seg.token).bytes(&seg.token)[..seg.len as usize])
    }

    /// Segments present.
    pub fn num_segments(&self) -> usize {
        self.slot.segments.iter().filter(|s| s.is_some()).count()
    }

    /// Length of segment `index` (0 when absent).
    pub fn segment_len(&self, index: usize) -> usize {
        self.slot.segments.get(index).and_then(Option::as_ref).map_or(0, |s| s.len as usize)
    }

    /// Total length over all segments.
    pub fn len(&self) -> usize {
        self.slot.segments.iter().flatten().map(|s| s.len as usize).sum()
    }

    /// Whether the packet has no bytes (or was released).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The flow that matched the packet; `None` when it reached a default queue unmatched.
    pub fn flow_id(&self) -> Option<u32> {
        self.slot.flow_id
    }

    /// For datagrams received on a socket: who sent it.
    pub fn source(&self) -> Option<std::net::SocketAddr> {
        self.slot.source
    }

    /// Whether the packet's buffers were released early.
    pub fn is_freed(&self) -> bool {
        self.num_segments() == 0
    }
}

/// A writable view of one packet, for filling TX bursts.
#[derive(Debug)]
pub struct PacketMut<'a> {
    slot: &'a mut PacketSlot,
    regions: &'a RegionTable,
}

impl PacketMut<'_> {
    /// The whole buffer of segment `index` (its region's `buf_size` bytes).
    pub fn segment_buffer(&mut self, index: usize) -> Option<&mut [u8]> {
        let seg = self.slot.segments.get_mut(index)?.as_mut()?;
        Some(self.regions.of(&seg.token).bytes_mut(&mut seg.token))
    }

    /// Sets the length of each segment, in order (DAQIRI's `set_packet_lengths`).
    pub fn set_lengths(&mut self, lengths: &[usize]) -> crate::Result<()> {
        for (index, &len) in lengths.iter().enumerate() {
            let capacity = self
                .segment_buffer(index)
                .map(|b| b.len())
                .ok_or_else(|| crate::Error::invalid(format!("packet has no segment {index}")))?;
            if len > capacity {
                return Err(crate::Error::invalid(format!(
                    "segment {index} length {len} exceeds its buffer of {capacity} bytes"
                )));
            }
            if let Some(seg) = self.slot.segments[index].as_mut() {
                seg.len = len as u32;
            }
        }
        Ok(())
    }

    /// Sets the flow id carried with the packet.
    pub fn set_flow_id(&mut self, flow_id: Option<u32>) {
        self.slot.flow_id = flow_id;
    }

    /// Writes a whole single-segment packet: copies `bytes` and sets the length.
    pub fn write(&mut self, bytes: &[u8]) -> crate::Result<()> {
        let buf = self.segment_buffer(0).ok_or_else(|| crate::Error::invalid("packet has no segment 0"))?;
        let capacity = buf.len();
        let dst = buf
            .get_mut(..bytes.len())
            .ok_or_else(|| crate::Error::invalid(format!("{} bytes exceed the {capacity}-byte buffer", bytes.len())))?;
        dst.copy_from_slice(bytes);
        self.set_lengths(&[bytes.len()])
    }

    fn buffer0(&mut self) -> crate::Result<&mut [u8]> {
        self.segment_buffer(0).ok_or_else(|| crate::Error::invalid("packet has no segment 0"))
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
