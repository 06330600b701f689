//! The appliance end to end, the way its users run it: `helm install` of the
//! chart with the images built here, on real nodes (tests/k8s/nodes.sh: two
//! kubelets with containerd and runc, kube-scheduler, kube-proxy), the
//! operator and the gateway DaemonSet as pods, a `DaqiriPort` applied with
//! kubectl, datagrams from the host counted in every gateway's `/metrics`
//! through the Service, and an uninstall that leaves nothing behind.
//! `tests/run.sh` brings the nodes up and names their admin kubeconfig in
//! `DAQIRI_TEST_NODES_KUBECONFIG`; this needs root.

#[path = "support/tools.rs"]
mod tools;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use tools::tool;

const NAMESPACE: &str = "daqiri-e2e";
const RELEASE: &str = "daqiri-gateway";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn kubeconfig() -> String {
    std::env::var("DAQIRI_TEST_NODES_KUBECONFIG")
        .expect("DAQIRI_TEST_NODES_KUBECONFIG names the nodes' admin kubeconfig (tests/run.sh sets it)")
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// Runs kubectl or helm against the nodes; panics with its output on failure.
fn cli(program: &str, args: &[&str]) -> String {
    let output = tool(program).arg("--kubeconfig").arg(kubeconfig()).args(args).output().unwrap();
    assert!(output.status.success(), "{program} {}:\n{}", args.join(" "), text(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&cli("kubectl", &all)).unwrap()
}

/// Waits up to `limit` for `check` to give a value, saying what it waited for.
fn wait_for<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One HTTP GET, the whole answer's body.
fn http_get(address: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&address.parse().ok()?, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: gateway\r\n\r\n").as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?;
    (status == "200").then(|| body.to_owned())
}

/// `daqiri_rx_packets_total` of all queues, from one scrape.
fn received(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.starts_with("daqiri_rx_packets_total{") && l.contains("daqiri_queue_id=\"all\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

struct Installed;

impl Installed {
    fn install() -> Self {
        let _ =
            tool("helm").arg("--kubeconfig").arg(kubeconfig()).args(["uninstall", RELEASE, "-n", NAMESPACE]).output();
        let chart = root().join("charts/daqiri-gateway");
        let values = root().join("tests/k8s/e2e/values.yaml");
        cli(
            "helm",
            &[
                "install",
                RELEASE,
                chart.to_str().unwrap(),
                "-n",
                NAMESPACE,
                "--create-namespace",
                "-f",
                values.to_str().unwrap(),
            ],
        );
        Installed
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = tool("helm")
            .arg("--kubeconfig")
            .arg(kubeconfig())
            .args(["uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s"])
            .output();
    }
}

#[test]
#[ignore = "needs root and the nodes tests/k8s/nodes.sh starts; tests/run.sh runs it"]
fn helm_install_runs_the_appliance_on_real_nodes_and_counts_every_datagram_through_the_service() {
    let started = Instant::now();
    let installed = Installed::install();
    cli("kubectl", &["-n", NAMESPACE, "rollout", "status", "deploy/daqiri-gateway-operator", "--timeout", "180s"]);
    let operator_ready = started.elapsed();
    cli(
        "kubectl",
        &["-n", NAMESPACE, "apply", "-f", root().join("operator/samples/port-socket.yaml").to_str().unwrap()],
    );
    cli("kubectl", &["-n", NAMESPACE, "rollout", "status", "ds/daqiri-gateway-gateway", "--timeout", "240s"]);
    let gateways_ready = started.elapsed();
    eprintln!(
        "helm install to the operator Ready: {operator_ready:.1?}; to both gateways Ready with the port: {gateways_ready:.1?}"
    );

    // The port runs on both nodes, as its status says.
    let port = wait_for("the DaqiriPort Ready on both nodes", Duration::from_secs(60), || {
        let port = kubectl_json(&["-n", NAMESPACE, "get", "daqiriport", "udp-rx"]);
        let conditions = port["status"]["conditions"].as_array()?.clone();
        let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
        (ready["status"] == "True").then(|| ready["message"].as_str().unwrap_or_default().to_owned())
    });
    assert!(port.contains("node-a") && port.contains("node-b"), "{port}");

    // Datagrams from the host to each gateway pod, each counted by that
    // gateway, as scraped through the Service (which spreads scrapes over
    // both: every scrape is one gateway's count).
    let pods = kubectl_json(&["-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/component=gateway"]);
    let addresses: Vec<String> =
        pods["items"].as_array().unwrap().iter().map(|p| p["status"]["podIP"].as_str().unwrap().to_owned()).collect();
    assert_eq!(addresses.len(), 2, "a gateway per node: {addresses:?}");
    let service = kubectl_json(&["-n", NAMESPACE, "get", "svc", "daqiri-gateway-gateway"]);
    let service = format!("{}:9464", service["spec"]["clusterIP"].as_str().unwrap());
    let counts = [3_000u64, 5_000];
    for (address, count) in addresses.iter().zip(counts) {
        let sender = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..count {
            sender.send_to(&(i as u32).to_be_bytes().repeat(64), (address.as_str(), 4096)).unwrap();
            if i % 500 == 499 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    let mut last = std::collections::BTreeSet::new();
    let seen = wait_for("both gateways' counts through the Service", Duration::from_secs(60), || {
        last.clear();
        for _ in 0..20 {
            if let Some(count) = http_get(&service, "/metrics").as_deref().and_then(received) {
                last.insert(count);
            }
        }
        eprintln!("scraped through {service}: {last:?}");
        // A round of scrapes that saw both gateways, each with its whole count
        // (an earlier round may catch one still receiving).
        (last == counts.into_iter().collect()).then(|| last.clone())
    });
    assert_eq!(seen.len(), 2, "each gateway counted exactly what it was sent: {seen:?}");

    // The port goes first, while the operator that owns its finalizer runs.
    cli("kubectl", &["-n", NAMESPACE, "delete", "daqiriport", "udp-rx", "--timeout", "60s"]);
    drop(installed);
    // Uninstalled: no pod, no workload left in the namespace.
    wait_for("the release's pods gone", Duration::from_secs(120), || {
        let pods = kubectl_json(&["-n", NAMESPACE, "get", "pods"]);
        pods["items"].as_array().is_some_and(Vec::is_empty).then_some(())
    });
}
