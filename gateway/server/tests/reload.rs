//! Reloads during traffic: a flow change applied by SIGHUP loses nothing, a
//! queue change restarts the engine and loses only its window, an
//! invalid file is refused and changes nothing.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{GATEWAY, free_tcp_port, free_udp_port, http, scratch_dir, wait_for_port};

fn config(udp: u16, flow_queue: u16) -> String {
    gateway_config(udp, flow_queue).yaml()
}

/// Flow 5 from ports 30000-30009 to `flow_queue`.
fn gateway_config(udp: u16, flow_queue: u16) -> daqiri_config::testing::TestConfig {
    common::two_queues_one_flow(udp, (30000, 30009), flow_queue)
}

/// Starts `run` on `file`, checking sequence numbers, until idle; waits for its admin API.
fn start_checking_sequences(admin: u16, file: &Path, summary: &Path) -> Child {
    let gateway = Command::new(GATEWAY)
        .args(["run", "--seq-offset", "0", "--exit-when-idle", "1.5", "--admin-addr", &format!("127.0.0.1:{admin}")])
        .arg("--config")
        .arg(file)
        .arg("--summary-json")
        .arg(summary)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(admin);
    gateway
}

/// Waits until queue 0 has received 20,000 packets.
fn wait_for_traffic(admin: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats: Value = serde_json::from_slice(&http(admin, "GET", "/api/v1/stats", &[], "").1).unwrap();
        if stats["interfaces"][0]["rx_queues"][0]["packets"].as_u64().unwrap_or(0) >= 20_000 {
            return;
        }
        assert!(Instant::now() < deadline, "traffic did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_flow_reload_during_traffic_loses_nothing_and_invalid_files_change_nothing() {
    let dir = scratch_dir("reload");
    let (udp, admin) = (free_udp_port(), free_tcp_port());
    let file = dir.join("gateway.yaml");
    std::fs::write(&file, config(udp, 0)).unwrap();
    let summary = dir.join("summary.json");
    let mut gateway = start_checking_sequences(admin, &file, &summary);
    let sender = Command::new(GATEWAY)
        .args([
            "gen",
            "--dest",
            &format!("127.0.0.1:{udp}"),
            "--rate",
            "50000",
            "--count",
            "150000",
            "--src-port",
            "30000",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let hup = |pid: u32| assert!(Command::new("kill").args(["-HUP", &pid.to_string()]).status().unwrap().success());
    let admin_json = |path: &str| -> Value { serde_json::from_slice(&http(admin, "GET", path, &[], "").1).unwrap() };
    // Reload only once traffic is flowing, and wait for each reload to land, so
    // the test does not depend on how fast a loaded machine starts the sender.
    wait_for_traffic(admin);
    // The port's driver reports the socket below the queues: the sender, and the kernel buffer.
    let link = &admin_json("/api/v1/stats")["interfaces"][0]["link"];
    assert!(link["peer"].as_str().is_some_and(|p| p.starts_with("127.0.0.1:")), "{link}");
    assert!(link["kernel_rx_buffer_bytes"].as_u64().is_some_and(|b| b > 0), "{link}");
    let deadline = Instant::now() + Duration::from_secs(20);
    std::fs::write(&file, "daqiri: { cfg: { version: 9 } }\n").unwrap();
    hup(gateway.id()); // invalid: refused, nothing changes
    // Past the file watcher's next look (once a second), which sees the same edit.
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(admin_json("/api/v1/status")["config"]["generation"], 1, "an invalid file changes nothing");
    let metrics = String::from_utf8(http(admin, "GET", "/metrics", &[], "").1).unwrap();
    let failures = metrics.lines().find(|l| l.starts_with("daqiri_config_reload_failures")).unwrap_or_default();
    assert!(failures.ends_with(" 1"), "one edit, one refusal, though SIGHUP and the watcher both saw it: {failures}");
    std::fs::write(&file, config(udp, 1)).unwrap();
    hup(gateway.id()); // flow moves to queue 1 mid-stream
    while admin_json("/api/v1/status")["config"]["generation"] != 2 {
        assert!(Instant::now() < deadline, "the reload did not land");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sender.wait_with_output().unwrap().status.success());
    assert!(gateway.wait().unwrap().success());
    let summary: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();

    let queues = &summary["ports"][0]["rx_queues"];
    let (q0, q1) = (queues[0]["packets"].as_u64().unwrap(), queues[1]["packets"].as_u64().unwrap());
    assert_eq!(q0 + q1, 150_000, "every datagram delivered across the reload: {summary}");
    assert!(q0 > 0 && q1 > 0, "the flow moved from queue 0 to queue 1 mid-stream: {q0} / {q1}");
    assert_eq!(summary["ports"][0]["port_drops"], serde_json::json!({}));
    for seq in summary["sequences"].as_array().unwrap() {
        assert_eq!(seq["flow_id"], 5);
        assert_eq!(seq["stats"]["gaps"], 0, "{seq}");
    }
}

#[test]
fn a_configmap_style_symlink_swap_is_picked_up_without_a_signal() {
    let dir = scratch_dir("reload-watch");
    std::fs::create_dir_all(dir.join("v1")).unwrap();
    std::fs::create_dir_all(dir.join("v2")).unwrap();
    let (udp, admin) = (free_udp_port(), free_tcp_port());
    std::fs::write(dir.join("v1/gateway.yaml"), config(udp, 0)).unwrap();
    std::fs::write(dir.join("v2/gateway.yaml"), config(udp, 1)).unwrap();
    // Kubernetes layout: gateway.yaml -> ..data/gateway.yaml, ..data -> v1 (swapped atomically).
    std::os::unix::fs::symlink("v1", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/gateway.yaml", dir.join("gateway.yaml")).unwrap();
    let mut gateway = Command::new(GATEWAY)
        .args(["run", "--admin-addr", &format!("127.0.0.1:{admin}"), "--config"])
        .arg(dir.join("gateway.yaml"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let generation = || {
        let body: Value = serde_json::from_slice(&http(admin, "GET", "/api/v1/status", &[], "").1).unwrap();
        body["config"]["generation"].as_u64()
    };
    wait_for_port(admin);
    assert_eq!(generation(), Some(1));
    std::os::unix::fs::symlink("v2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    // The file is looked at once a second; the rest is room for a machine
    // under load (tests/under_load.sh: four busy loops on its cores).
    let deadline = Instant::now() + Duration::from_secs(30);
    while generation() != Some(2) {
        assert!(Instant::now() < deadline, "the symlink swap was not picked up");
        std::thread::sleep(Duration::from_millis(100));
    }
    gateway.kill().unwrap();
    gateway.wait().unwrap();
}

#[test]
fn a_queue_change_restarts_the_engine_during_traffic_and_loses_only_its_window() {
    let (udp, admin) = (free_udp_port(), free_tcp_port());
    let dir = scratch_dir("reload-restart");
    let (file, summary) = (dir.join("gateway.yaml"), dir.join("summary.json"));
    std::fs::write(&file, config(udp, 0)).unwrap();
    let mut gateway = start_checking_sequences(admin, &file, &summary);
    // Source port 30007: inside the flow's range, apart from the other test's sender.
    let (rate, count) = (50_000u64, 150_000u64);
    let sender = Command::new(GATEWAY)
        .args(["gen", "--dest", &format!("127.0.0.1:{udp}"), "--src-port", "30007"])
        .args(["--rate", &rate.to_string(), "--count", &count.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let admin_json = |path: &str| -> Value { serde_json::from_slice(&http(admin, "GET", path, &[], "").1).unwrap() };
    wait_for_traffic(admin);
    let mut bigger_batches = gateway_config(udp, 0);
    for queue in &mut bigger_batches.model_mut().interfaces[0].rx.as_mut().unwrap().queues {
        queue.batch_size = Some(64);
    }
    let bigger_batches = bigger_batches.yaml();
    let (status, body) = http(admin, "PUT", "/api/v1/config", &[], &bigger_batches);
    let applied: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, applied["change"].as_str()), (200, Some("restart")), "{applied}");
    let window_ms = applied["restart_ms"].as_f64().unwrap();
    assert_eq!(admin_json("/api/v1/status")["engine"], "running");
    assert!(sender.wait_with_output().unwrap().status.success(), "the sender survives the window");
    assert!(gateway.wait().unwrap().success());
    let summary: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();

    let consumed = summary["consumed"]["packets"].as_u64().unwrap();
    let lost = count - consumed;
    eprintln!("restart window {window_ms:.2} ms at {rate} pps: {consumed} of {count} consumed, {lost} lost");
    let seq = &summary["sequences"][0]["stats"];
    assert_eq!(summary["sequences"].as_array().unwrap().len(), 1, "one flow, one queue: {summary}");
    assert_eq!(
        (seq["late"].as_u64(), seq["gaps"].as_u64()),
        (Some(0), Some(lost)),
        "in order, every loss a gap: {seq}"
    );
    assert!(consumed > count / 2, "traffic resumed on the new engine: {summary}");
    // What can be lost: the window itself, plus what reached the old socket
    // after its receiver's last drain at stop (what it had queued by then is
    // delivered): a sliver, allowed a quarter second of traffic.
    let bound = (rate as f64 * (window_ms / 1e3 + 0.25)) as u64;
    assert!(lost <= bound, "{lost} lost in a {window_ms:.2} ms window (bound {bound})");
}

#[test]
fn wait_for_config_runs_while_the_file_exists_and_serves_the_api_without_it() {
    let dir = scratch_dir("reload-wait");
    let (udp, admin) = (free_udp_port(), free_tcp_port());
    let file = dir.join("node-1.yaml");
    let mut gateway = Command::new(GATEWAY)
        .args(["run", "--wait-for-config", "--admin-addr", &format!("127.0.0.1:{admin}"), "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(admin);
    let status = || -> Value { serde_json::from_slice(&http(admin, "GET", "/api/v1/status", &[], "").1).unwrap() };
    assert_eq!((status()["engine"].as_str(), status()["config"]["generation"].as_u64()), (Some("waiting"), Some(0)));
    // Waiting is what it was asked to do: ready (a DaemonSet's rollout finishes).
    let ready = http(admin, "GET", "/readyz", &[], "");
    assert_eq!((ready.0, String::from_utf8_lossy(&ready.1).contains("waiting")), (200, true));
    assert_eq!(http(admin, "GET", "/api/v1/stats", &[], "").0, 503);
    std::fs::write(&file, config(udp, 0)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // Running on generation 1: the engine starts before its generation is
    // recorded, so a status read between the two shows running on 0.
    let applied = |s: &Value| s["engine"] == "running" && s["config"]["generation"] == 1;
    while !applied(&status()) {
        assert!(Instant::now() < deadline, "the config file was not picked up: {}", status());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status()["interfaces"][0]["name"], "udp_rx");
    assert_eq!(http(admin, "GET", "/readyz", &[], "").0, 200);
    // The operator left no port on this node: its key, so the file, goes away.
    std::fs::remove_file(&file).unwrap();
    while status()["engine"] != "waiting" {
        assert!(Instant::now() < deadline + Duration::from_secs(5), "the engine did not stop: {}", status());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(http(admin, "GET", "/readyz", &[], "").0, 200);
    assert!(std::net::UdpSocket::bind(("127.0.0.1", udp)).is_ok(), "the stopped engine let go of its port");
    gateway.kill().unwrap();
    gateway.wait().unwrap();
}

/// A config this host has not the memory for is refused before the running
/// engine stops: the same engine keeps running, its counters intact.
#[test]
fn a_config_beyond_this_hosts_memory_is_refused_without_stopping_the_engine() {
    let dir = scratch_dir("reload-memory");
    let udp = free_udp_port();
    let gateway = common::Gateway::run(GATEWAY, dir, &config(udp, 0));
    let sent = Command::new(GATEWAY)
        .args(["gen", "--dest", &format!("127.0.0.1:{udp}"), "--rate", "20000", "--count", "2000"])
        .args(["--src-port", "30000"])
        .status()
        .unwrap();
    assert!(sent.success());
    let received = || gateway.json("GET", "/api/v1/stats", "").1["interfaces"][0]["rx_queues"][0]["packets"].clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while received() != 2000 {
        assert!(Instant::now() < deadline, "the gateway did not receive the 2,000 datagrams: {}", received());
        std::thread::sleep(Duration::from_millis(20));
    }
    // 512 GiB of host memory: within the config's bounds, beyond any machine the suite runs on.
    let mut huge = gateway_config(udp, 0);
    (huge.model_mut().memory_regions[0].num_bufs, huge.model_mut().memory_regions[0].buf_size) = (524288, 1048576);
    let huge = huge.yaml();
    let (status, body) = http(gateway.admin, "PUT", "/api/v1/config", &[("Content-Type", "application/yaml")], &huge);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 422, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("cannot start here") && message.contains("need 512.0 GiB"), "{message}");
    assert!(message.contains("the running config is unchanged"), "{message}");
    assert_eq!(received(), 2000, "the engine that received them still runs (a restart starts from 0)");
    assert_eq!(gateway.json("GET", "/api/v1/status", "").1["config"]["generation"], 1);
}
