//! A CPU reorder plan on a UDP socket, end to end: `gen` sends
//! sequence-numbered packets shuffled within each batch, the gateway
//! reorders them, a REST capture writes each aggregate as one raw file, and
//! the test reads the files back in order with their values.

mod common;

use common::{GATEWAY, Gateway, free_udp_port, scratch_dir, wait_for_capture_end};
use std::process::Command;

const PACKETS_PER_BATCH: usize = 64;
const BATCHES: usize = 40;
const PAYLOAD: usize = 200;

#[test]
fn shuffled_batches_reach_disk_reordered_one_file_per_batch() {
    let dir = scratch_dir("reorder");
    let (udp, source) = (free_udp_port(), free_udp_port());
    let config = common::by_batch_reorder(udp, source, PACKETS_PER_BATCH, PAYLOAD).yaml();
    let gw = Gateway::run(GATEWAY, dir, &config);

    // Requests the plan cannot serve name the field.
    let (status, error) = gw.json(
        "POST",
        "/api/v1/captures",
        r#"{"format": "raw", "interface": "udp_rx", "name": "x", "reorder": "nope"}"#,
    );
    assert_eq!(status, 400, "{error}");
    assert!(error.to_string().contains("by_batch"), "{error}");
    let (status, error) = gw.json(
        "POST",
        "/api/v1/captures",
        r#"{"format": "pcap", "interface": "udp_rx", "name": "x", "reorder": "by_batch"}"#,
    );
    assert_eq!(status, 400, "{error}");

    let (status, info) = gw.json(
        "POST",
        "/api/v1/captures",
        &format!(r#"{{"format": "raw", "interface": "udp_rx", "name": "agg", "reorder": "by_batch", "max_packets": {BATCHES}}}"#),
    );
    assert_eq!(status, 201, "{info}");
    let sent = Command::new(GATEWAY)
        .args(["gen", "--dest", &format!("127.0.0.1:{udp}"), "--rate", "50000"])
        .args(["--count", &(BATCHES * PACKETS_PER_BATCH).to_string(), "--payload-size", &PAYLOAD.to_string()])
        .args(["--src-port", &source.to_string(), "--shuffle-window", &PACKETS_PER_BATCH.to_string(), "--fill"])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));

    let id = info["id"].as_u64().unwrap();
    let info = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{id}"), "").1);
    assert_eq!((info["state"].as_str(), info["packets"].as_u64()), (Some("finished"), Some(BATCHES as u64)), "{info}");
    assert_eq!(info["reorder"], "by_batch");

    for batch in 0..BATCHES {
        let bytes = std::fs::read(gw.dir.join("out").join(format!("agg_{batch}"))).unwrap();
        assert_eq!(bytes.len(), PACKETS_PER_BATCH * PAYLOAD, "batch {batch}");
        for (slot, payload) in bytes.chunks(PAYLOAD).enumerate() {
            let seq = (batch * PACKETS_PER_BATCH + slot) as u32;
            assert_eq!(payload[..4], seq.to_be_bytes(), "batch {batch} slot {slot}");
            let pattern = payload[4..].iter().enumerate().all(|(j, &b)| b == seq.wrapping_add(j as u32 + 4) as u8);
            assert!(pattern, "batch {batch} slot {slot}: values differ from what gen wrote");
        }
    }
    let (_, stats) = gw.json("GET", "/api/v1/stats", "");
    let plan = &stats["interfaces"][0]["reorder"][0];
    assert_eq!(plan["batches_complete"], BATCHES, "{plan}");
    assert_eq!(plan["packets_placed"], BATCHES * PACKETS_PER_BATCH, "{plan}");
    for counter in ["packets_missing", "packets_late", "packets_duplicate", "packets_rejected", "batches_dropped"] {
        assert_eq!(plan[counter], 0, "{counter}: {plan}");
    }
    let (_, status) = gw.json("GET", "/api/v1/status", "");
    let listed = &status["interfaces"][0]["reorder"][0];
    assert_eq!((listed["name"].as_str(), listed["state"].as_str()), (Some("by_batch"), Some("active")), "{listed}");

    // One more batch without slot 5: its timeout emits it, zero-filled, and
    // the capture writes which slots were empty beside it.
    let (status, info) = gw.json(
        "POST",
        "/api/v1/captures",
        r#"{"format": "raw", "interface": "udp_rx", "name": "gap", "reorder": "by_batch", "max_packets": 1}"#,
    );
    assert_eq!(status, 201, "{info}");
    let sender = std::net::UdpSocket::bind(("127.0.0.1", source)).unwrap();
    for slot in (0..PACKETS_PER_BATCH).filter(|&s| s != 5) {
        let seq = (BATCHES * PACKETS_PER_BATCH + slot) as u32;
        let mut payload = seq.to_be_bytes().to_vec();
        payload.resize(PAYLOAD, 0xAB);
        sender.send_to(&payload, ("127.0.0.1", udp)).unwrap();
    }
    let id = info["id"].as_u64().unwrap();
    let info = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{id}"), "").1);
    assert_eq!(info["state"].as_str(), Some("finished"), "{info}");
    let file = gw.dir.join("out").join(format!("gap_{BATCHES}"));
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes[5 * PAYLOAD..][..PAYLOAD].iter().all(|&b| b == 0), "the empty slot is zero-filled");
    assert_eq!(bytes[6 * PAYLOAD..][..PAYLOAD][4..], [0xAB; PAYLOAD - 4]);
    let missing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{}.missing.json", file.display())).unwrap()).unwrap();
    assert_eq!(missing, serde_json::json!({"batch_id": BATCHES, "slots": PACKETS_PER_BATCH, "missing_slots": [5]}));
    // One file per record, the sidecar listed apart: the download is the record.
    let listed =
        |key: &str| info[key].as_array().map(|files| files.iter().filter_map(|f| f.as_str()).collect::<Vec<_>>());
    let record = file.display().to_string();
    assert_eq!(listed("files").unwrap_or_default().last(), Some(&record.as_str()), "{info}");
    assert!(!listed("files").unwrap_or_default().iter().any(|f| f.ends_with(".missing.json")), "{info}");
    assert_eq!(listed("missing_slot_files"), Some(vec![format!("{record}.missing.json").as_str()]), "{info}");
    let (status, downloaded) = common::http(gw.admin, "GET", &format!("/api/v1/captures/{id}/download"), &[], "");
    assert_eq!((status, downloaded), (200, bytes), "the newest record, not its sidecar");
    let (_, stats) = gw.json("GET", "/api/v1/stats", "");
    let plan = &stats["interfaces"][0]["reorder"][0];
    assert_eq!((plan["batches_timed_out"].as_u64(), plan["packets_missing"].as_u64()), (Some(1), Some(1)), "{plan}");
}
