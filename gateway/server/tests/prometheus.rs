//! A real Prometheus scrapes a running gateway while the generator sends
//! traffic; every query of every dashboard in `dashboards/` must return data
//! through Prometheus' HTTP API. `tests/setup.sh` installs prometheus.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daqiri_config::testing::{TestConfig, rx, tx};
use serde_json::Value;

use common::{GATEWAY, free_tcp_port as free_port, http, scratch_dir, wait_for_port};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(port: u16, path: &str) -> String {
    String::from_utf8(http(port, "GET", path, &[], "").1).unwrap()
}

fn prometheus_is_ready(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && http(port, "GET", "/-/ready", &[], "").0 == 200
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every PromQL expression in a dashboard, with Grafana's variables filled in.
fn dashboard_queries(path: &Path) -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap().replace("$__rate_interval", "10s").replace("$interface", ".*");
            queries.push((panel["title"].as_str().unwrap().to_owned(), expr));
        }
    }
    queries
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_prometheus() {
    let dir = scratch_dir("prometheus");
    let (udp, admin, prom) = (free_port(), free_port(), free_port());
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        TestConfig::udp_server(udp)
            .interface_named("udp_rx")
            .region("mem", 8192, 2048)
            .region("batches", 64, 65536)
            .rx_queue(rx(0, "mem").batch(32).timeout_us(1000))
            .rx_queue(rx(1, "mem").batch(32).timeout_us(1000))
            .isolated()
            .udp_src_flow(1, 0, 20000)
            .udp_src_flow(2, 1, 20001)
            .cpu_reorder("plan_b", &[2], "batches", 0, 32)
            .tx_queue(tx(0, "mem").batch(32))
            .yaml(),
    )
    .unwrap();
    let _gateway = Killed(
        Command::new(GATEWAY)
            .args([
                "run",
                "--admin-addr",
                &format!("127.0.0.1:{admin}"),
                "--capture-free-space-floor-mb",
                "1",
                "--config",
            ])
            .arg(&config)
            .arg("--capture-dir")
            .arg(dir.join("captures"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let scrape = dir.join("prometheus.yml");
    std::fs::write(
        &scrape,
        format!("global: {{ scrape_interval: 1s }}\nscrape_configs:\n- job_name: daqiri\n  static_configs: [{{ targets: [\"127.0.0.1:{admin}\"] }}]\n"),
    )
    .unwrap();
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", scrape.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus is needed (tests/setup.sh installs it)"),
    );
    // Two matched flows, and one unmatched sender so the drop panel has data.
    let dest = format!("127.0.0.1:{udp}");
    let senders: Vec<Killed> = [("20000", "2"), ("20002", "1")]
        .iter()
        .map(|(src, flows)| {
            Killed(
                Command::new(GATEWAY)
                    .args([
                        "gen",
                        "--dest",
                        &dest,
                        "--rate",
                        "20000",
                        "--duration",
                        "25",
                        "--src-port",
                        src,
                        "--flows",
                        flows,
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();

    // A running capture, so the capture panel has series.
    wait_for_port(admin);
    let capture = r#"{"format": "pcap", "interface": "udp_rx", "name": "dashboard"}"#;
    let (status, answer) = http(admin, "POST", "/api/v1/captures", &[("Content-Type", "application/json")], capture);
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));

    let dashboards: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../dashboards"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
    assert!(!dashboards.is_empty());
    let queries: Vec<(String, String)> = dashboards.iter().flat_map(|d| dashboard_queries(d)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Prometheus opens its port late on a loaded machine; its own readiness
    // endpoint says when queries can be answered.
    while !prometheus_is_ready(prom) {
        assert!(Instant::now() < deadline, "prometheus was not ready within 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut empty = queries.clone();
    while !empty.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(2));
        empty.retain(|(_, expr)| {
            let body = http_get(prom, &format!("/api/v1/query?query={}", percent_encode(expr)));
            let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            !(answer["status"] == "success" && answer["data"]["result"].as_array().is_some_and(|r| !r.is_empty()))
        });
    }
    drop(senders);
    assert!(empty.is_empty(), "dashboard queries without data after 60 s: {empty:#?}");
}
