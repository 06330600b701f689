//! REST captures to an S3 bucket of a real S3 server (SeaweedFS, started by
//! tests/run.sh through tests/s3/server.sh and named in
//! DAQIRI_TEST_S3_ENDPOINT; the test of a store that goes away starts one
//! of its own), every object read back by an independent client (curl,
//! signing with AWS SigV4 itself) and its pcap read by capinfos and tshark.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use daqiri_config::testing::{TestConfig, rx};
use serde_json::Value;

use common::{GATEWAY, Gateway, free_udp_port, scratch_dir, wait_for_capture_end};

#[path = "../../../tests/s3/client.rs"]
mod s3_client;
use s3_client::{ACCESS_KEY, SECRET_KEY, create_bucket as bucket, curl, endpoint};

/// An object named by its `s3://bucket/key` URL, read back by curl.
fn object(endpoint: &str, url: &str) -> Vec<u8> {
    let path = url.strip_prefix("s3://").expect("an s3:// URL");
    let (code, body) = curl(endpoint, "GET", path);
    assert_eq!(code, 200, "GET {url}: {}", String::from_utf8_lossy(&body));
    body
}

/// A UDP interface, `udp_rx`, and a gateway on it whose captures may go to
/// `endpoint` with `secret`; its port for senders.
fn gateway(tag: &str, endpoint: &str, secret: &str, more: &[&str]) -> (Gateway, u16) {
    let udp = free_udp_port();
    let config = TestConfig::udp_server(udp).interface_named("udp_rx").region("m", 8192, 2048);
    (gateway_on(tag, &config.rx_queue(rx(0, "m").batch(32).timeout_us(1000)).yaml(), endpoint, secret, more), udp)
}

/// A gateway on `config` whose captures may go to `endpoint` with `secret`.
fn gateway_on(tag: &str, config: &str, endpoint: &str, secret: &str, more: &[&str]) -> Gateway {
    // SAFETY: each test is a process of its own (nextest), and no thread
    // reads the environment while it is set; the gateway inherits it.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", secret);
    }
    let mut args = vec!["--capture-s3-endpoint", endpoint, "--capture-s3-path-style", "--capture-s3-part-mb", "5"];
    args.extend_from_slice(more);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    Gateway::run_with(GATEWAY, scratch_dir(&format!("s3-{tag}")), config, &args)
}

/// Sends `count` datagrams of `size` bytes at `rate` per second, each
/// beginning with its sequence number.
fn send(udp: u16, count: u64, size: usize, rate: u64) {
    let out = Command::new(GATEWAY)
        .args(["gen", "--dest", &format!("127.0.0.1:{udp}"), "--rate", &rate.to_string()])
        .args(["--count", &count.to_string(), "--payload-size", &size.to_string()])
        .args(["--src-port", &free_udp_port().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "gen failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn start(gw: &Gateway, body: &str) -> Value {
    let (status, info) = gw.json("POST", "/api/v1/captures", body);
    assert_eq!(status, 201, "{info}");
    info
}

fn capture(gw: &Gateway, id: &Value) -> Value {
    gw.json("GET", &format!("/api/v1/captures/{id}"), "").1
}

/// Packets in a pcap file, by capinfos, which also refuses a torn one.
fn pcap_packets(file: &Path) -> u64 {
    let out = Command::new("capinfos").args(["-M", "-T", "-c", "-r"]).arg(file).output().unwrap();
    assert!(out.status.success(), "capinfos {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().rsplit('\t').next().unwrap().parse().unwrap_or_else(|_| panic!("capinfos said {text}"))
}

fn urls(info: &Value) -> Vec<String> {
    info["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect()
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_pcap_capture_streams_into_one_object_that_reads_whole_and_downloads_alike() {
    let endpoint = endpoint();
    let bucket = bucket(&endpoint, "pcap");
    let (gw, udp) = gateway("pcap", &endpoint, SECRET_KEY, &[]);
    let body = format!(
        r#"{{"format": "pcap", "interface": "udp_rx", "name": "live", "max_packets": 3000, "destination": "s3://{bucket}/runs/day1/"}}"#
    );
    let id = start(&gw, &body)["id"].clone();
    send(udp, 3000, 200, 50_000);
    let info = wait_for_capture_end(|| capture(&gw, &id));
    assert_eq!(info["state"], "finished", "{info}");
    assert_eq!(info["packets"], 3000, "{info}");
    assert_eq!(info["destination"], format!("s3://{bucket}/runs/day1/"));
    let url = format!("s3://{bucket}/runs/day1/live.pcap");
    assert_eq!(urls(&info), std::slice::from_ref(&url));
    let bytes = object(&endpoint, &url);
    assert_eq!(bytes.len() as u64, info["bytes"].as_u64().unwrap() + 24, "the object is the whole pcap file");
    assert_eq!(info["uploaded_bytes"].as_u64(), Some(bytes.len() as u64), "{info}");
    let path = gw.dir.join("object.pcap");
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(pcap_packets(&path), 3000);
    let rows = Command::new("tshark").arg("-r").arg(&path).args(["-T", "fields", "-e", "data.data"]).output().unwrap();
    let rows = String::from_utf8(rows.stdout).unwrap();
    for (seq, row) in rows.lines().enumerate() {
        assert!(row.starts_with(&format!("{seq:08x}")), "packet {seq} carries its sequence number: {}", &row[..8]);
    }
    assert_eq!(rows.lines().count(), 3000);
    let (status, downloaded) = common::http(gw.admin, "GET", &format!("/api/v1/captures/{id}/download"), &[], "");
    assert_eq!(status, 200);
    assert!(downloaded == bytes, "the download is the object, byte for byte");
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_raw_capture_streams_its_records_back_to_back_into_rotated_objects() {
    let endpoint = endpoint();
    let bucket = bucket(&endpoint, "raw");
    let (gw, udp) = gateway("raw", &endpoint, SECRET_KEY, &[]);
    // Records of 342 bytes in objects of at least 8 KiB: 24 records fill one.
    let body = format!(
        r#"{{"format": "raw", "interface": "udp_rx", "name": "r", "max_packets": 60, "rotate_bytes": 8192, "destination": "s3://{bucket}"}}"#
    );
    let id = start(&gw, &body)["id"].clone();
    send(udp, 60, 300, 2000);
    let info = wait_for_capture_end(|| capture(&gw, &id));
    assert_eq!((info["state"].as_str(), info["packets"].as_u64()), (Some("finished"), Some(60)), "{info}");
    assert_eq!(info["bytes"].as_u64(), Some(60 * 342));
    let urls = urls(&info);
    assert_eq!(urls.len(), 3, "24 + 24 + 12 records: {urls:?}");
    let mut stream = Vec::new();
    for (index, url) in urls.iter().enumerate() {
        assert_eq!(url, &format!("s3://{bucket}/r_{:04}.raw", index + 1));
        stream.extend(object(&endpoint, url));
    }
    assert_eq!(stream.len(), 60 * 342);
    for (seq, record) in stream.chunks(342).enumerate() {
        // A datagram as a capture frames it: Ethernet, IPv4 and UDP headers, then the payload.
        assert_eq!(&record[42..46], (seq as u32).to_be_bytes(), "record {seq} carries its sequence number, in order");
    }
    assert_eq!(info["uploaded_bytes"].as_u64(), Some(60 * 342));
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn rotated_objects_each_read_whole_and_a_used_name_is_refused() {
    let endpoint = endpoint();
    let bucket = bucket(&endpoint, "rotate");
    let (gw, udp) = gateway("rotate", &endpoint, SECRET_KEY, &[]);
    let body = format!(
        r#"{{"format": "pcap", "interface": "udp_rx", "name": "rot", "max_packets": 1000, "rotate_bytes": 65536, "destination": "s3://{bucket}/r"}}"#
    );
    let id = start(&gw, &body)["id"].clone();
    send(udp, 1000, 1000, 20_000);
    let info = wait_for_capture_end(|| capture(&gw, &id));
    assert_eq!((info["state"].as_str(), info["packets"].as_u64()), (Some("finished"), Some(1000)), "{info}");
    let urls = urls(&info);
    assert!(urls.len() >= 15, "1000 records of over 1 KB in objects of 64 KiB: {urls:?}");
    let mut packets = 0;
    for (index, url) in urls.iter().enumerate() {
        assert_eq!(url, &format!("s3://{bucket}/r/rot_{:04}.pcap", index + 1));
        let path = gw.dir.join(format!("rot_{index}.pcap"));
        std::fs::write(&path, object(&endpoint, url)).unwrap();
        packets += pcap_packets(&path);
    }
    assert_eq!(packets, 1000, "every record in exactly one object");
    let (status, refused) = gw.json("POST", "/api/v1/captures", &body);
    assert_eq!((status, refused["field"].as_str()), (409, Some("name")), "{refused}");
    assert!(refused["message"].as_str().unwrap().contains(&format!("s3://{bucket}/r/rot_")), "{refused}");
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn wrong_credentials_a_missing_bucket_or_no_capture_memory_refuse_the_capture_by_reason() {
    let endpoint = endpoint();
    let bucket = bucket(&endpoint, "refused");
    let (gw, _) = gateway("wrong-secret", &endpoint, "not-the-secret", &["--capture-s3-retry-s", "3"]);
    let body = format!(r#"{{"format": "pcap", "interface": "udp_rx", "name": "a", "destination": "s3://{bucket}"}}"#);
    let (status, refused) = gw.json("POST", "/api/v1/captures", &body);
    assert_eq!((status, refused["field"].as_str()), (502, Some("destination")), "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("SignatureDoesNotMatch"), "{refused}");
    drop(gw);
    let (gw, _) = gateway("no-bucket", &endpoint, SECRET_KEY, &["--capture-s3-retry-s", "3"]);
    let body = r#"{"format": "pcap", "interface": "udp_rx", "name": "a", "destination": "s3://no-such-bucket-here"}"#;
    let (status, refused) = gw.json("POST", "/api/v1/captures", body);
    assert_eq!((status, refused["field"].as_str()), (502, Some("destination")), "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("NoSuchBucket"), "{refused}");
    assert_eq!(gw.json("GET", "/api/v1/captures", "").1, serde_json::json!([]), "nothing started");
    drop(gw);
    // Five parts of 5 MiB do not fit in 16 MiB of capture memory.
    let (gw, _) = gateway("no-memory", &endpoint, SECRET_KEY, &["--capture-memory-mb", "16"]);
    let body = format!(r#"{{"format": "pcap", "interface": "udp_rx", "name": "a", "destination": "s3://{bucket}"}}"#);
    let (status, refused) = gw.json("POST", "/api/v1/captures", &body);
    assert_eq!(status, 507, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("--capture-memory-mb"), "{refused}");
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_reorder_plans_aggregates_land_one_object_each_with_the_missing_slots_beside_an_incomplete_one() {
    const SLOTS: usize = 32;
    const PAYLOAD: usize = 200;
    let endpoint = endpoint();
    let bucket = bucket(&endpoint, "aggregates");
    let (udp, source) = (free_udp_port(), free_udp_port());
    let config = common::by_batch_reorder(udp, source, SLOTS, PAYLOAD).yaml();
    let gw = gateway_on("aggregates", &config, &endpoint, SECRET_KEY, &[]);
    let body = format!(
        r#"{{"format": "raw", "interface": "udp_rx", "name": "agg", "reorder": "by_batch", "max_packets": 3, "destination": "s3://{bucket}/plans"}}"#
    );
    let id = start(&gw, &body)["id"].clone();
    // Two whole batches, then one without slot 5, which the plan's timeout emits.
    let sender = std::net::UdpSocket::bind(("127.0.0.1", source)).unwrap();
    for seq in (0..3 * SLOTS).filter(|&seq| seq != 2 * SLOTS + 5) {
        let mut payload = (seq as u32).to_be_bytes().to_vec();
        payload.resize(PAYLOAD, 0xAB);
        sender.send_to(&payload, ("127.0.0.1", udp)).unwrap();
        std::thread::sleep(Duration::from_micros(50));
    }
    let info = wait_for_capture_end(|| capture(&gw, &id));
    assert_eq!((info["state"].as_str(), info["packets"].as_u64()), (Some("finished"), Some(3)), "{info}");
    let urls = urls(&info);
    let expected: Vec<String> = (0..3).map(|batch| format!("s3://{bucket}/plans/agg_{batch}")).collect();
    assert_eq!(urls, expected, "{info}");
    for (batch, url) in urls.iter().enumerate() {
        let bytes = object(&endpoint, url);
        assert_eq!(bytes.len(), SLOTS * PAYLOAD, "{url}");
        for (slot, payload) in bytes.chunks(PAYLOAD).enumerate() {
            let seq = batch * SLOTS + slot;
            let want: Vec<u8> = if seq == 2 * SLOTS + 5 { vec![0; 4] } else { (seq as u32).to_be_bytes().to_vec() };
            assert_eq!(payload[..4], want[..], "{url} slot {slot}");
        }
    }
    let sidecar = format!("s3://{bucket}/plans/agg_2.missing.json");
    assert_eq!(info["missing_slot_files"], serde_json::json!([sidecar]), "{info}");
    let missing: Value = serde_json::from_slice(&object(&endpoint, &sidecar)).unwrap();
    assert_eq!(missing, serde_json::json!({"batch_id": 2, "slots": SLOTS, "missing_slots": [5]}));
}

/// A server of the test's own (tests/s3/server.sh), stopped and its data
/// removed however the test ends.
struct OwnServer<'d>(&'d Path);

impl Drop for OwnServer<'_> {
    fn drop(&mut self) {
        // No assertion here: it may run while a failed assertion unwinds.
        let _ = Command::new(SERVER_SH).arg("stop").arg(self.0).output();
    }
}

const SERVER_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/s3/server.sh");

/// tests/s3/server.sh, for a server of this test's own.
fn server(verb: &str, dir: &Path) -> String {
    let out = Command::new(SERVER_SH).arg(verb).arg(dir).output().unwrap();
    assert!(out.status.success(), "server.sh {verb}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_store_that_goes_away_fails_the_capture_by_its_deadline_and_every_completed_object_stays_whole() {
    let _ = endpoint(); // Only where the suite's server runs: this one is built alike.
    let dir = scratch_dir("s3-away");
    let data = dir.join("s3");
    let endpoint = server("start", &data);
    let _server = OwnServer(&data);
    let bucket = bucket(&endpoint, "away");
    let (gw, udp) = gateway("away", &endpoint, SECRET_KEY, &["--capture-s3-retry-s", "3"]);
    let body = format!(
        r#"{{"format": "pcap", "interface": "udp_rx", "name": "cut", "rotate_bytes": 131072, "destination": "s3://{bucket}/c"}}"#
    );
    let id = start(&gw, &body)["id"].clone();
    let sender = std::thread::spawn(move || send(udp, 20_000, 1000, 4000));
    let deadline = Instant::now() + Duration::from_secs(30);
    while urls(&capture(&gw, &id)).len() < 3 {
        assert!(Instant::now() < deadline, "no three objects completed in 30 s: {}", capture(&gw, &id));
        std::thread::sleep(Duration::from_millis(100));
    }
    server("pause", &data);
    let paused = Instant::now();
    let info = wait_for_capture_end(|| capture(&gw, &id));
    let took = paused.elapsed();
    assert_eq!(info["state"], "failed", "{info}");
    assert!(info["reason"].as_str().unwrap().contains(&format!("s3://{bucket}/c/cut_")), "{info}");
    assert!(took < Duration::from_secs(15), "ended {took:?} after the store went away, past its 3 s deadline");
    sender.join().unwrap();
    server("resume", &data);
    let urls = urls(&info);
    let mut packets = 0;
    for (index, url) in urls.iter().enumerate() {
        let path = gw.dir.join(format!("cut_{index}.pcap"));
        std::fs::write(&path, object(&endpoint, url)).unwrap();
        packets += pcap_packets(&path);
    }
    assert!(urls.len() >= 3, "{info}");
    assert_eq!(Some(packets), info["packets"].as_u64(), "every counted packet is in a completed object: {info}");
    let unlisted = format!("s3://{bucket}/c/cut_{:04}.pcap", urls.len() + 1);
    let (code, _) = curl(&endpoint, "GET", unlisted.strip_prefix("s3://").unwrap());
    assert_eq!(code, 404, "the object open when the store went away was never completed");
}

#[test]
fn destinations_other_than_s3_or_with_files_only_options_are_refused_by_field() {
    let (gw, _) = gateway("refusals", "http://127.0.0.1:9", SECRET_KEY, &[]);
    let refused = |body: &str| {
        let (status, answer) = gw.json("POST", "/api/v1/captures", body);
        assert_eq!(status, 400, "{body}: {answer}");
        (answer["field"].as_str().unwrap().to_owned(), answer["message"].as_str().unwrap().to_owned())
    };
    let (field, error) = refused(r#"{"format":"pcap","interface":"udp_rx","name":"a","destination":"gs://b/p"}"#);
    assert_eq!(field, "destination");
    assert!(error.contains("s3://<bucket>"), "{error}");
    let (field, error) =
        refused(r#"{"format":"pcap","interface":"udp_rx","name":"a","destination":"s3://Bad_Bucket"}"#);
    assert_eq!(field, "destination");
    assert!(error.contains("no S3 bucket name"), "{error}");
    let (field, _) = refused(r#"{"format":"pcap","interface":"udp_rx","name":"a","destination":"s3://bkt/a/../b"}"#);
    assert_eq!(field, "destination");
    let (field, error) = refused(
        r#"{"format":"pcap","interface":"udp_rx","name":"a","rotate_bytes":9,"rotate_files":2,"destination":"s3://bkt"}"#,
    );
    assert_eq!(field, "rotate_files");
    assert!(error.contains("lifecycle"), "{error}");
    let (field, _) = refused(r#"{"format":"gds","interface":"udp_rx","name":"a","destination":"s3://bkt"}"#);
    assert_eq!(field, "destination");
}
