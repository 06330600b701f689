//! GPUDirect Storage writes on the GPU machine: packets land with their
//! payload in a `device` region (header-data split through pinned staging),
//! bursts are written by cuFile as raw and as pcap, synchronously and with
//! batch I/O, and the files read back equal what was sent, byte for byte.
//! Run by `tests/gpu/run.sh`.
#![cfg(feature = "cuda")]

use daqiri::writer::{GdsFormat, GdsWriter};
use daqiri::{Burst, Engine};
use daqiri_config::model::MemoryKind;
use daqiri_config::testing::{TestConfig, rx, tx};

/// A loopback engine that sends from host memory and lands each frame's
/// 42 header bytes in host memory and its payload in GPU memory.
fn config() -> TestConfig {
    TestConfig::loopback()
        .region("tx", 256, 9000)
        .region("headers", 256, 42)
        .region_of("payload", MemoryKind::Device, 256, 9000)
        .tx_queue(tx(0, "tx").batch(16))
        .rx_queue(rx(0, "headers").split_into("payload").batch(16).timeout_us(1000))
}

/// Frames of assorted lengths, some not a multiple of 16, a jumbo among them.
fn frames() -> Vec<Vec<u8>> {
    (0..48u32).map(|i| (0..(60 + (i * 181) % 8900)).map(|b| (b * 31 + i * 7) as u8).collect()).collect()
}

/// Sends `frames` through the loop and returns the bursts they came back in.
fn loop_back(engine: &Engine, frames: &[Vec<u8>]) -> Vec<Burst> {
    for frame in frames {
        let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
        burst.packet_mut(0).write(frame).unwrap();
        engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    }
    let mut bursts = Vec::new();
    let mut packets = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while packets < frames.len() {
        assert!(std::time::Instant::now() < deadline, "{packets} of {} frames came back", frames.len());
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            packets += burst.num_packets();
            bursts.push(burst);
        }
    }
    bursts
}

/// The records of a classic microsecond pcap file, checked as a reader would.
fn pcap_records(file: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(file[..4], 0xa1b2_c3d4u32.to_le_bytes(), "pcap magic");
    assert_eq!(file[20..24], 1u32.to_le_bytes(), "Ethernet link type");
    let mut records = Vec::new();
    let mut at = 24;
    while at < file.len() {
        let incl = u32::from_le_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(file[at + 12..at + 16].try_into().unwrap()) as usize;
        assert_eq!(incl, orig, "nothing was cut");
        records.push(file[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    assert_eq!(at, file.len(), "the file ends on a whole record");
    records
}

#[test]
fn gpu_gds_raw_and_pcap_files_read_back_byte_for_byte() {
    let dir = std::env::temp_dir().join(format!("daqiri-gds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = Engine::from_yaml(&config().yaml()).expect("engine landing payloads in GPU memory");
    let frames = frames();
    let bursts = loop_back(&engine, &frames);

    let mut raw = GdsWriter::create(dir.join("capture.bin"), GdsFormat::Raw).expect("cuFile opens the file");
    let mut pcap =
        GdsWriter::create(dir.join("capture.pcap"), GdsFormat::Pcap { snaplen: daqiri::writer::DEFAULT_SNAPLEN })
            .expect("cuFile opens the file");
    println!("cuFile mode: {}", raw.mode().as_str());
    let mut written = 0;
    for burst in bursts {
        written += raw.write_burst(&burst).expect("synchronous GDS write").packets;
        let (burst, result) = pcap.write_burst_async(burst).expect("batch submitted").wait();
        assert_eq!(result.expect("batch GDS write").packets, burst.num_packets() as u64);
    }
    assert_eq!(written, frames.len() as u64);
    assert_eq!(std::fs::read(raw.path()).unwrap(), frames.concat(), "raw file");
    assert_eq!(pcap_records(&std::fs::read(pcap.path()).unwrap()), frames, "pcap records");
    let _ = std::fs::remove_dir_all(&dir);
}
