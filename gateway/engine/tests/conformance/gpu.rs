//! The GPU scenarios (a `cuda` build on the GPU machine): packets landing in
//! GPU memory and sent from it, GPU reorder against its oracle, and the CPU
//! writers' refusal of GPU bytes, on each bed that runs there.
//! `tests/gpu/run.sh` runs them.

use std::time::Duration;

use daqiri::{Burst, SegmentMemory};
use daqiri_config::model::{BitField, MemoryKind, ReorderType};
use daqiri_config::testing::{plan, rx};

use crate::beds::{Bed, send_one};
use crate::outcome::Outcome;
use crate::scenarios::{
    collect_batches, next_burst, oracle_batch, pace, payload, send_scrambled, start_or_refusal,
    stops_with_every_buffer_back,
};

const BUFS: u32 = 4096;

/// Segment 0 of packet `i`, read back from the GPU.
fn device_bytes(burst: &Burst, i: usize) -> Vec<u8> {
    match burst.packet(i).segment_memory(0).expect("the packet's segment") {
        SegmentMemory::Device(slice) => {
            burst.wait_ready();
            daqiri::gpu::copy_to_host(0, slice).expect("copied back")
        }
        SegmentMemory::Host(_) => panic!("packet {i} landed in host memory, not in the device region"),
    }
}

/// An engine whose RX queue 0 lands in a `device` region, in bursts of
/// `batch`, or how the bed refused that.
fn landing_in_gpu_memory(bed: &dyn Bed, batch: u32) -> Result<daqiri::Engine, Outcome> {
    let config = bed
        .config()
        .region_of("mem", MemoryKind::Device, BUFS, bed.buf_size())
        .rx_queue(rx(0, "mem").core(1).batch(batch).timeout_us(500));
    start_or_refusal(bed, &config, &["rx.queues[0].memory_regions"])
}

/// An RX queue landing in a `device` region delivers each packet there,
/// byte-exact, and every buffer goes back once the bursts are dropped and
/// the engine stopped.
pub fn gpu_landing(bed: &dyn Bed) -> Outcome {
    let engine = match landing_in_gpu_memory(bed, 8) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    let sender = bed.sender(0);
    let sent: Vec<Vec<u8>> = (0..24u32).map(|seq| payload(seq, 64 + 53 * seq as usize)).collect();
    for (i, p) in sent.iter().enumerate() {
        sender.send(&engine, p);
        pace(i);
    }
    let mut got: Vec<u8> = Vec::new();
    let want: usize = sent.iter().map(Vec::len).sum();
    while got.len() < want {
        let burst = next_burst(&engine);
        for i in 0..burst.num_packets() {
            got.extend_from_slice(&device_bytes(&burst, i)[bed.headers()..]);
        }
    }
    // A byte stream may cut the payloads anywhere: compare the bytes in order.
    assert!(got == sent.concat(), "every byte lands in GPU memory, in order");
    stops_with_every_buffer_back(&engine);
    Outcome::Passed
}

/// A TX queue that sends from a `device` region puts on the wire what the
/// application wrote into GPU memory (as DAQIRI's programs do, with a copy
/// of their own), byte-exact and in order, and every buffer of the region
/// comes back.
pub fn gpu_tx(bed: &dyn Bed) -> Outcome {
    const COUNT: u32 = 200;
    let mut config =
        bed.tx_config().region("mem", BUFS, bed.buf_size()).rx_queue(rx(0, "mem").core(1).batch(1).timeout_us(100));
    config.region_mut(bed.tx_region()).kind = MemoryKind::Device;
    let engine = match start_or_refusal(bed, &config, &["tx.queues[0].memory_regions"]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    let mut reader = bed.tx_reader();
    reader.attach(&engine);
    // A greeting the reader sent may sit in RX queue 0; it is not under test.
    while engine.get_rx_burst(0, 0).unwrap().is_some() {}
    daqiri::gpu::bind_thread(0).expect("GPU 0");
    let sent: Vec<Vec<u8>> = (0..COUNT).map(|seq| payload(seq, 64 + 7 * seq as usize)).collect();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut stream = Vec::new();
    for chunk in sent.chunks(16) {
        for p in chunk {
            send_one(&engine, |burst| write_to_device(burst, &bed.tx_bytes(p)));
        }
        if bed.has_datagrams() {
            for _ in chunk {
                got.push(reader.next(&engine, Duration::from_secs(10)).expect("a sent packet arrives"));
            }
        } else {
            // A byte stream may join or cut the packets anywhere: read the chunk's bytes.
            let until = stream.len() + chunk.iter().map(Vec::len).sum::<usize>();
            while stream.len() < until {
                stream.extend(reader.next(&engine, Duration::from_secs(10)).expect("the stream's next bytes"));
            }
        }
    }
    if bed.has_datagrams() {
        for (seq, (got, payload)) in got.iter().zip(&sent).enumerate() {
            let want = bed.tx_bytes(payload);
            assert!(
                got == &want,
                "packet {seq} arrives as written into GPU memory ({} bytes of {})",
                got.len(),
                want.len()
            );
        }
    } else {
        assert!(stream == sent.concat(), "the stream arrives as written into GPU memory ({} bytes)", stream.len());
    }
    stops_with_every_buffer_back(&engine);
    Outcome::Passed
}

/// Sizes segment 0 of a TX burst's one packet to `bytes` and copies them
/// into its device buffer, as an application's `cudaMemcpy` does.
fn write_to_device(burst: &mut Burst, bytes: &[u8]) {
    let mut packet = burst.packet_mut(0);
    assert!(packet.segment_buffer(0).is_none(), "a device segment has no host buffer for the application");
    packet.set_lengths(&[bytes.len()]).expect("the bytes fit");
    let Some(SegmentMemory::Device(slice)) = burst.packet(0).segment_memory(0) else {
        panic!("segment 0 is in GPU memory")
    };
    // SAFETY: the slice is the packet's own device buffer, `bytes.len()`
    // long; the copy is synchronous.
    unsafe { daqiri::gpu::cudarc::driver::result::memcpy_htod_sync(slice.ptr().address(), bytes) }
        .expect("copied into GPU memory");
}

/// A GPU reorder plan, fed from pinned landing buffers, places each batch
/// in GPU memory equal to the oracle.
pub fn gpu_reorder(bed: &dyn Bed) -> Outcome {
    if !bed.has_datagrams() {
        return Outcome::NotApplicable("a byte stream has no packets to reorder");
    }
    const PER_BATCH: u32 = 16;
    const BATCHES: u32 = 4;
    const DATA: usize = 96;
    let sender = bed.sender(0);
    let sequence = BitField { bit_offset: bed.headers() as u32 * 8, bit_width: 32 };
    let config = bed
        .config()
        .region_of("mem", MemoryKind::HostPinned, BUFS, bed.buf_size())
        .region_of("batches", MemoryKind::Device, 64, u64::from(PER_BATCH) * DATA as u64)
        .rx_queue(rx(0, "mem").core(1).batch(PER_BATCH).timeout_us(20_000))
        .udp_src_flow(3, 0, sender.port())
        .reorder(
            plan("plan", &[3], "batches")
                .on(ReorderType::Gpu)
                .payload_at(bed.headers() as u32 + 4)
                .packets_per_batch(sequence, PER_BATCH),
        );
    let engine = match start_or_refusal(bed, &config, &["rx.queues[0].memory_regions", "reorder_configs"]) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    send_scrambled(&engine, sender.as_ref(), PER_BATCH * BATCHES, PER_BATCH, DATA);
    for (id, aggregate) in collect_batches(&engine, BATCHES, |burst| device_bytes(burst, 0)) {
        assert!(aggregate == oracle_batch(id, PER_BATCH, DATA), "batch {id} equals the oracle");
    }
    Outcome::Passed
}

/// The raw and pcap writers write a burst whose bytes lie in GPU memory,
/// copied to the host first: every file and record equals the bytes the
/// GPU holds.
pub fn gpu_writers(bed: &dyn Bed) -> Outcome {
    let engine = match landing_in_gpu_memory(bed, 4) {
        Ok(engine) => engine,
        Err(refused) => return refused,
    };
    let sender = bed.sender(0);
    for seq in 0..4u32 {
        sender.send(&engine, &payload(seq, 300));
    }
    let burst = next_burst(&engine);
    let held: Vec<Vec<u8>> = (0..burst.num_packets()).map(|i| device_bytes(&burst, i)).collect();
    let dir = tempfile::tempdir().unwrap();
    let raw = daqiri::writer::RawWriter::new(dir.path(), "pkt", 0).unwrap();
    assert_eq!(raw.write(&burst).expect("the raw writer writes GPU bytes").packets, held.len() as u64);
    for (i, bytes) in held.iter().enumerate() {
        assert!(std::fs::read(raw.path(i)).unwrap() == *bytes, "raw file {i} equals the GPU's bytes");
    }
    let pcap_path = dir.path().join("c.pcap");
    let mut pcap =
        daqiri::writer::PcapWriter::create(&pcap_path, daqiri::writer::PcapResolution::Micros, None).unwrap();
    pcap.write_burst(&burst).expect("the pcap writer writes GPU bytes");
    drop(pcap);
    let file = std::fs::read(&pcap_path).unwrap();
    let mut at = 24;
    for (i, bytes) in held.iter().enumerate() {
        let incl = u32::from_le_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
        assert!(file[at + 16..at + 16 + incl] == bytes[..], "pcap record {i} equals the GPU's bytes");
        at += 16 + incl;
    }
    assert_eq!(at, file.len(), "one record per packet");
    Outcome::Passed
}
