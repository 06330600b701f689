//! End to end between two network namespaces over a veth pair: the
//! generator in one, the gateway in the other, real kernel networking between.
//!
//! Needs root (network namespaces); `tests/run.sh` runs these, a plain
//! `cargo nextest run` lists them as skipped.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use daqiri_config::model::{FlowMatch, PortMatch};
use daqiri_config::testing::{TestConfig, rx};
use serde_json::Value;

mod common;

use common::GATEWAY;

/// Two namespaces joined by a veth pair: `tx` at 10.x.0.1, `rx` at 10.x.0.2.
struct VethPair {
    tx: String,
    rx: String,
    rx_ip: String,
    dir: PathBuf,
}

impl VethPair {
    fn new(tag: &str) -> Self {
        let id = std::process::id() % 200 + 20;
        let (tx, rx) = (format!("dq{tag}{id}a"), format!("dq{tag}{id}b"));
        let subnet = format!("10.{id}.{}", if tag == "u" { 1 } else { 2 });
        let pair = VethPair {
            tx: tx.clone(),
            rx: rx.clone(),
            rx_ip: format!("{subnet}.2"),
            dir: std::env::temp_dir().join(format!("daqiri-{tag}{id}")),
        };
        pair.teardown();
        std::fs::create_dir_all(&pair.dir).unwrap();
        for args in [
            vec!["netns", "add", &tx],
            vec!["netns", "add", &rx],
            vec!["link", "add", "veth0", "netns", &tx, "type", "veth", "peer", "name", "veth1", "netns", &rx],
        ] {
            ip(&args);
        }
        for (ns, addr) in [(&tx, format!("{subnet}.1/24")), (&rx, format!("{subnet}.2/24"))] {
            let dev = if ns == &tx { "veth0" } else { "veth1" };
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    fn teardown(&self) {
        for ns in [&self.tx, &self.rx] {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }

    fn gateway(&self, config: &str, extra: &[&str]) -> (Child, PathBuf) {
        let config_path = self.dir.join("gateway.yaml");
        std::fs::write(&config_path, config).unwrap();
        let summary = self.dir.join("gateway-summary.json");
        let _ = std::fs::remove_file(&summary);
        let child = Command::new("ip")
            .args(["netns", "exec", &self.rx, GATEWAY, "run", "--config"])
            .arg(&config_path)
            .args(["--exit-when-idle", "2", "--summary-json"])
            .arg(&summary)
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("start the gateway");
        // Wait until the gateway has bound its socket inside the namespace.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !listening(&self.rx) {
            assert!(Instant::now() < deadline, "the gateway did not bind within 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        (child, summary)
    }

    fn generate(&self, args: &[&str]) -> Value {
        let summary = self.dir.join("gen-summary.json");
        let out: Output = Command::new("ip")
            .args(["netns", "exec", &self.tx, GATEWAY, "gen", "--summary-json"])
            .arg(&summary)
            .args(args)
            .output()
            .expect("run the generator");
        assert!(out.status.success(), "gen failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap()
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        self.teardown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("iproute2 is installed");
    assert!(status.success(), "ip {} failed", args.join(" "));
}

fn listening(ns: &str) -> bool {
    let out = Command::new("ip").args(["netns", "exec", ns, "ss", "-Hlun"]).output().unwrap();
    let tcp = Command::new("ip").args(["netns", "exec", ns, "ss", "-Hltn"]).output().unwrap();
    !out.stdout.is_empty() || !tcp.stdout.is_empty()
}

fn finish(mut child: Child, summary: &PathBuf) -> Value {
    let status = child.wait().unwrap();
    assert!(status.success(), "gateway exited with {status}");
    serde_json::from_slice(&std::fs::read(summary).unwrap()).unwrap()
}

#[test]
#[ignore = "needs root for network namespaces; run by tests/run.sh"]
fn udp_million_datagrams_arrive_complete_in_order_and_steered() {
    let veth = VethPair::new("u");
    let config = TestConfig::udp_server_on(format!("{}:5000", veth.rx_ip).parse().unwrap())
        .interface_named("udp_rx")
        .region("rx", 65536, 2048)
        .rx_queue(rx(0, "rx").core(1).batch(64).timeout_us(500))
        .rx_queue(rx(1, "rx").core(1).batch(64).timeout_us(500))
        .isolated()
        .udp_src_flow(10, 0, 10000)
        .flow(11, &[1], FlowMatch { udp_src: Some(PortMatch { first: 10001, last: 10009 }), ..FlowMatch::default() })
        .yaml();
    let (gateway, summary) = veth.gateway(&config, &["--seq-offset", "0"]);
    let dest = format!("{}:5000", veth.rx_ip);
    let sent = veth.generate(&[
        "--dest",
        &dest,
        "--rate",
        "200000",
        "--count",
        "1000000",
        "--payload-size",
        "64",
        "--flows",
        "2",
        "--src-port",
        "10000",
    ]);
    assert_eq!(sent["sent"], 1_000_000);
    let summary = finish(gateway, &summary);

    let port = &summary["ports"][0];
    assert_eq!(port["port_drops"], serde_json::json!({}), "no drops before a queue: {port}");
    for (queue, flow) in [(0, 10), (1, 11)] {
        let q = &port["rx_queues"][queue];
        assert_eq!(q["packets"], 500_000, "queue {queue}: {q}");
        assert_eq!(q["drops"], serde_json::json!({}), "queue {queue} dropped: {q}");
        let seq = summary["sequences"].as_array().unwrap().iter().find(|s| s["queue_id"] == queue).unwrap();
        assert_eq!(seq["flow_id"], flow, "queue {queue} carries flow {flow}: {seq}");
        assert_eq!(seq["stats"]["received"], 500_000);
        assert_eq!(seq["in_order_without_loss"], true, "{seq}");
    }
    assert_eq!(summary["sequences"].as_array().unwrap().len(), 2, "no packet of one flow on the other queue");
}

#[test]
#[ignore = "needs root for network namespaces; run by tests/run.sh"]
fn tcp_gib_stream_hashes_equal_across_namespaces() {
    let veth = VethPair::new("t");
    let config = TestConfig::tcp_server_on(format!("{}:6001", veth.rx_ip).parse().unwrap())
        .interface_named("tcp_rx")
        .region("rx", 1024, 65536)
        .rx_queue(rx(0, "rx").core(1).batch(32).timeout_us(1000))
        .yaml();
    let (gateway, summary) = veth.gateway(&config, &["--digest"]);
    let dest = format!("{}:6001", veth.rx_ip);
    let sent = veth.generate(&[
        "--proto",
        "tcp",
        "--dest",
        &dest,
        "--rate",
        "0",
        "--count",
        "16384",
        "--payload-size",
        "65536",
    ]);
    assert_eq!(sent["payload_bytes"], 1u64 << 30);
    let summary = finish(gateway, &summary);
    assert_eq!(summary["consumed"]["bytes"], 1u64 << 30, "{summary}");
    assert_eq!(summary["digests"][0]["sha256"], sent["sha256"], "received stream differs from the sent one");
}
