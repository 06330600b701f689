//! `format: gds` captures: bytes in GPU memory reach the file without
//! passing through host code. The tap copies a burst's device segments on
//! the GPU into a ring of device slots (one launch per burst), host bytes
//! into the record as other captures do; the writer thread hands both to
//! cuFile through [`GdsWriter`].

use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context as _;
use daqiri::DevicePtr;
use daqiri::gpu::{DeviceBuffer, GpuReorder};
use daqiri::writer::GdsFormat;
pub(super) use daqiri::writer::GdsWriter;
use daqiri::{Burst, MAX_SEGMENTS, Packet, SegmentMemory};

use super::device_side::DeviceSide;
use super::error::CaptureError;
use super::ring::{Piece, Record};

/// Whether this gateway can write `gds` captures: on a machine with the
/// NVIDIA driver.
pub(super) fn gds_available() -> Result<(), CaptureError> {
    daqiri::gpu::gpu_count().map(|_| ()).map_err(|e| {
        CaptureError::NotImplemented(format!("format gds (GPUDirect Storage) cannot run here: {}", e.detail()))
    })
}

/// GPU memory a capture's device ring may take; a ring has at least one slot.
const DEVICE_RING_BYTES: usize = 256 << 20;

/// The device half of a GDS capture's ring: one slot per ring record.
#[derive(Debug)]
pub(super) struct DeviceSlots {
    gpu: u32,
    buffer: DeviceBuffer,
    slot_bytes: usize,
    pending: Mutex<Pending>,
}

/// A burst's copies, queued until the burst is done.
#[derive(Debug)]
struct Pending {
    kernels: GpuReorder,
    copies: Vec<(DevicePtr, DevicePtr, usize)>,
    records: Vec<Record>,
}

impl DeviceSlots {
    /// How many records a ring of `side`'s slots holds within the budget.
    pub(super) fn ring_slots(side: DeviceSide, most: usize) -> usize {
        (DEVICE_RING_BYTES / side.bytes.max(1)).clamp(1, most)
    }

    pub(super) fn new(side: DeviceSide, slots: usize) -> anyhow::Result<Self> {
        let buffer = DeviceBuffer::zeroed(side.gpu, side.bytes * slots)
            .with_context(|| format!("allocating {slots} capture slots of {} bytes on GPU {}", side.bytes, side.gpu))?;
        let kernels = GpuReorder::new(side.gpu)?;
        Ok(Self {
            gpu: side.gpu,
            buffer,
            slot_bytes: side.bytes,
            pending: Mutex::new(Pending { kernels, copies: Vec::new(), records: Vec::new() }),
        })
    }

    /// Binds the calling writer thread to the slots' GPU: cuFile takes
    /// device pointers from a thread with the GPU's context.
    pub(super) fn bind_writer_thread(&self) -> anyhow::Result<()> {
        Ok(daqiri::gpu::bind_thread(self.gpu)?)
    }

    /// Fills `record` with `packet`: its host bytes now (after synthesised
    /// UDP headers when `frame` gives the addresses), its device segments
    /// queued for copy into the record's slot. Gives the record back when
    /// the packet's device bytes do not fit a slot.
    // A record that cannot be staged goes back to its ring: moved whole, as a slot is.
    #[allow(clippy::result_large_err)]
    pub(super) fn stage(
        &self,
        mut record: Record,
        packet: &Packet<'_>,
        frame: Option<(SocketAddrV4, SocketAddrV4)>,
    ) -> Result<(), Record> {
        record.bytes.clear();
        record.pieces.clear();
        if let Some((source, local)) = frame
            && daqiri::headers::synthesize_udp_headers(&mut record.bytes, source, local, packet.len()).is_ok()
        {
            record.pieces.push(Piece::Host(record.bytes.len()));
        }
        let slot = self.buffer.ptr().offset(record.slot * self.slot_bytes);
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        // This packet's copies go straight into the burst's list; a packet
        // that does not fit takes its own back out.
        let queued = pending.copies.len();
        let mut used = 0;
        for segment in (0..MAX_SEGMENTS).filter_map(|s| packet.segment_memory(s)) {
            match segment {
                SegmentMemory::Host(bytes) => {
                    record.bytes.extend_from_slice(bytes);
                    record.pieces.push(Piece::Host(bytes.len()));
                }
                SegmentMemory::Device(slice) => {
                    if used + slice.len() > self.slot_bytes {
                        pending.copies.truncate(queued);
                        return Err(record);
                    }
                    pending.copies.push((slice.ptr(), slot.offset(used), slice.len()));
                    record.pieces.push(Piece::Device(slice.len()));
                    used += slice.len();
                }
            }
        }
        record.orig_len = record.bytes.len() + used;
        pending.records.push(record);
        Ok(())
    }

    /// Runs the queued copies after the burst's own device work (its copy
    /// into GPU memory, its kernel) and waits for them, since the burst's
    /// buffers go back to their pool once the application loop drops it.
    /// Then hands each staged record to `done`, with whether its copy ran.
    pub(super) fn finish(&self, burst: &Burst, mut done: impl FnMut(Record, bool)) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Pending { kernels, copies, records } = &mut *pending;
        let copied = copies.is_empty() || copy_after(kernels, burst, copies).is_ok();
        copies.clear();
        for record in records.drain(..) {
            done(record, copied);
        }
    }

    /// The record's packet as segments for [`GdsWriter::write_packet`].
    fn segments<'a>(&'a self, record: &'a Record) -> Vec<SegmentMemory<'a>> {
        let (mut host, mut device) = (0, record.slot * self.slot_bytes);
        record
            .pieces
            .iter()
            .map(|&piece| match piece {
                Piece::Host(n) => {
                    host += n;
                    SegmentMemory::Host(&record.bytes[host - n..host])
                }
                Piece::Device(n) => {
                    device += n;
                    SegmentMemory::Device(self.buffer.slice(device - n, n))
                }
            })
            .collect()
    }
}

fn copy_after(
    kernels: &mut GpuReorder,
    burst: &Burst,
    copies: &[(DevicePtr, DevicePtr, usize)],
) -> Result<(), daqiri::Error> {
    if let Some(ready) = burst.cuda_event() {
        kernels.stream().wait(ready).map_err(|e| {
            daqiri::Error::new(daqiri::Status::InternalError, format!("ordering a capture copy: CUDA error {e:?}"))
        })?;
    }
    let done = kernels.gather(copies)?;
    done.synchronize()
        .map_err(|e| daqiri::Error::new(daqiri::Status::InternalError, format!("capture copy: CUDA error {e:?}")))
}

/// Writes one record into a GDS file; returns the bytes it added.
pub(super) fn write_record(
    writer: &mut GdsWriter,
    slots: Option<&DeviceSlots>,
    record: &Record,
) -> anyhow::Result<u64> {
    let written = match slots {
        Some(slots) if !record.pieces.is_empty() => writer.write_packet(&slots.segments(record), record.time),
        _ => writer.write_packet(&[SegmentMemory::Host(&record.bytes)], record.time),
    };
    Ok(written?)
}

/// A pcap file written through cuFile, and how cuFile moves its bytes.
pub(super) fn open_pcap(path: &Path, snaplen: u32) -> anyhow::Result<(GdsWriter, &'static str)> {
    let writer = GdsWriter::create(path, GdsFormat::Pcap { snaplen })?;
    let mode = writer.mode().as_str();
    Ok((writer, mode))
}

/// One reorder aggregate as its own raw file; returns the bytes written
/// and how cuFile moved them.
pub(super) fn write_aggregate(
    path: &Path,
    slots: Option<&DeviceSlots>,
    record: &Record,
) -> anyhow::Result<(u64, &'static str)> {
    let mut writer = GdsWriter::create(path, GdsFormat::Raw)?;
    let written = write_record(&mut writer, slots, record)?;
    Ok((written, writer.mode().as_str()))
}
