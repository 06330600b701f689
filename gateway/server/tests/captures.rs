//! REST captures of real traffic, read back by tshark and capinfos; and a
//! capture whose gateway is killed with SIGKILL still reads to its last
//! whole record. `tests/setup.sh` installs tshark.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use daqiri_config::testing::{TestConfig, rx};
use serde_json::Value;

use common::{
    GATEWAY, ScratchDir, free_tcp_port, free_udp_port, http, scratch_dir, wait_for_capture_end, wait_for_port,
};

struct Gateway {
    child: Child,
    admin: u16,
    udp: u16,
    dir: ScratchDir,
}

impl Gateway {
    fn start(tag: &str) -> Self {
        Self::start_with(tag, 2048)
    }

    /// A gateway whose buffers hold `buf_size` bytes.
    fn start_with(tag: &str, buf_size: u32) -> Self {
        let dir = scratch_dir(&format!("captures-{tag}"));
        let captures = dir.join("out");
        Self::start_in(dir, buf_size, &captures, 1)
    }

    /// A gateway in `dir` that captures into `captures`, keeping `floor_mb` free there.
    fn start_in(dir: ScratchDir, buf_size: u32, captures: &std::path::Path, floor_mb: u64) -> Self {
        // The admin API listens on TCP, the interface on UDP: each port free in its own protocol.
        let (admin, udp) = (free_tcp_port(), free_udp_port());
        let config = dir.join("gateway.yaml");
        std::fs::write(
            &config,
            TestConfig::udp_server(udp)
                .interface_named("udp_rx")
                .region("m", 8192, u64::from(buf_size))
                .rx_queue(rx(0, "m").batch(32).timeout_us(1000))
                .yaml(),
        )
        .unwrap();
        std::fs::write(dir.join("token"), "t0ken\n").unwrap();
        let child = Command::new(GATEWAY)
            .args([
                "run",
                "--admin-addr",
                &format!("127.0.0.1:{admin}"),
                "--capture-free-space-floor-mb",
                &floor_mb.to_string(),
                "--config",
            ])
            .arg(&config)
            .arg("--capture-dir")
            .arg(captures)
            .arg("--admin-token-file")
            .arg(dir.join("token"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_port(admin);
        Gateway { child, admin, udp, dir }
    }

    fn request(&self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        http(self.admin, method, path, &[("Authorization", "Bearer t0ken"), ("Content-Type", "application/json")], body)
    }

    fn json(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let (status, body) = self.request(method, path, body);
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    fn send(&self, count: u64) {
        self.send_sized(count, 200);
    }

    fn send_sized(&self, count: u64, payload_size: usize) {
        let out = Command::new(GATEWAY)
            .args([
                "gen",
                "--dest",
                &format!("127.0.0.1:{}", self.udp),
                "--rate",
                "50000",
                "--count",
                &count.to_string(),
            ])
            .args(["--payload-size", &payload_size.to_string(), "--src-port", &free_udp_port().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "gen failed: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tshark(file: &std::path::Path, fields: &[&str]) -> (bool, String) {
    let mut args = vec!["-r".to_owned(), file.display().to_string(), "-T".into(), "fields".into()];
    for f in fields {
        args.extend(["-e".to_owned(), (*f).to_owned()]);
    }
    let out = Command::new("tshark").args(&args).output().expect("tshark (tests/setup.sh installs it)");
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn a_rest_capture_of_live_traffic_reads_back_complete_in_tshark() {
    let gw = Gateway::start("live");
    let (status, info) = gw.json(
        "POST",
        "/api/v1/captures",
        r#"{"format": "pcap", "interface": "udp_rx", "name": "live", "max_packets": 3000}"#,
    );
    assert_eq!(status, 201, "{info}");
    let id = info["id"].as_u64().unwrap();
    gw.send(3000);
    let info = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{id}"), "").1);
    assert_eq!(info["state"], "finished", "{info}");
    assert_eq!(info["packets"], 3000);
    assert_eq!(info["capture_drops"], 0);
    assert_eq!(info["progress"], 1.0);

    let (status, file) = gw.request("GET", &format!("/api/v1/captures/{id}/download"), "");
    assert_eq!(status, 200);
    let path = gw.dir.join("downloaded.pcap");
    std::fs::write(&path, &file).unwrap();
    assert_eq!(file.len() as u64, info["bytes"].as_u64().unwrap() + 24, "download is the whole file");
    let caps = Command::new("capinfos").args(["-M", "-T", "-c"]).arg(&path).output().unwrap();
    assert!(caps.status.success(), "{}", String::from_utf8_lossy(&caps.stderr));
    assert!(String::from_utf8_lossy(&caps.stdout).contains("\t3000"), "{}", String::from_utf8_lossy(&caps.stdout));
    let (ok, rows) = tshark(&path, &["udp.dstport", "udp.length", "data.data"]);
    assert!(ok);
    for (seq, row) in rows.lines().enumerate() {
        let cols: Vec<&str> = row.split('\t').collect();
        assert_eq!(cols[0], gw.udp.to_string());
        assert_eq!(cols[1], "208", "UDP length = 8 + 200 payload");
        assert!(
            cols[2].starts_with(&format!("{seq:08x}")),
            "packet {seq} carries its sequence number: {}",
            &cols[2][..8]
        );
    }
    assert_eq!(rows.lines().count(), 3000);
}

#[test]
fn deleting_a_capture_leaves_a_complete_file_and_sigkill_leaves_whole_records() {
    let mut gw = Gateway::start("kill");
    let (_, first) =
        gw.json("POST", "/api/v1/captures", r#"{"format": "pcap", "interface": "udp_rx", "name": "stopped"}"#);
    gw.send(500);
    std::thread::sleep(Duration::from_millis(300));
    let (status, stopped) = gw.json("DELETE", &format!("/api/v1/captures/{}", first["id"]), "");
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["state"], "finished");
    assert_eq!(stopped["packets"], 500);
    let stopped_file = PathBuf::from(stopped["files"][0].as_str().unwrap());
    let (ok, rows) = tshark(&stopped_file, &["frame.number"]);
    assert!(ok && rows.lines().count() == 500, "stopped capture is complete");

    let (_, running) =
        gw.json("POST", "/api/v1/captures", r#"{"format": "pcap", "interface": "udp_rx", "name": "killed"}"#);
    let sender = Command::new(GATEWAY)
        .args([
            "gen",
            "--dest",
            &format!("127.0.0.1:{}", gw.udp),
            "--rate",
            "50000",
            "--duration",
            "3",
            "--payload-size",
            "1000",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let killed_file = PathBuf::from(running["files"][0].as_str().unwrap());
    gw.child.kill().unwrap(); // SIGKILL mid-capture
    gw.child.wait().unwrap();
    let _ = sender.wait_with_output();
    let (_, rows) = tshark(&killed_file, &["frame.number", "frame.len"]);
    let frames: Vec<&str> = rows.lines().collect();
    assert!(frames.len() > 100, "records before the kill are readable: {}", frames.len());
    assert!(frames.iter().all(|f| f.ends_with("\t1042")), "every record read is whole");
}

#[test]
fn client_subcommands_drive_a_capture_end_to_end() {
    let gw = Gateway::start("client");
    let admin = format!("127.0.0.1:{}", gw.admin);
    let token = gw.dir.join("token");
    let cli = |args: &[&str]| {
        let out = Command::new(GATEWAY)
            .args(args)
            .args(["--admin-addr", &admin, "--token-file"])
            .arg(&token)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let starter = {
        let (admin, token) = (admin.clone(), token.clone());
        std::thread::spawn(move || {
            Command::new(GATEWAY)
                .args(["capture", "start", "--interface", "udp_rx", "--name", "cli", "--max-packets", "400", "--wait"])
                .args(["--admin-addr", &admin, "--token-file"])
                .arg(&token)
                .output()
                .unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    gw.send(400);
    let started = starter.join().unwrap();
    let printed = String::from_utf8_lossy(&started.stdout);
    assert!(started.status.success() && printed.contains("finished: max_packets (400) reached"), "{printed}");
    assert!(cli(&["capture", "list"]).contains("cli"));
    let output = gw.dir.join("cli-download.pcap");
    let said = cli(&["capture", "download", "1", "--output", output.to_str().unwrap()]);
    assert!(said.contains("bytes written"), "{said}");
    let (ok, rows) = tshark(&output, &["frame.number"]);
    assert!(ok && rows.lines().count() == 400);
    assert!(cli(&["status"]).contains("udp_rx"));
    let refused = Command::new(GATEWAY)
        .args(["capture", "stop", "99", "--admin-addr", &admin, "--token-file"])
        .arg(&token)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no capture 99"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

fn resident_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

#[test]
fn finished_captures_give_their_packet_copies_back() {
    // Each capture's ring cycles through all its slots, each growing to the
    // packet size: 8192 slots of 4 KB packets are 32 MiB per capture.
    let gw = Gateway::start_with("release", 8192);
    let capture = |name: &str| {
        let body = format!(r#"{{"format": "pcap", "interface": "udp_rx", "name": "{name}"}}"#);
        let (status, started) = gw.json("POST", "/api/v1/captures", &body);
        assert_eq!(status, 201, "{started}");
        gw.send_sized(9000, 4000);
        std::thread::sleep(Duration::from_millis(200));
        let (status, stopped) = gw.json("DELETE", &format!("/api/v1/captures/{}", started["id"]), "");
        assert_eq!((status, &stopped["state"]), (200, &Value::from("finished")), "{stopped}");
        let _ = std::fs::remove_file(stopped["files"][0].as_str().unwrap());
    };
    capture("warm-up");
    let before = resident_mib(gw.child.id());
    for i in 0..6 {
        capture(&format!("c{i}"));
    }
    let after = resident_mib(gw.child.id());
    let (status, list) = gw.json("GET", "/api/v1/captures", "");
    assert_eq!((status, list.as_array().map(Vec::len)), (200, Some(7)), "finished captures stay listed");
    assert!(after < before + 48, "six finished captures kept {} MiB (RSS {before} -> {after} MiB)", after - before);
}

/// A peak of packet copies goes back to the kernel once the captures end:
/// the allocator would otherwise keep it in its arenas, charged to the pod.
#[test]
fn the_memory_of_concurrent_captures_is_given_back_when_they_end() {
    let gw = Gateway::start_with("peak", 8192);
    let before = resident_mib(gw.child.id());
    let started: Vec<Value> = (0..3).map(|i| start_capture(&gw, &format!("peak{i}"))).collect();
    // 9000 packets of 4 KB: each ring's 8192 slots grow to 4 KB, 32 MiB a capture.
    gw.send_sized(9000, 4000);
    std::thread::sleep(Duration::from_millis(200));
    let peak = resident_mib(gw.child.id());
    // About 96 MiB on a quiet machine; less where receive dropped some under load.
    assert!(peak > before + 32, "three rings of 4 KB copies: RSS {before} -> {peak} MiB");
    for capture in &started {
        let (status, stopped) = gw.json("DELETE", &format!("/api/v1/captures/{}", capture["id"]), "");
        assert_eq!((status, &stopped["state"]), (200, &Value::from("finished")), "{stopped}");
        let _ = std::fs::remove_file(stopped["files"][0].as_str().unwrap());
    }
    let after = resident_mib(gw.child.id());
    // Without giving the heap back, about 60% of the peak stayed.
    assert!(
        after.saturating_sub(before) < (peak - before) / 4,
        "ended captures kept {} MiB (RSS {before} -> {peak} -> {after} MiB)",
        after.saturating_sub(before)
    );
}

fn start_capture(gw: &Gateway, name: &str) -> Value {
    let body = format!(r#"{{"format": "pcap", "interface": "udp_rx", "name": "{name}"}}"#);
    let (status, started) = gw.json("POST", "/api/v1/captures", &body);
    assert_eq!(status, 201, "{started}");
    started
}

/// Records in a pcap file, checking that it ends on a record boundary.
fn pcap_records(path: &std::path::Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let (mut at, mut records) = (24, 0);
    while at + 16 <= bytes.len() {
        at += 16 + u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        records += 1;
    }
    assert_eq!(at, bytes.len(), "{} ends on a record boundary", path.display());
    records
}

#[test]
fn a_reused_name_is_refused_and_the_earlier_file_is_kept() {
    let gw = Gateway::start("reuse");
    let first = start_capture(&gw, "same");
    gw.send(300);
    std::thread::sleep(Duration::from_millis(200));
    let (_, done) = gw.json("DELETE", &format!("/api/v1/captures/{}", first["id"]), "");
    let file = PathBuf::from(done["files"][0].as_str().unwrap());
    let before = std::fs::read(&file).unwrap();
    let body = r#"{"format": "pcap", "interface": "udp_rx", "name": "same"}"#;
    let (status, answer) = gw.json("POST", "/api/v1/captures", body);
    assert_eq!((status, answer["field"].as_str()), (409, Some("name")), "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("never append"), "{answer}");
    gw.send(300);
    assert_eq!(std::fs::read(&file).unwrap(), before, "the earlier capture's file is untouched");
}

#[test]
fn queue_and_flow_filters_are_checked_against_the_interface() {
    let gw = Gateway::start("filters");
    for (filter, field) in [(r#""queue": 9"#, "queue"), (r#""flow": 77"#, "flow")] {
        let body = format!(r#"{{"format": "pcap", "interface": "udp_rx", "name": "f", {filter}}}"#);
        let (status, answer) = gw.json("POST", "/api/v1/captures", &body);
        assert_eq!((status, answer["field"].as_str()), (400, Some(field)), "{answer}");
    }
}

#[test]
fn removing_the_capture_directory_fails_the_capture_instead_of_finishing_it() {
    let gw = Gateway::start("removed");
    let started = start_capture(&gw, "doomed");
    gw.send(500);
    std::fs::remove_dir_all(gw.dir.join("out")).unwrap();
    gw.send(500);
    let (status, ended) = gw.json("DELETE", &format!("/api/v1/captures/{}", started["id"]), "");
    assert_eq!((status, ended["state"].as_str()), (200, Some("failed")), "{ended}");
    assert!(ended["reason"].as_str().unwrap().contains("removed or replaced"), "{ended}");
}

/// A tmpfs of `mib` MiB at a fresh directory, unmounted on drop.
struct SmallFilesystem(ScratchDir);

impl SmallFilesystem {
    fn mount(tag: &str, mib: u64) -> Self {
        let dir = scratch_dir(&format!("tmpfs-{tag}"));
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount a {mib} MiB tmpfs (needs root)");
        SmallFilesystem(dir)
    }

    fn free_bytes(&self) -> u64 {
        let out = Command::new("df").args(["--output=avail", "-B1"]).arg(&self.0).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
#[ignore = "needs root to mount a small tmpfs; run by tests/run.sh"]
fn a_full_disk_fails_the_capture_and_its_count_matches_the_records_in_the_file() {
    let disk = SmallFilesystem::mount("full", 4);
    let gw = Gateway::start_in(scratch_dir("captures-full"), 2048, &disk.0, 0);
    let started = start_capture(&gw, "full");
    // Another writer fills the filesystem under the running capture, faster than its floor checks.
    std::fs::write(disk.0.join("filler"), vec![0u8; 3 << 20]).unwrap();
    gw.send_sized(4000, 1000); // 4 MB of records for the 1 MiB left
    let ended = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{}", started["id"]), "").1);
    assert_eq!(ended["state"], "failed", "{ended}");
    assert!(ended["reason"].as_str().unwrap().contains("No space left"), "{ended}");
    let file = PathBuf::from(ended["files"][0].as_str().unwrap());
    let records = pcap_records(&file);
    assert!(records > 100, "the filesystem filled: {records} records");
    assert_eq!(ended["packets"].as_u64(), Some(records), "the API counts what the file holds: {ended}");
    assert!(tshark(&file, &["frame.number"]).0, "tshark reads the cut file");
}

/// A raw capture writes a file per packet: when the disk fills, it fails
/// and counts every file it left, not only those of its last commit.
#[test]
#[ignore = "needs root to mount a small tmpfs; run by tests/run.sh"]
fn a_full_disk_fails_a_raw_capture_and_its_count_matches_its_files() {
    let disk = SmallFilesystem::mount("full-raw", 4);
    let gw = Gateway::start_in(scratch_dir("captures-full-raw"), 2048, &disk.0, 0);
    let body = r#"{"format": "raw", "interface": "udp_rx", "name": "raw"}"#;
    let (status, started) = gw.json("POST", "/api/v1/captures", body);
    assert_eq!(status, 201, "{started}");
    std::fs::write(disk.0.join("filler"), vec![0u8; 3 << 20]).unwrap();
    gw.send_sized(4000, 1000);
    let ended = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{}", started["id"]), "").1);
    assert_eq!(ended["state"], "failed", "{ended}");
    let files = std::fs::read_dir(&*disk.0)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("raw_"))
        .count() as u64;
    assert!(files > 100, "the filesystem filled: {files} files");
    let counted = (ended["packets"].as_u64(), ended["reason"].as_str());
    assert_eq!(counted.0, Some(files), "the API counts every file it left ({:?})", counted.1);
}

#[test]
#[ignore = "needs root to mount a small tmpfs; run by tests/run.sh"]
fn a_small_free_space_floor_is_never_crossed() {
    const FLOOR_MIB: u64 = 3;
    let disk = SmallFilesystem::mount("floor", 8);
    let gw = Gateway::start_in(scratch_dir("captures-floor"), 2048, &disk.0, FLOOR_MIB);
    let started = start_capture(&gw, "floor");
    gw.send_sized(8000, 1000); // 8 MB: far past the floor
    let ended = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{}", started["id"]), "").1);
    assert_eq!(ended["state"], "finished", "{ended}");
    assert!(ended["reason"].as_str().unwrap().contains("free-space floor"), "{ended}");
    let free = disk.free_bytes();
    assert!(free >= FLOOR_MIB << 20, "{free} bytes free, below the {FLOOR_MIB} MiB floor");
    assert_eq!(ended["packets"].as_u64(), Some(pcap_records(&PathBuf::from(ended["files"][0].as_str().unwrap()))));
}

#[test]
fn only_the_latest_64_ended_captures_stay_listed() {
    let gw = Gateway::start("forget");
    let listed = || gw.json("GET", "/api/v1/captures", "").1;
    // Eight at a time, the most that may run at once; each ends at its first packet.
    for first in (0..66).step_by(8) {
        for i in first..(first + 8).min(66) {
            let body = format!(r#"{{"format": "pcap", "interface": "udp_rx", "name": "one{i}", "max_packets": 1}}"#);
            assert_eq!(gw.json("POST", "/api/v1/captures", &body).0, 201);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while listed().as_array().unwrap().iter().any(|c| c["state"] == "running") {
            assert!(std::time::Instant::now() < deadline, "the captures did not end: {}", listed());
            gw.send(1);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // The next start forgets the oldest ended ones; their files stay.
    assert_eq!(
        gw.json("POST", "/api/v1/captures", r#"{"format": "pcap", "interface": "udp_rx", "name": "last"}"#).0,
        201
    );
    let ids: Vec<u64> = listed().as_array().unwrap().iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 65, "64 ended and the running one");
    assert_eq!((ids[0], ids[64]), (3, 67), "captures 1 and 2 were forgotten");
    assert!(gw.dir.join("out/one0.pcap").exists(), "a forgotten capture's file stays");
}
