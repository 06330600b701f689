//! The loop's wire for a port whose queues all use `device` memory of one
//! GPU: each packet still lands in fresh buffers of its RX queue's own
//! regions, as off a wire, but its bytes go GPU to GPU, a chunk of a burst
//! in one launch, instead of through two pinned twins and a CPU core. The
//! CPU reads frames only when steering needs their headers; they are copied
//! to pinned memory for it first (one launch per chunk).

use std::ops::Range;

use super::{MAX_FRAME, SRC_MAC, land_with};
use crate::burst::{Burst, MAX_SEGMENTS, Packet, PacketSlot};
use crate::delivery::{Steer, Steered};
use crate::error::Result;
use crate::gpu::{DeviceBuffer, GpuReorder, PinnedMemory};
use crate::inbox::Inboxes;
use crate::memory::{DevicePtr, PoolCache, Region, RegionTable, SegmentMemory};
use crate::port::Port;
use crate::queue::Queue;
use crate::stats::DropReason;

/// Frame bytes per chunk when steering reads headers: the pinned memory
/// the CPU reads them from.
const HEADER_CHUNK: usize = 4 << 20;

/// A copy for the gather kernel: source, destination, bytes.
type Copy = (DevicePtr, DevicePtr, usize);

/// The GPU of a port whose every queue, TX and RX, keeps every segment in
/// `device` memory of that one GPU, and where no reorder plan reads packets
/// where they land; `None` for any other port (its loop goes through the CPU).
pub(super) fn port_gpu(port: &Port, regions: &RegionTable) -> Option<u32> {
    if !port.plans.is_empty() || port.tx.is_empty() {
        return None;
    }
    let mut gpus = port.rx.iter().chain(&port.tx).flat_map(|q| &q.segment_regions).map(|&r| {
        let region = regions.get(r);
        if region.kind().cpu_addressable() { None } else { region.backing().gpu() }
    });
    let first = gpus.next()??;
    gpus.all(|gpu| gpu == Some(first)).then_some(first)
}

/// One TX queue's wire on the GPU.
#[derive(Debug)]
pub(super) struct DeviceWire {
    kernels: GpuReorder,
    mac: [u8; 6],
    /// The port's MAC on the GPU, where `tx_eth_src`'s patches copy it from.
    mac_on_gpu: DeviceBuffer,
    frames: HostFrames,
    landing: Landing,
}

impl DeviceWire {
    /// The wire of a TX queue of up to `batch_size` packets a burst.
    pub(super) fn new(gpu: u32, mac: [u8; 6], batch_size: usize) -> Result<Self> {
        let mut kernels = GpuReorder::new(gpu)?;
        // A packet's copies: one per overlap of its TX and RX segments, and
        // two patches at most; three words each.
        kernels.reserve(batch_size * 2 * MAX_SEGMENTS * 3)?;
        Ok(Self {
            kernels,
            mac,
            mac_on_gpu: DeviceBuffer::from_host(gpu, &mac)?,
            frames: HostFrames { gpu, memory: None },
            landing: Landing::default(),
        })
    }

    /// Gives the buffers its caches hold back to their regions.
    pub(super) fn finish(&mut self, regions: &RegionTable) {
        for (region, cache) in &mut self.landing.caches {
            regions.get(*region).drain_cache(cache);
        }
    }

    /// Moves one TX burst onto the RX side, a chunk at a time; a chunk's
    /// packets are posted once their copies are done.
    pub(super) fn carry(&mut self, mut steer: Steer<'_>, tx: &Queue, burst: &Burst, inboxes: &Inboxes) {
        let port = steer.port();
        let reads_headers = steer.reads_headers() && !port.rx.is_empty();
        let fill_src = tx.fill_eth_src.then_some(self.mac);
        let (mut sent, mut bytes) = (0u64, 0u64);
        let mut chunk = 0..0;
        while chunk.end < burst.num_packets() {
            chunk = chunk.end..if reads_headers { chunk_end(burst, chunk.end) } else { burst.num_packets() };
            let frames =
                match reads_headers.then(|| self.frames.fetch(&mut self.kernels, burst, chunk.clone(), fill_src)) {
                    None => None,
                    Some(Ok(frames)) => Some(frames),
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "the loop could not copy frames to the host to steer them");
                        tx.stats.dropped(DropReason::DeviceError, chunk.len() as u64);
                        continue;
                    }
                };
            self.landing.start(port, inboxes);
            let mut at = 0;
            for index in chunk.clone() {
                let packet = burst.packet(index);
                let len = packet.len();
                let frame = frames.map_or(&[][..], |frames| &frames[at..at + len]);
                at += len;
                if len > MAX_FRAME {
                    tx.stats.dropped(DropReason::Truncated, 1);
                    continue;
                }
                sent += 1;
                bytes += len as u64;
                if port.rx.is_empty() {
                    continue;
                }
                let Some(Steered { queue, flow_id }) = steer.frame(frame, len as u32) else { continue };
                let mac = (tx.fill_eth_src && len >= SRC_MAC.end).then(|| self.mac_on_gpu.ptr());
                self.landing.land(port, queue, &packet, mac, flow_id);
            }
            self.landing.post(&mut self.kernels, port, inboxes);
        }
        tx.stats.delivered(sent, bytes);
    }
}

/// Where the chunk starting at packet `first` ends: as many packets as fit
/// [`HEADER_CHUNK`], and at least one.
fn chunk_end(burst: &Burst, first: usize) -> usize {
    let mut bytes = 0;
    let mut end = first;
    while end < burst.num_packets() {
        bytes += burst.packet(end).len();
        if bytes > HEADER_CHUNK && end > first {
            break;
        }
        end += 1;
    }
    end
}

/// A packet's TX segments on the GPU, in frame order.
fn device_segments(packet: &Packet<'_>) -> impl Iterator<Item = (DevicePtr, usize)> {
    (0..MAX_SEGMENTS).filter_map(|s| match packet.segment_memory(s)? {
        SegmentMemory::Device(slice) => Some((slice.ptr(), slice.len())),
        SegmentMemory::Host(_) => unreachable!("a device wire's queues keep every segment on the GPU"),
    })
}

/// The frames of a chunk in pinned memory, one after another, for steering.
#[derive(Debug)]
struct HostFrames {
    gpu: u32,
    memory: Option<PinnedMemory>,
}

impl HostFrames {
    /// Copies packets `chunk` of `burst` here, with `fill_src` (the port's
    /// MAC, under `tx_eth_src`) where the wire would write it, and waits
    /// for them.
    fn fetch(
        &mut self,
        kernels: &mut GpuReorder,
        burst: &Burst,
        chunk: Range<usize>,
        fill_src: Option<[u8; 6]>,
    ) -> Result<&[u8]> {
        let need = chunk.clone().map(|i| burst.packet(i).len()).sum::<usize>();
        if self.memory.as_ref().is_none_or(|m| m.len() < need) {
            self.memory = Some(PinnedMemory::near_gpu(self.gpu, need.max(HEADER_CHUNK))?);
        }
        let memory = self.memory.as_mut().expect("made above");
        let mut copies = Vec::new();
        let mut at = 0;
        for index in chunk.clone() {
            for (ptr, len) in device_segments(&burst.packet(index)) {
                copies.push((ptr, memory.device().offset(at), len));
                at += len;
            }
        }
        kernels.gather(&copies)?;
        kernels.synchronize()?;
        let bytes = memory.host_bytes_mut();
        if let Some(mac) = fill_src {
            let mut at = 0;
            for index in chunk {
                let len = burst.packet(index).len();
                if len >= SRC_MAC.end {
                    bytes[at + SRC_MAC.start..at + SRC_MAC.end].copy_from_slice(&mac);
                }
                at += len;
            }
        }
        Ok(&bytes[..need])
    }
}

/// A chunk's packets on their way to RX buffers: their slots and copies.
#[derive(Debug, Default)]
struct Landing {
    /// The frames, launched first.
    copies: Vec<Copy>,
    /// `tx_eth_src`'s MAC over them, launched after.
    patches: Vec<Copy>,
    /// Each RX queue's packets, posted as one run once the copies are done.
    runs: Vec<Vec<PacketSlot>>,
    /// Free RX buffers taken in bulk, by region: one pool operation per
    /// [`CACHE_REFILL`] packets instead of one each.
    caches: Vec<(u16, PoolCache)>,
}

/// Buffers an RX region's cache takes at a time.
const CACHE_REFILL: usize = 256;

impl Landing {
    /// Takes buffers of RX queue `queue` for `packet` and plans its copies;
    /// `mac`: where to copy the port's MAC from into its source address.
    fn land(&mut self, port: &Port, queue: usize, packet: &Packet<'_>, mac: Option<DevicePtr>, flow_id: Option<u32>) {
        let mut sources = [(DevicePtr::new(0), 0); MAX_SEGMENTS];
        let mut count = 0;
        for source in device_segments(packet) {
            sources[count] = source;
            count += 1;
        }
        let sources = &sources[..count];
        let (copies, patches, caches) = (&mut self.copies, &mut self.patches, &mut self.caches);
        let take_buffer = |r: u16, region: &Region| {
            let at = match caches.iter().position(|(cached, _)| *cached == r) {
                Some(at) => at,
                None => {
                    caches.push((r, PoolCache::new(CACHE_REFILL)));
                    caches.len() - 1
                }
            };
            region.take_cached(&mut caches[at].1)
        };
        let run = &mut self.runs[queue];
        run.push(PacketSlot::default());
        let slot = run.last_mut().expect("pushed above");
        let rx = &port.rx[queue];
        let landed =
            land_with(slot, rx, &port.regions, packet.len(), flow_id, take_buffer, |region, token, from, take| {
                let dst =
                    region.device_segment(token, 0, take).expect("a device wire's RX regions are on the GPU").ptr();
                copy_range(sources, from..from + take, dst, copies);
                if let Some(mac) = mac {
                    let overlap = from.max(SRC_MAC.start)..(from + take).min(SRC_MAC.end);
                    if !overlap.is_empty() {
                        patches.push((
                            mac.offset(overlap.start - SRC_MAC.start),
                            dst.offset(overlap.start - from),
                            overlap.len(),
                        ));
                    }
                }
            });
        if !landed {
            run.pop();
        }
    }

    /// Readies a run per RX queue of `port` for the next chunk.
    fn start(&mut self, port: &Port, inboxes: &Inboxes) {
        self.runs.resize_with(port.rx.len(), Vec::new);
        for (queue, run) in self.runs.iter_mut().enumerate() {
            if run.capacity() == 0 {
                *run = inboxes.of(queue).spare_run();
            }
        }
    }

    /// Launches the chunk's copies, waits for them and posts its packets;
    /// if the GPU fails them, gives their buffers back and counts them dropped.
    fn post(&mut self, kernels: &mut GpuReorder, port: &Port, inboxes: &Inboxes) {
        let copied = (|| {
            for copies in [&self.copies, &self.patches] {
                if !copies.is_empty() {
                    kernels.gather(copies)?;
                }
            }
            kernels.synchronize()
        })();
        self.copies.clear();
        self.patches.clear();
        for (queue, run) in self.runs.iter_mut().enumerate().filter(|(_, run)| !run.is_empty()) {
            let rx = &port.rx[queue];
            match &copied {
                Ok(()) => inboxes.of(queue).post_run(rx, std::mem::take(run), &port.regions),
                Err(_) => {
                    rx.stats.dropped(DropReason::DeviceError, run.len() as u64);
                    run.drain(..).for_each(|slot| slot.release(&port.regions, &rx.segment_regions));
                }
            }
        }
        if let Err(e) = copied {
            tracing::error!(error = %e, "the loop's copies on the GPU failed");
        }
    }
}

/// Plans the copy of frame bytes `range`, gathered from `sources` (the
/// frame's pieces in order), to `dst`.
fn copy_range(sources: &[(DevicePtr, usize)], range: Range<usize>, dst: DevicePtr, out: &mut Vec<Copy>) {
    let mut start = 0;
    for &(ptr, len) in sources {
        let overlap = range.start.max(start)..range.end.min(start + len);
        if !overlap.is_empty() {
            out.push((ptr.offset(overlap.start - start), dst.offset(overlap.start - range.start), overlap.len()));
        }
        start += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_range_is_copied_from_every_piece_it_overlaps() {
        let sources = [(DevicePtr::new(1000), 10), (DevicePtr::new(2000), 5), (DevicePtr::new(3000), 20)];
        let mut out = Vec::new();
        copy_range(&sources, 8..18, DevicePtr::new(9000), &mut out);
        assert_eq!(
            out,
            vec![
                (DevicePtr::new(1008), DevicePtr::new(9000), 2),
                (DevicePtr::new(2000), DevicePtr::new(9002), 5),
                (DevicePtr::new(3000), DevicePtr::new(9007), 3),
            ]
        );
        out.clear();
        copy_range(&sources, 0..35, DevicePtr::new(0), &mut out);
        assert_eq!(out.iter().map(|c| c.2).sum::<usize>(), 35);
        out.clear();
        copy_range(&sources, 35..35, DevicePtr::new(0), &mut out);
        assert!(out.is_empty());
    }
}
