//! End to end against a real Kubernetes API server, run only when
//! `DAQIRI_TEST_KUBECONFIG` names a kubeconfig (tests/run.sh filters this
//! binary out otherwise, so nextest counts its tests as skipped). Any
//! cluster works, kind included; nothing runs on its nodes:
//!
//! - installs the CRDs (`daqiri-operator apply-crds`, as the chart's hook)
//!   into a fresh namespace `daqiri-e2e-<pid>`, deleted at the end;
//! - creates a Node object and a gateway Pod bound to it, whose status the
//!   test writes itself (Running, IP 127.0.0.1) since no kubelet runs it;
//! - runs a real `daqiri-gateway` on loopback, the `node-config` agent
//!   writing its config file, and two `daqiri-operator run` replicas;
//! - checks statuses, events, the node's ConfigMap and the gateway's config,
//!   the DaqiriNodeState, finalizers and deletion, and failover.
//!
//! The API server must let the test create Nodes, Namespaces and CRDs
//! (cluster-admin, as kind's default kubeconfig has). With kind:
//! `kind create cluster && DAQIRI_TEST_KUBECONFIG=~/.kube/config cargo nextest
//! run -p daqiri-operator --test cluster --run-ignored=all`. Every test here
//! ends in `_through_a_real_api_server`: tests/run.sh skips them by that name.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

const GATEWAY_SELECTOR: &str = "app.kubernetes.io/component=gateway,daqiri-e2e=true";

fn kubeconfig() -> PathBuf {
    PathBuf::from(std::env::var("DAQIRI_TEST_KUBECONFIG").expect("DAQIRI_TEST_KUBECONFIG names a kubeconfig"))
}

async fn client() -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig()).expect("DAQIRI_TEST_KUBECONFIG is a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig names a usable context");
    kube::Client::try_from(config).expect("a client for the cluster")
}

fn workspace_binary(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug").join(name);
    assert!(path.exists(), "{} is missing: `cargo build --workspace` builds it", path.display());
    path
}

/// Child processes killed (SIGKILL) when the test ends, however it ends.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn until<T>(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn ready_reason(object: &Value) -> Option<String> {
    let conditions = object["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == "Ready")?["reason"].as_str().map(str::to_owned)
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh runs it when set"]
async fn the_operator_configures_a_real_gateway_through_a_real_api_server() {
    let client = client().await;
    let ns = format!("daqiri-e2e-{}", std::process::id());
    let node_name = format!("daqiri-e2e-node-{}", std::process::id());
    let operator = env!("CARGO_BIN_EXE_daqiri-operator");
    let env = [("KUBECONFIG", kubeconfig())];

    // CRDs, as the chart's hook applies them.
    let status = Command::new(operator).arg("apply-crds").envs(env.clone()).status().unwrap();
    assert!(status.success(), "apply-crds failed");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = json!({"metadata": {"name": node_name, "labels": {"daqiri-e2e": "true"}}});
    nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
    let result = run_scenario(&client, &ns, &node_name, operator, &env).await;
    // Clean up before reporting.
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    result.unwrap();
}

async fn run_scenario(
    client: &kube::Client,
    ns: &str,
    node_name: &str,
    operator: &str,
    env: &[(&str, PathBuf)],
) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("daqiri-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config_file = dir.join("config.yaml");
    let admin_port = free_port();
    let prefix = "daqiri-e2e-config";
    let mut processes = Processes(Vec::new());
    processes.0.push(
        Command::new(workspace_binary("daqiri-gateway"))
            .args(["run", "--wait-for-config", "--status-interval", "60", "--config"])
            .arg(&config_file)
            .args(["--admin-addr", &format!("127.0.0.1:{admin_port}"), "--capture-dir"])
            .arg(dir.join("captures"))
            .args(["--capture-free-space-floor-mb", "1"])
            .spawn()
            .unwrap(),
    );
    processes.0.push(
        Command::new(operator)
            .args(["node-config", "--namespace", ns, "--config-map", prefix, "--node", node_name, "--out"])
            .arg(&config_file)
            .envs(env.iter().cloned())
            .spawn()
            .unwrap(),
    );
    let replica = |name: &str| {
        Command::new(operator)
            .args(["run", "--namespace", ns, "--config-map", prefix, "--gateway-selector", GATEWAY_SELECTOR])
            .args(["--gateway-admin-port", &admin_port.to_string(), "--lease-name", "daqiri-e2e", "--identity", name])
            .args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
            .envs(env.iter().cloned())
            .spawn()
            .unwrap()
    };
    processes.0.push(replica("replica-a"));

    // A gateway pod bound to the node; no kubelet runs it, so the test writes its status.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = json!({"metadata": {"name": "gateway", "labels": {"app.kubernetes.io/component": "gateway", "daqiri-e2e": "true"}},
                     "spec": {"nodeName": node_name, "containers": [{"name": "gateway", "image": "none"}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.map_err(|e| e.to_string())?;
    let status = json!({"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}});
    pods.patch_status("gateway", &PatchParams::default(), &Patch::Merge(&status)).await.map_err(|e| e.to_string())?;

    let ports = Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), ns, &api_resource("DaqiriPort"));
    let flows = Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), ns, &api_resource("DaqiriFlow"));
    let states = Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), ns, &api_resource("DaqiriNodeState"));
    let port = json!({"apiVersion": "daqiri.nvidia.com/v1alpha1", "kind": "DaqiriPort", "metadata": {"name": "udp-rx"},
        "spec": {"nodeSelector": {"daqiri-e2e": "true"}, "backend": "socket",
                 "socket": {"mode": "server", "localAddr": format!("udp://127.0.0.1:{}", free_port())},
                 "memoryRegions": [{"name": "rx", "kind": "host", "numBufs": 1024, "bufSize": 2048}],
                 "rxQueues": [{"name": "q0", "id": 0, "cpuCore": 0, "batchSize": 32, "memoryRegions": ["rx"]}]}});
    let flow = json!({"apiVersion": "daqiri.nvidia.com/v1alpha1", "kind": "DaqiriFlow", "metadata": {"name": "adc-a"},
        "spec": {"port": "udp-rx", "id": 10, "match": {"udpSrc": "10000-10049"}, "queue": 0}});
    ports.create(&PostParams::default(), &serde_json::from_value(port).unwrap()).await.map_err(|e| e.to_string())?;
    flows.create(&PostParams::default(), &serde_json::from_value(flow).unwrap()).await.map_err(|e| e.to_string())?;

    let flow_ready = until(Duration::from_secs(60), "the flow is Ready", async || {
        let flow = serde_json::to_value(flows.get("adc-a").await.ok()?).ok()?;
        (ready_reason(&flow).as_deref() == Some("ConfigApplied")).then_some(flow)
    })
    .await;
    assert_eq!(flow_ready["metadata"]["finalizers"], json!(["daqiri.nvidia.com/gateway-config"]));
    assert_eq!(flow_ready["metadata"]["ownerReferences"][0]["name"], "udp-rx");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let config_map = config_maps.get(&format!("{prefix}-{node_name}")).await.map_err(|e| e.to_string())?;
    let rendered = config_map.data.unwrap_or_default().remove("config.yaml").unwrap_or_default();
    assert!(rendered.contains("id: 10"), "{rendered}");
    let on_disk = until(Duration::from_secs(30), "the agent wrote the config", async || {
        std::fs::read_to_string(&config_file).ok().filter(|t| *t == rendered)
    })
    .await;
    assert_eq!(on_disk, rendered);
    let gateway: Value = reqwest::get(format!("http://127.0.0.1:{admin_port}/api/v1/status"))
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(gateway["engine"], "running", "{gateway}");
    let state = serde_json::to_value(states.get(node_name).await.map_err(|e| e.to_string())?).unwrap();
    assert_eq!(state["status"]["engineState"], "running", "{state}");
    assert_eq!(state["status"]["appliedSha256"], state["status"]["renderedSha256"]);
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    let about = |name: &str| {
        events.iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)).count()
    };
    assert_eq!((about("udp-rx"), about("adc-a")), (1, 1), "one Ready event each");

    // Deletion: out of the config, then the finalizer goes and the flow with it.
    flows.delete("adc-a", &DeleteParams::default()).await.map_err(|e| e.to_string())?;
    until(Duration::from_secs(60), "the flow is gone", async || {
        flows.get_opt("adc-a").await.ok()?.is_none().then_some(())
    })
    .await;
    let without = config_maps.get(&format!("{prefix}-{node_name}")).await.map_err(|e| e.to_string())?;
    assert!(!without.data.unwrap_or_default()["config.yaml"].contains("id: 10"));

    // Failover: a second replica stands by; the leader's SIGTERM hands it the lease.
    processes.0.push(replica("replica-b"));
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = async || leases.get("daqiri-e2e").await.ok()?.spec?.holder_identity;
    assert_eq!(holder().await.as_deref(), Some("replica-a"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let leader_pid = processes.0[2].id(); // replica-a
    let terminated = Instant::now();
    let status = Command::new("kill").args(["-TERM", &leader_pid.to_string()]).status().unwrap();
    assert!(status.success());
    until(Duration::from_secs(10), "the standby leads", async || {
        (holder().await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    let failover = terminated.elapsed();
    assert!(failover < Duration::from_secs(5), "failover took {failover:?}");
    // The new leader works: a new flow becomes Ready.
    let flow = json!({"apiVersion": "daqiri.nvidia.com/v1alpha1", "kind": "DaqiriFlow", "metadata": {"name": "adc-b"},
        "spec": {"port": "udp-rx", "id": 11, "match": {"udpSrc": "10050-10099"}, "queue": 0}});
    flows.create(&PostParams::default(), &serde_json::from_value(flow).unwrap()).await.map_err(|e| e.to_string())?;
    until(Duration::from_secs(60), "the new leader configures a flow", async || {
        let flow = serde_json::to_value(flows.get("adc-b").await.ok()?).ok()?;
        (ready_reason(&flow).as_deref() == Some("ConfigApplied")).then_some(())
    })
    .await;
    drop(processes);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn api_resource(kind: &str) -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("daqiri.nvidia.com", "v1alpha1", kind);
    kube::api::ApiResource::from_gvk(&gvk)
}
