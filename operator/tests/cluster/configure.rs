//! The operator, under the chart's service account and RBAC, configures a
//! real gateway: statuses, events, the node's ConfigMap and config file, the
//! DaqiriNodeState, standing captures, field ownership, and deletion through
//! the garbage collector and finalizers.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::harness::{Processes, Stage, free_port, operator_binary, ready_reason, until, workspace_binary};

/// The operator and a gateway on one node of a stage.
pub struct Deployment {
    pub processes: Processes,
    pub admin_port: u16,
    pub node: String,
    pub config_map: String,
}

/// Starts a gateway on loopback, its node-config agent under the gateway's
/// service account, and `replicas` operator replicas under the operator's,
/// each logging into the stage's directory; creates the node and the
/// gateway's pod (whose status the test writes: no kubelet runs it).
pub async fn deploy(stage: &Stage, replicas: &[&str]) -> Deployment {
    let node = format!("{}-node", stage.namespace);
    stage.node(&node).await;
    let config_map = config_map(stage);
    let config_file = stage.dir.join("config.yaml");
    let admin_port = free_port();
    let mut processes = Processes::default();
    processes.0.push(
        logging(&mut Command::new(workspace_binary("daqiri-gateway")), stage, "gateway")
            .args(["run", "--wait-for-config", "--status-interval", "60", "--config"])
            .arg(&config_file)
            .args(["--admin-addr", &format!("127.0.0.1:{admin_port}"), "--capture-dir"])
            .arg(stage.dir.join("captures"))
            .args(["--capture-free-space-floor-mb", "1"])
            .spawn()
            .unwrap(),
    );
    processes.0.push(
        logging(&mut Command::new(operator_binary()), stage, "node-config")
            .args(["node-config", "--namespace", &stage.namespace, "--config-map", &config_map, "--node", &node])
            .arg("--out")
            .arg(&config_file)
            .env("KUBECONFIG", stage.gateway_kubeconfig())
            .spawn()
            .unwrap(),
    );
    let mut deployment = Deployment { processes, admin_port, node, config_map };
    for name in replicas {
        let replica = replica(stage, admin_port, name);
        deployment.processes.0.push(replica);
    }
    let pods: Api<Pod> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let labels = json!({"app.kubernetes.io/component": "gateway", "app.kubernetes.io/instance": stage.release});
    let pod = json!({"metadata": {"name": "gateway", "labels": labels},
                     "spec": {"nodeName": deployment.node, "containers": [{"name": "gateway", "image": "none"}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}});
    pods.patch_status("gateway", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    deployment
}

/// The prefix of the node ConfigMaps (`daqiri.configMap`).
fn config_map(stage: &Stage) -> String {
    format!("{}-config", stage.fullname())
}

/// An operator replica with the chart's arguments, as `name`, under the
/// chart's service account.
pub fn replica(stage: &Stage, gateway_admin_port: u16, name: &str) -> std::process::Child {
    let selector = format!("app.kubernetes.io/instance={},app.kubernetes.io/component=gateway", stage.release);
    logging(&mut Command::new(operator_binary()), stage, name)
        .args(["run", "--namespace", &stage.namespace, "--config-map", &config_map(stage)])
        .args(["--gateway-selector", &selector, "--gateway-admin-port", &gateway_admin_port.to_string()])
        .args(["--lease-name", &format!("{}-operator", stage.fullname()), "--identity", name])
        .args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
        .env("KUBECONFIG", stage.operator_kubeconfig())
        .env("RUST_LOG", "info")
        .spawn()
        .unwrap()
}

/// `command` logging (stdout and stderr) into the stage's `<name>.log`.
fn logging<'c>(command: &'c mut Command, stage: &Stage, name: &str) -> &'c mut Command {
    let file = std::fs::File::create(stage.dir.join(format!("{name}.log"))).unwrap();
    command.stdout(file.try_clone().unwrap()).stderr(file)
}

/// What a process of the stage logged.
pub fn logged(stage: &Stage, name: &str) -> String {
    std::fs::read_to_string(stage.dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// No request of the chart's service accounts was refused.
pub fn nothing_forbidden(stage: &Stage, names: &[&str]) {
    for name in names {
        let text = logged(stage, name);
        assert!(!text.to_lowercase().contains("forbidden"), "{name} was refused a request by RBAC:\n{text}");
    }
}

/// A UDP port `udp-rx` on the stage's node.
pub fn port(stage: &Stage, local_port: u16) -> Value {
    json!({"apiVersion": "daqiri.nvidia.com/v1alpha1", "kind": "DaqiriPort", "metadata": {"name": "udp-rx"},
        "spec": {"nodeSelector": {"daqiri-e2e-stage": stage.namespace}, "backend": "socket",
                 "socket": {"mode": "server", "localAddr": format!("udp://127.0.0.1:{local_port}")},
                 "memoryRegions": [{"name": "rx", "kind": "host", "numBufs": 1024, "bufSize": 2048}],
                 "rxQueues": [{"name": "q0", "id": 0, "cpuCore": 0, "batchSize": 32, "memoryRegions": ["rx"]}]}})
}

/// A flow of `udp-rx` to its queue 0.
pub fn flow(name: &str, id: u32, sources: &str) -> Value {
    json!({"apiVersion": "daqiri.nvidia.com/v1alpha1", "kind": "DaqiriFlow", "metadata": {"name": name},
        "spec": {"port": "udp-rx", "id": id, "match": {"udpSrc": sources}, "queue": 0}})
}

/// The flow `name` once it is Ready with its config applied.
pub async fn configured(flows: &Api<DynamicObject>, name: &str) -> Option<Value> {
    let flow = serde_json::to_value(flows.get(name).await.ok()?).ok()?;
    (ready_reason(&flow).as_deref() == Some("ConfigApplied")).then_some(flow)
}

async fn running_captures(admin_port: u16) -> Option<Vec<String>> {
    let list: Vec<Value> =
        reqwest::get(format!("http://127.0.0.1:{admin_port}/api/v1/captures")).await.ok()?.json().await.ok()?;
    Some(list.iter().filter(|c| c["state"] == "running").filter_map(|c| Some(c["name"].as_str()?.to_owned())).collect())
}

pub async fn scenario(stage: Stage) {
    let deployment = deploy(&stage, &["replica-a"]).await;
    let ports = stage.api("DaqiriPort");
    let flows = stage.api("DaqiriFlow");
    let states = stage.api("DaqiriNodeState");
    let create = PostParams::default();
    ports.create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap()).await.unwrap();
    flows.create(&create, &serde_json::from_value(flow("adc-a", 10, "10000-10049")).unwrap()).await.unwrap();

    let flow_ready =
        until(Duration::from_secs(60), "the flow is Ready", async || configured(&flows, "adc-a").await).await;
    assert_eq!(flow_ready["metadata"]["finalizers"], json!(["daqiri.nvidia.com/gateway-config"]));
    assert_eq!(flow_ready["metadata"]["ownerReferences"][0]["name"], "udp-rx");
    let config_maps: Api<ConfigMap> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let node_config = format!("{}-{}", deployment.config_map, deployment.node);
    let config_map = config_maps.get(&node_config).await.unwrap();
    let rendered = config_map.data.unwrap_or_default().remove("config.yaml").unwrap_or_default();
    assert!(rendered.contains("id: 10"), "{rendered}");
    let config_file = stage.dir.join("config.yaml");
    until(Duration::from_secs(30), "the agent wrote the config", async || {
        std::fs::read_to_string(&config_file).ok().filter(|t| *t == rendered)
    })
    .await;
    let admin = format!("http://127.0.0.1:{}", deployment.admin_port);
    let gateway: Value = reqwest::get(format!("{admin}/api/v1/status")).await.unwrap().json().await.unwrap();
    assert_eq!(gateway["engine"], "running", "{gateway}");
    let state = serde_json::to_value(states.get(&deployment.node).await.unwrap()).unwrap();
    assert_eq!(state["status"]["engineState"], "running", "{state}");
    assert_eq!(state["status"]["appliedSha256"], state["status"]["renderedSha256"]);
    let events: Api<Event> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let about = |name: &str| {
        events.iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)).count()
    };
    assert_eq!((about("udp-rx"), about("adc-a")), (1, 1), "one Ready event each");

    field_ownership(&config_maps, &node_config, &rendered).await;
    standing_captures(&flows, deployment.admin_port).await;

    // Deleting the port: the garbage collector deletes the flow it owns, and
    // each goes once the operator has rendered it out and dropped its finalizer.
    ports.delete("udp-rx", &DeleteParams::foreground()).await.unwrap();
    until(Duration::from_secs(60), "the port and its flow are gone", async || {
        (ports.get_opt("udp-rx").await.ok()?.is_none() && flows.get_opt("adc-a").await.ok()?.is_none()).then_some(())
    })
    .await;
    // With no port left on the node, its ConfigMap goes too.
    assert!(config_maps.get_opt(&node_config).await.unwrap().is_none());
    nothing_forbidden(&stage, &["replica-a", "node-config"]);
    drop(deployment);
}

/// Server-side apply: a second field manager cannot take the operator's
/// config without force (409 naming the owner), and a forced change is put
/// back by the operator's next pass.
async fn field_ownership(config_maps: &Api<ConfigMap>, name: &str, rendered: &str) {
    let intruder = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                          "data": {"config.yaml": "interfaces: []\n"}});
    let refused = config_maps.patch(name, &PatchParams::apply("e2e-intruder"), &Patch::Apply(&intruder)).await;
    match refused {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 409, "{e:?}");
            assert!(e.message.contains("daqiri-operator"), "the conflict names the operator: {}", e.message);
        }
        other => panic!("a second manager took the operator's config without force: {other:?}"),
    }
    config_maps.patch(name, &PatchParams::apply("e2e-intruder").force(), &Patch::Apply(&intruder)).await.unwrap();
    until(Duration::from_secs(30), "the operator puts its config back", async || {
        let data = config_maps.get(name).await.ok()?.data?;
        (data.get("config.yaml").map(String::as_str) == Some(rendered)).then_some(())
    })
    .await;
}

/// A flow's `capture` starts a capture; removing it stops it; putting it back
/// starts a second one (a name of its own); deleting the flow stops that.
async fn standing_captures(flows: &Api<kube::api::DynamicObject>, admin_port: u16) {
    let capture = json!({"spec": {"capture": {"format": "pcap", "snaplen": 128}}});
    let drop_capture = json!({"spec": {"capture": null}});
    let merge = PatchParams::default();
    flows.patch("adc-a", &merge, &Patch::Merge(&capture)).await.unwrap();
    let first =
        until(Duration::from_secs(60), "the flow's capture runs", async || running_captures(admin_port).await?.pop())
            .await;
    assert!(first.starts_with("operator.flow-adc-a_"), "{first}");
    flows.patch("adc-a", &merge, &Patch::Merge(&drop_capture)).await.unwrap();
    until(Duration::from_secs(60), "the capture stops with its field", async || {
        running_captures(admin_port).await?.is_empty().then_some(())
    })
    .await;
    flows.patch("adc-a", &merge, &Patch::Merge(&capture)).await.unwrap();
    let second =
        until(Duration::from_secs(60), "a second capture runs", async || running_captures(admin_port).await?.pop())
            .await;
    assert_ne!(first, second, "a capture's name is never reused");
    flows.patch("adc-a", &merge, &Patch::Merge(&drop_capture)).await.unwrap();
    until(Duration::from_secs(60), "the second capture stops", async || {
        running_captures(admin_port).await?.is_empty().then_some(())
    })
    .await;
}
