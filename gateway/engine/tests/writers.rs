//! Burst writers read back by real tools: capinfos and tshark for pcap,
//! plain file reads for raw writes. `tests/setup.sh` installs tshark.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use daqiri::Engine;
use daqiri::writer::{PcapResolution, PcapWriter, RawWriter};

mod common;
use common::split_loop::{config, payload, received_burst};
use common::{free_udp_port, udp_server};
use daqiri_config::testing::rx;

/// A fresh directory, removed with its files on drop.
fn dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("daqiri-writers-").tempdir().unwrap()
}

fn tool(name: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(name)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{name} is needed (tests/setup.sh installs it): {e}"));
    assert!(out.status.success(), "{name} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn pcap_reads_back_in_capinfos_and_tshark_byte_for_byte_and_appends() {
    let engine = Engine::from_yaml(&config()).unwrap();
    let dir = dir();
    let path = dir.path().join("capture.pcap");
    let first = received_burst(&engine, 10);
    PcapWriter::open(&path, PcapResolution::Micros, None).unwrap().write_burst(&first).unwrap();
    // The asynchronous path appends to the same file and hands the burst back.
    let second = received_burst(&engine, 5);
    let (second, result) = PcapWriter::append_async(&path, PcapResolution::Micros, second).unwrap().wait();
    assert_eq!(result.unwrap().packets, 5);
    assert_eq!(second.num_packets(), 5);

    let info = tool("capinfos", &["-M", "-c", "-d", "-E", "-T"], &path);
    let row: Vec<&str> = info.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(row[1], "ether", "Ethernet link type: {info}");
    assert_eq!(row[2], "15", "{info}");
    let sent_bytes: usize = (0..10).chain(0..5).map(|i| 42 + payload(i).len()).sum();
    assert_eq!(row[3], sent_bytes.to_string(), "{info}");

    let fields =
        tool("tshark", &["-T", "fields", "-e", "udp.srcport", "-e", "udp.dstport", "-e", "data.data", "-r"], &path);
    let lines: Vec<&str> = fields.lines().collect();
    assert_eq!(lines.len(), 15);
    for (line, i) in lines.iter().zip((0..10).chain(0..5)) {
        let hex: String = payload(i).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(*line, format!("40000\t40001\t{hex}"), "packet with payload {i}");
    }
}

#[test]
fn nanosecond_pcap_is_read_as_such() {
    let engine = Engine::from_yaml(&config()).unwrap();
    let dir = dir();
    let path = dir.path().join("capture.pcap");
    PcapWriter::open(&path, PcapResolution::Nanos, None).unwrap().write_burst(&received_burst(&engine, 3)).unwrap();
    let info = tool("capinfos", &["-M", "-T", "-c", "-a"], &path);
    assert!(info.lines().nth(1).unwrap().contains("\t3\t"), "{info}");
    let times = tool("tshark", &["-T", "fields", "-e", "frame.time_epoch", "-r"], &path);
    assert_eq!(times.lines().count(), 3);
    assert!(times.lines().all(|t| t.split('.').nth(1).is_some_and(|f| f.len() == 9)), "nanosecond timestamps: {times}");
}

#[test]
fn raw_writes_one_file_per_packet_skipping_the_offset() {
    let engine = Engine::from_yaml(&config()).unwrap();
    let dir = dir();
    let out = dir.path();
    let burst = received_burst(&engine, 4);
    // 42 bytes of headers live in segment 0: an offset of 42 writes only the payload.
    let writer = RawWriter::new(out, "group", 42).unwrap();
    let (_, result) = writer.write_async(burst).unwrap().wait();
    assert_eq!(result.unwrap().packets, 4);
    for i in 0..4 {
        assert_eq!(std::fs::read(writer.path(i)).unwrap(), payload(i), "file {i}");
    }
    assert!(RawWriter::new(out, "../escape", 0).is_err());
}

#[test]
fn socket_datagrams_become_frames_that_tshark_dissects() {
    let port = free_udp_port();
    let yaml = udp_server(port, rx(0, "mem").batch(6).timeout_us(1000), 256).yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..6 {
        sender.send_to(&payload(i), ("127.0.0.1", port)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let burst = loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            break b;
        }
        assert!(Instant::now() < deadline, "no burst");
    };
    let dir = dir();
    let path = dir.path().join("udp.pcap");
    let local = engine.local_addr(0).unwrap().unwrap();
    let written =
        PcapWriter::open(&path, PcapResolution::Micros, None).unwrap().write_burst_as_udp(&burst, local).unwrap();
    assert_eq!(written.packets, 6);
    let fields = tool(
        "tshark",
        &[
            "-o",
            "ip.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "udp.srcport",
            "-e",
            "udp.dstport",
            "-e",
            "ip.checksum.status",
            "-e",
            "data.data",
            "-r",
        ],
        &path,
    );
    let src_port = sender.local_addr().unwrap().port();
    for (i, line) in fields.lines().enumerate() {
        let hex: String = payload(i).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(line, format!("127.0.0.1\t{src_port}\t{port}\t1\t{hex}"), "frame {i} (ip.checksum.status 1 = good)");
    }
    assert_eq!(fields.lines().count(), 6);
}
