//! The appliance end to end, the way its users run it: `helm install` of the
//! chart with the images built here, on real nodes (tests/k8s/nodes.sh: two
//! kubelets with containerd and runc, kube-scheduler, kube-proxy, CoreDNS),
//! then what a user's first hour does to it, one scenario after another on
//! the one installation: ports and flows applied with kubectl, datagrams from
//! the host counted through the Service, a REST capture read by tshark, a
//! killed gateway, a deleted operator, a bad flow, `helm test`, `helm
//! upgrade`, a consumer pod, an AF_XDP port on a device a device plugin
//! handed the gateway pod, and an uninstall that leaves nothing behind.
//! `tests/run.sh` brings the nodes up and names their admin kubeconfig in
//! `DAQIRI_TEST_NODES_KUBECONFIG`; this needs root.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/tools.rs"]
mod tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use cluster::{
    cli, cli_with_input, condition, container_process, http, http_get, http_json, kubectl_json, poll_until, try_cli,
    wait_for,
};

const NAMESPACE: &str = "daqiri-e2e";
const RELEASE: &str = "daqiri-gateway";
const GATEWAYS: &str = "app.kubernetes.io/component=gateway";
const ADMIN_PORT: u16 = 9464;
/// Where `operator/samples/port-socket.yaml` listens.
const UDP_PORT: u16 = 4096;
/// The host directory of the gateways' consumer socket.
const CONSUMER_DIR: &str = "/run/daqiri-e2e/consumers";
const CONSUMER_IMAGE: &str = "localhost/daqiri-consumer-python:0.1.0";
/// The resource each node's device plugin (tests/k8s/nodes.sh) hands out: veths.
const VF_RESOURCE: &str = "daqiri.test/veth_vf";
/// Where the veths' peers are, each with an address and its veth's MAC as neighbour.
const VF_NAMESPACE: &str = "daqiri-vfs";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(root().join("operator/samples").join(name)).unwrap()
}

fn kubectl(args: &[&str]) -> String {
    let mut all = vec!["-n", NAMESPACE];
    all.extend(args);
    cli("kubectl", &all)
}

fn apply(manifest: &str) {
    cli_with_input("kubectl", &["-n", NAMESPACE, "apply", "-f", "-"], manifest);
}

fn get(kind: &str, name: &str) -> Value {
    kubectl_json(&["-n", NAMESPACE, "get", kind, name])
}

/// The gateway pods by node name.
fn gateways() -> BTreeMap<String, Value> {
    let pods = kubectl_json(&["-n", NAMESPACE, "get", "pods", "-l", GATEWAYS]);
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["spec"]["nodeName"].as_str().unwrap_or_default().to_owned(), p.clone()))
        .collect()
}

fn admin_address(pod: &Value) -> String {
    format!("{}:{ADMIN_PORT}", pod["status"]["podIP"].as_str().unwrap())
}

fn service_address() -> String {
    let service = get("svc", &format!("{RELEASE}-gateway"));
    format!("{}:{ADMIN_PORT}", service["spec"]["clusterIP"].as_str().unwrap())
}

fn ready(pod: &Value) -> bool {
    condition(pod, "Ready").is_some_and(|c| c["status"] == "True")
}

fn gateway_restarts(pod: &Value) -> u64 {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == "gateway"))
        .and_then(|c| c["restartCount"].as_u64())
        .unwrap_or(0)
}

/// `count` datagrams of 256 bytes to a gateway pod, each carrying its
/// sequence number, paced so a socket buffer never overflows.
fn send(pod: &Value, count: u32) {
    let address = (pod["status"]["podIP"].as_str().unwrap(), UDP_PORT);
    let sender = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    for seq in 0..count {
        sender.send_to(&seq.to_be_bytes().repeat(64), address).unwrap();
        if seq % 500 == 499 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// `daqiri_rx_packets_total` of all queues, from one scrape.
fn received(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.starts_with("daqiri_rx_packets_total{") && l.contains("daqiri_queue_id=\"all\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The gateway's `/api/v1/status`, if it answers now.
fn try_status(pod: &Value) -> Option<Value> {
    serde_json::from_str(&http_get(&admin_address(pod), "/api/v1/status")?).ok()
}

/// The gateway's `/api/v1/status`, once it answers.
fn status(pod: &Value) -> Value {
    wait_for(&format!("{}'s status", admin_address(pod)), Duration::from_secs(30), || try_status(pod))
}

fn uptime(pod: &Value) -> f64 {
    status(pod)["uptime_s"].as_f64().unwrap()
}

fn interface_names(status: &Value) -> Vec<String> {
    status["interfaces"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_owned()).collect()
}

struct Installed;

impl Installed {
    fn install() -> Self {
        // What an earlier run left (a failed one does not get to its end).
        let _ = try_cli("helm", &["uninstall", RELEASE, "-n", NAMESPACE, "--wait"], "");
        cli("kubectl", &["delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout", "90s"]);
        cli("kubectl", &["label", "nodes", "--all", "--overwrite", "daqiri.nvidia.com/gateway=true"]);
        let chart = root().join("charts/daqiri-gateway");
        let values = root().join("tests/k8s/e2e/values.yaml");
        let (chart, values) = (chart.to_str().unwrap(), values.to_str().unwrap());
        cli("helm", &["install", RELEASE, chart, "-n", NAMESPACE, "--create-namespace", "-f", values]);
        Installed
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = try_cli("helm", &["uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s"], "");
    }
}

#[test]
#[ignore = "needs root and the nodes tests/k8s/nodes.sh starts; tests/run.sh runs it"]
fn the_appliance_installs_carries_traffic_survives_its_faults_upgrades_and_uninstalls_on_real_nodes() {
    let started = Instant::now();
    let installed = Installed::install();
    kubectl(&["rollout", "status", "deploy/daqiri-gateway-operator", "--timeout", "180s"]);
    let operator_ready = started.elapsed();
    a_port_runs_on_every_node();
    eprintln!(
        "helm install to the operator Ready: {operator_ready:.1?}; to both gateways Ready with the port: {:.1?}",
        started.elapsed()
    );
    helm_test_passes();
    every_datagram_is_counted_through_the_service();
    a_flow_the_gateway_refuses_is_degraded_and_the_rest_run();
    a_killed_gateway_is_restarted_and_configured_again_and_the_other_node_is_undisturbed();
    a_deleted_operator_is_replaced_and_its_successor_leads();
    a_port_for_one_node_runs_there_only_and_a_capture_through_the_service_reads_back_in_tshark();
    helm_upgrade_rolls_the_pods_and_the_operator_configures_the_new_ones();
    // node-b stays without a gateway: on this one host its consumer socket
    // would be node-a's (one host directory), which a gateway refuses to take.
    a_consumer_pod_reads_the_queues_through_the_host_path_socket_byte_exact();
    a_veth_the_device_plugin_hands_out_is_resolved_and_received_with_af_xdp();
    drop(installed);
    nothing_is_left_behind();
    eprintln!("every scenario in {:.1?}", started.elapsed());
}

fn a_port_runs_on_every_node() {
    apply(&sample("port-socket.yaml"));
    kubectl(&["rollout", "status", "ds/daqiri-gateway-gateway", "--timeout", "240s"]);
    let message = wait_for("the DaqiriPort Ready on both nodes", Duration::from_secs(60), || {
        let ready = condition(&get("daqiriport", "udp-rx"), "Ready")?;
        (ready["status"] == "True").then(|| ready["message"].as_str().unwrap_or_default().to_owned())
    });
    assert!(message.contains("node-a") && message.contains("node-b"), "{message}");
    for node in ["node-a", "node-b"] {
        let state = get("daqirinodestate", node);
        assert_eq!(condition(&state, "Ready").unwrap()["reason"], "ConfigApplied", "{state}");
    }
}

fn helm_test_passes() {
    // The chart's test pod asks a gateway's /readyz by the Service's name
    // (cluster DNS, kube-proxy) as the non-root user the chart gives it.
    let tested = cli("helm", &["test", RELEASE, "-n", NAMESPACE, "--logs"]);
    assert!(tested.contains("Phase:          Succeeded") && tested.contains(r#"{"status":"ok"}"#), "{tested}");
}

/// Datagrams from the host to each gateway pod, each counted by that gateway,
/// as scraped through the Service (which spreads scrapes over both: every
/// scrape is one gateway's count).
fn every_datagram_is_counted_through_the_service() {
    let pods: Vec<Value> = gateways().into_values().collect();
    assert_eq!(pods.len(), 2, "a gateway per node");
    let counts = [3_000u64, 5_000];
    for (pod, count) in pods.iter().zip(counts) {
        send(pod, count as u32);
    }
    let service = service_address();
    let mut last = std::collections::BTreeSet::new();
    wait_for("both gateways' counts through the Service", Duration::from_secs(60), || {
        last.clear();
        for _ in 0..20 {
            if let Some(count) = http_get(&service, "/metrics").as_deref().and_then(received) {
                last.insert(count);
            }
        }
        eprintln!("scraped through {service}: {last:?}");
        // A round of scrapes that saw both gateways, each with its whole count
        // (an earlier round may catch one still receiving).
        (last == counts.into_iter().collect()).then_some(())
    });
}

/// A flow the schema takes but the gateway's validator refuses (a queue the
/// port lacks): that flow is Degraded naming the key, its sibling runs.
fn a_flow_the_gateway_refuses_is_degraded_and_the_rest_run() {
    let flows = sample("flows.yaml");
    assert!(flows.contains("  queue: 0\n"));
    apply(&flows.replacen("  queue: 0\n", "  queue: 9\n", 1));
    let degraded = wait_for("adc-a Degraded", Duration::from_secs(60), || {
        condition(&get("daqiriflow", "adc-a"), "Degraded").filter(|c| c["status"] == "True")
    });
    assert_eq!(degraded["reason"], "ValidationFailed", "{degraded}");
    let message = degraded["message"].as_str().unwrap();
    assert!(message.contains("daqiri.cfg.interfaces[0].rx.flows[0].action.id"), "{message}");
    for pod in gateways().values() {
        let flows = wait_for("adc-b running on each gateway", Duration::from_secs(60), || {
            let status = status(pod);
            let flows = status["interfaces"][0]["flows"].as_array()?.clone();
            (!flows.is_empty()).then_some(flows)
        });
        let ids: Vec<u64> = flows.iter().filter_map(|f| f["id"].as_u64()).collect();
        assert_eq!(ids, [11], "only the valid flow runs: {flows:?}");
        assert_eq!(status(pod)["engine"], "running");
    }
    kubectl(&["delete", "daqiriflow", "adc-a", "adc-b", "--timeout", "60s"]);
}

fn a_killed_gateway_is_restarted_and_configured_again_and_the_other_node_is_undisturbed() {
    let before = gateways();
    let (victim, bystander) = (&before["node-a"], &before["node-b"]);
    let bystander_uptime = uptime(bystander);
    let pid = container_process(victim, "gateway", "daqiri-gateway").expect("the gateway container's process");
    let killed = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    let restarted = wait_for("the kubelet restarting the killed gateway", Duration::from_secs(120), || {
        let pod = gateways().remove("node-a")?;
        (gateway_restarts(&pod) > gateway_restarts(victim) && ready(&pod)).then_some(pod)
    });
    assert_eq!(restarted["metadata"]["uid"], victim["metadata"]["uid"], "the same pod, its container restarted");
    let status = status(&restarted);
    assert_eq!((interface_names(&status), &status["engine"]), (vec!["udp-rx".to_owned()], &"running".into()));
    // A fresh process counts from zero what it is sent.
    send(&restarted, 1_000);
    let address = admin_address(&restarted);
    wait_for("the restarted gateway counting 1000", Duration::from_secs(30), || {
        (http_get(&address, "/metrics").as_deref().and_then(received)? == 1_000).then_some(())
    });
    let now = gateways();
    assert_eq!(gateway_restarts(&now["node-b"]), 0, "node-b's gateway was not restarted");
    assert!(uptime(&now["node-b"]) > bystander_uptime, "node-b's gateway kept running");
}

fn a_deleted_operator_is_replaced_and_its_successor_leads() {
    let lease = || get("lease", &format!("{RELEASE}-operator"))["spec"]["holderIdentity"].as_str().map(str::to_owned);
    let old = wait_for("the operator holding its lease", Duration::from_secs(30), lease);
    kubectl(&["delete", "pod", &old, "--timeout", "60s"]);
    kubectl(&["rollout", "status", "deploy/daqiri-gateway-operator", "--timeout", "120s"]);
    let new = wait_for("a successor holding the lease", Duration::from_secs(60), || lease().filter(|h| *h != old));
    let pod = get("pod", &new);
    assert!(ready(&pod), "the lease holder {new} is a Ready pod");
}

/// A port bound to node-a by its selector: node-a's gateway runs it (the
/// node-config sidecar follows its ConfigMap through the kubelet's symlink
/// swap, the gateway reloads), node-b's waits without a config, Ready. Then
/// node-b leaves the gateways' node selector, so the Service has node-a's
/// gateway alone, and a capture started and downloaded through the Service
/// reads back whole in tshark.
fn a_port_for_one_node_runs_there_only_and_a_capture_through_the_service_reads_back_in_tshark() {
    kubectl(&["delete", "daqiriport", "udp-rx", "--timeout", "60s"]);
    let port = sample("port-socket.yaml")
        .replace("name: udp-rx", "name: udp-node-a")
        .replace("spec:\n", "spec:\n  nodeSelector: { kubernetes.io/hostname: node-a }\n");
    apply(&port);
    let pods = wait_for("node-a running udp-node-a and node-b waiting", Duration::from_secs(90), || {
        let pods = gateways();
        let (a, b) = (try_status(&pods["node-a"])?, try_status(&pods["node-b"])?);
        (interface_names(&a) == ["udp-node-a"] && b["engine"] == "waiting" && ready(&pods["node-b"])).then_some(pods)
    });
    wait_for("node-b's DaqiriNodeState removed", Duration::from_secs(30), || {
        let output = try_cli("kubectl", &["-n", NAMESPACE, "get", "daqirinodestate", "node-b"], "");
        String::from_utf8_lossy(&output.stderr).contains("NotFound").then_some(())
    });
    cli("kubectl", &["label", "node", "node-b", "daqiri.nvidia.com/gateway-"]);
    wait_for("node-b's gateway gone", Duration::from_secs(60), || (gateways().len() == 1).then_some(()));

    let service = service_address();
    let body = r#"{"format": "pcap", "interface": "udp-node-a", "name": "e2e", "max_packets": 500}"#;
    let (code, capture) = http_json(&service, "POST", "/api/v1/captures", body).expect("the Service answers");
    assert_eq!(code, 201, "{capture}");
    let id = capture["id"].as_u64().unwrap();
    send(&pods["node-a"], 500);
    let capture = wait_for("the capture finished", Duration::from_secs(30), || {
        let (_, capture) = http_json(&service, "GET", &format!("/api/v1/captures/{id}"), "")?;
        (capture["state"] == "finished").then_some(capture)
    });
    assert_eq!((&capture["packets"], &capture["capture_drops"]), (&500.into(), &0.into()), "{capture}");
    let (code, pcap) = http(&service, "GET", &format!("/api/v1/captures/{id}/download"), "").unwrap();
    assert_eq!(code, 200);
    let file = std::env::temp_dir().join(format!("daqiri-e2e-{}.pcap", std::process::id()));
    std::fs::write(&file, &pcap).unwrap();
    let read = Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-T", "fields", "-e", "udp.dstport", "-e", "data.data"])
        .output()
        .expect("tshark (tests/setup.sh installs it)");
    std::fs::remove_file(&file).unwrap();
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let rows = String::from_utf8(read.stdout).unwrap();
    assert_eq!(rows.lines().count(), 500);
    for (seq, row) in rows.lines().enumerate() {
        let expected = format!("{UDP_PORT}\t{}", format!("{seq:08x}").repeat(64));
        assert_eq!(row, expected, "datagram {seq} whole and in order");
    }
}

/// `helm upgrade --reuse-values --set SET` of the release.
fn helm_upgrade(set: &str) {
    let chart = root().join("charts/daqiri-gateway");
    let (chart, namespace) = (chart.to_str().unwrap(), NAMESPACE);
    cli("helm", &["upgrade", RELEASE, chart, "-n", namespace, "--reuse-values", "--set", set]);
}

/// The upgrade also opens the gateways' consumer socket, in a host
/// directory of the suite's own (the chart's default is the node's
/// /run/daqiri/consumers), for the consumer pod after it.
fn helm_upgrade_rolls_the_pods_and_the_operator_configures_the_new_ones() {
    let before: Vec<Value> = gateways().into_values().collect();
    helm_upgrade(&format!(
        "gateway.captures.maxRunning=4,operator.logLevel=debug,gateway.consumers.enabled=true,\
         gateway.consumers.hostPath={CONSUMER_DIR}"
    ));
    kubectl(&["rollout", "status", "ds/daqiri-gateway-gateway", "--timeout", "240s"]);
    kubectl(&["rollout", "status", "deploy/daqiri-gateway-operator", "--timeout", "120s"]);
    let after = wait_for("node-a's new gateway configured", Duration::from_secs(120), || {
        let pods = gateways();
        let fresh = pods.values().all(|p| before.iter().all(|b| b["metadata"]["uid"] != p["metadata"]["uid"]));
        let configured = || try_status(&pods["node-a"]).is_some_and(|s| interface_names(&s) == ["udp-node-a"]);
        (fresh && pods.len() == before.len() && ready(&pods["node-a"]) && configured()).then_some(pods)
    });
    let args = after["node-a"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--max-captures=4"), "the upgraded value reached the pod: {args}");
}

/// The Python client in its image (gateway/python/Dockerfile), in a pod of
/// its own on node-a that shares the gateway's socket through the host
/// directory: it subscribes to both queues of the port and reads 500
/// datagrams in the gateway's memory; their sorted bytes hash as sent.
fn a_consumer_pod_reads_the_queues_through_the_host_path_socket_byte_exact() {
    const COUNT: u32 = 500;
    let script = r#"
import hashlib, sys, daqiri_gateway as dg
subscriptions = [dg.Subscription("/run/daqiri/consumers/consumers.sock", "udp-node-a", queue=q) for q in (0, 1)]
print("subscribed", flush=True)
payloads = []
while len(payloads) < int(sys.argv[1]):
    for subscription in subscriptions:
        burst = subscription.next(timeout=0.1)
        if burst is not None:
            with burst:
                payloads.extend(bytes(memoryview(packet)) for packet in burst)
print(len(payloads), hashlib.sha256(b"".join(sorted(payloads))).hexdigest(), flush=True)
"#;
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "consumer"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "node-a"},
            "restartPolicy": "Never",
            // The socket is the gateway user's and group's (0660).
            "securityContext": {"runAsNonRoot": true, "runAsUser": 10001, "runAsGroup": 65532},
            "containers": [{
                "name": "consumer", "image": CONSUMER_IMAGE, "imagePullPolicy": "Never",
                "command": ["python3", "-c", script, COUNT.to_string()],
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "consumers", "mountPath": "/run/daqiri/consumers"}],
            }],
            "volumes": [{"name": "consumers", "hostPath": {"path": CONSUMER_DIR, "type": "Directory"}}],
        },
    });
    apply(&pod.to_string());
    let logs =
        || String::from_utf8_lossy(&try_cli("kubectl", &["-n", NAMESPACE, "logs", "consumer"], "").stdout).into_owned();
    let mut printed = String::new();
    let subscribed = poll_until(Duration::from_secs(90), || {
        printed = logs();
        printed.contains("subscribed") || get("pod", "consumer")["status"]["phase"] == "Failed"
    });
    assert!(
        subscribed && printed.contains("subscribed"),
        "the consumer did not subscribe: {printed}\n{}",
        get("pod", "consumer")["status"]
    );
    send(&gateways()["node-a"], COUNT);
    let done = wait_for("the consumer done", Duration::from_secs(60), || {
        let phase = get("pod", "consumer")["status"]["phase"].as_str().map(str::to_owned)?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    });
    let printed = logs();
    assert_eq!(done, "Succeeded", "{printed}");
    let mut sent: Vec<Vec<u8>> = (0..COUNT).map(|seq| seq.to_be_bytes().repeat(64)).collect();
    sent.sort();
    let digest: String = Sha256::digest(sent.concat()).iter().map(|b| format!("{b:02x}")).collect();
    assert!(printed.contains(&format!("{COUNT} {digest}")), "read other bytes than were sent: {printed}");
    kubectl(&["delete", "pod", "consumer", "--timeout", "60s"]);
}

/// `ip ARGS` on the host; its stdout.
fn ip(args: &[&str]) -> String {
    let output = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(output.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The device plugin's resource as `node` advertises it (`allocatable`).
fn allocatable_vfs(node: &str) -> Option<String> {
    let node = kubectl_json(&["get", "node", node]);
    node["status"]["allocatable"][VF_RESOURCE].as_str().map(str::to_owned)
}

/// Whether `netdev` (on the host) has an XDP program attached.
fn xdp_attached(netdev: &str) -> bool {
    let link: Value = serde_json::from_str(&ip(&["-j", "-d", "link", "show", netdev])).unwrap();
    !link[0]["xdp"].is_null()
}

/// The kernel-bypass image on node-a's gateway, which asks for one of the
/// device plugin's veths (the chart's `gateway.sriov`) with the AF_XDP
/// capabilities on the host network: the kubelet allocates a veth and puts
/// its name in the container's `PCIDEVICE_DAQIRI_TEST_VETH_VF`; the gateway
/// resolves the operator's `k8s-resource:` address from it, attaches its XDP
/// program to that veth (the other stays untouched) and counts every
/// datagram sent into it. A veth set down becomes Unhealthy through the
/// plugin's ListAndWatch, and the kubelet's allocatable follows.
fn a_veth_the_device_plugin_hands_out_is_resolved_and_received_with_af_xdp() {
    const COUNT: u32 = 2_000;
    assert_eq!(allocatable_vfs("node-a").as_deref(), Some("2"), "node-a advertises both veths");
    // One engine per gateway: the socket port leaves node-a first.
    kubectl(&["delete", "daqiriport", "udp-node-a", "--timeout", "60s"]);
    cli("kubectl", &["label", "node", "node-a", "--overwrite", "daqiri.nvidia.com/instrument=true"]);
    helm_upgrade(&format!(
        "image.tag=0.1.0-bypass,gateway.hostNetwork=true,gateway.capabilities={{NET_ADMIN,BPF,PERFMON,NET_RAW,IPC_LOCK}},\
         gateway.sriov.resourceName={VF_RESOURCE},gateway.sriov.count=1"
    ));
    kubectl(&["rollout", "status", "ds/daqiri-gateway-gateway", "--timeout", "240s"]);
    apply(&sample("port-af-xdp.yaml").replace("nvidia.com/cx7_vf", VF_RESOURCE));
    let pod = wait_for("node-a's gateway receiving vf-xdp with AF_XDP", Duration::from_secs(120), || {
        let pod = gateways().remove("node-a")?;
        let status = try_status(&pod)?;
        (ready(&pod) && interface_names(&status) == ["vf-xdp"] && status["engine"] == "running").then_some(pod)
    });
    let pid = container_process(&pod, "gateway", "daqiri-gateway").expect("the gateway container's process");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let given: Vec<String> = String::from_utf8_lossy(&environ)
        .split('\0')
        .filter_map(|v| v.strip_prefix("PCIDEVICE_DAQIRI_TEST_VETH_VF=").map(str::to_owned))
        .collect();
    let [vf] = given.as_slice() else { panic!("the kubelet gave the gateway one veth: {given:?}") };
    let other = ["dqvf-a0", "dqvf-a1"].into_iter().find(|v| v != vf).expect("node-a's two veths");
    assert!(xdp_attached(vf) && !xdp_attached(other), "the XDP program is on {vf} alone");
    let state = get("daqirinodestate", "node-a");
    let vfs = &state["status"]["sriovResources"][0];
    assert_eq!((&vfs["resourceName"], &vfs["capacity"]), (&VF_RESOURCE.into(), &2.into()), "{state}");

    // Into the veth from its peer, which has the veth's MAC as its neighbour.
    let peer = format!("{vf}p");
    let neighbours: Value =
        serde_json::from_str(&ip(&["-n", VF_NAMESPACE, "-j", "neigh", "show", "dev", &peer])).unwrap();
    let target = neighbours[0]["dst"].as_str().unwrap().to_owned();
    let sender = format!(
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         for seq in range({COUNT}):\n    s.sendto(seq.to_bytes(4, 'big') * 64, ('{target}', {UDP_PORT}))\n    \
         if seq % 500 == 499: time.sleep(0.005)\n"
    );
    ip(&["netns", "exec", VF_NAMESPACE, "python3", "-c", &sender]);
    let address = admin_address(&pod);
    wait_for(&format!("node-a's gateway counting {COUNT} from {vf}"), Duration::from_secs(30), || {
        (http_get(&address, "/metrics").as_deref().and_then(received)? == u64::from(COUNT)).then_some(())
    });

    // The plugin reports the other veth down as Unhealthy; the kubelet's
    // allocatable follows, and the operator's node state with it.
    ip(&["link", "set", other, "down"]);
    wait_for("node-a's allocatable veths down to 1", Duration::from_secs(30), || {
        (allocatable_vfs("node-a")? == "1").then_some(())
    });
    wait_for("node-a's node state saying 1 allocatable", Duration::from_secs(30), || {
        (get("daqirinodestate", "node-a")["status"]["sriovResources"][0]["allocatable"] == 1).then_some(())
    });
    ip(&["link", "set", other, "up"]);
    wait_for("node-a's allocatable veths back to 2", Duration::from_secs(30), || {
        (allocatable_vfs("node-a")? == "2").then_some(())
    });
    kubectl(&["delete", "daqiriport", "vf-xdp", "--timeout", "60s"]);
    cli("kubectl", &["label", "node", "node-a", "daqiri.nvidia.com/instrument-"]);
}

/// After `helm uninstall`: no pod, no object the release or its operator
/// made (the Lease goes with the operator's Deployment), no finalizer that
/// would hold the namespace, which then goes away. The user's ports stay.
fn nothing_is_left_behind() {
    let left = || -> Vec<String> {
        let mut left = Vec::new();
        for kind in ["pods", "daqiriports", "daqiriflows", "daqirinodestates", "configmaps", "leases", "jobs"] {
            for object in kubectl_json(&["-n", NAMESPACE, "get", kind])["items"].as_array().unwrap() {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                let user_owned = kind == "daqiriports" && object["metadata"]["finalizers"].is_null();
                if name != "kube-root-ca.crt" && !user_owned {
                    left.push(format!("{kind}/{name}"));
                }
            }
        }
        left
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = left();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind 120 s after helm uninstall: {left:?}");
        std::thread::sleep(Duration::from_secs(1));
    }
    cli("kubectl", &["delete", "namespace", NAMESPACE, "--timeout", "90s"]);
}
