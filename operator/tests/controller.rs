//! The controller against an in-memory API server that holds objects across
//! calls and serves watches (`common/fake_api.rs`), and a recording stand-in
//! for the gateways' admin API on loopback (the gateway's own API is tested
//! in its crate). The whole controller runs: watches, the coalescing worker,
//! the passes.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::fake_api::FakeApi;
use daqiri_operator::controller::{self, Context, Error, FINALIZER, Metrics, Options};
use daqiri_operator::gateway::GatewayClient;
use http::Method;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples");
const PORTS: &str = "/apis/daqiri.nvidia.com/v1alpha1/namespaces/default/daqiriports";
const FLOWS: &str = "/apis/daqiri.nvidia.com/v1alpha1/namespaces/default/daqiriflows";
const STATES: &str = "/apis/daqiri.nvidia.com/v1alpha1/namespaces/default/daqirinodestates";
const NODES: &str = "/api/v1/nodes";
const PODS: &str = "/api/v1/namespaces/default/pods";
const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";
const NODE_1_CONFIG: &str = "daqiri-gateway-config-node-1";

fn sample(file: &str, index: usize) -> Value {
    let text = std::fs::read_to_string(format!("{SAMPLES}/{file}")).unwrap();
    serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).nth(index).unwrap()
}

fn node(name: &str, allocatable: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "status": {"allocatable": allocatable, "capacity": allocatable}})
}

fn gateway_pod(node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("gateway-{node}"), "labels": {"app.kubernetes.io/component": "gateway"}},
           "spec": {"nodeName": node, "containers": [{"name": "gateway"}]},
           "status": {"phase": "Running", "podIP": "127.0.0.1"}})
}

/// A stand-in for the gateways' admin API: records the configs it is sent
/// and answers with their SHA-256 and a generation that, as the gateway's,
/// moves only when the config changes.
#[derive(Clone, Default)]
struct Gateway {
    configs: Arc<Mutex<Vec<String>>>,
    /// Captures as the gateway lists them: id, name, state.
    captures: Arc<Mutex<Vec<Value>>>,
}

impl Gateway {
    async fn serve(&self) -> u16 {
        use axum::routing::{delete, get, put};
        let configs = Arc::clone(&self.configs);
        let (listed, started, stopped) =
            (Arc::clone(&self.captures), Arc::clone(&self.captures), Arc::clone(&self.captures));
        let app = axum::Router::new()
            .route(
                "/api/v1/config",
                put(move |body: String| async move {
                    let sha = daqiri_operator::render::sha256_hex(&body);
                    let mut configs = configs.lock().unwrap();
                    let change = if configs.last() == Some(&body) { "unchanged" } else { "restart" };
                    configs.push(body);
                    let generation = configs.windows(2).filter(|w| w[0] != w[1]).count() + 1;
                    axum::Json(json!({"generation": generation, "sha256": sha, "change": change}))
                }),
            )
            .route("/api/v1/status", get(|| async { axum::Json(json!({"engine": "running"})) }))
            .route("/api/v1/stats", get(|| async { axum::Json(json!({"interfaces": []})) }))
            .route(
                "/api/v1/captures",
                get(move || async move { axum::Json(json!(*listed.lock().unwrap())) }).post(
                    move |axum::Json(request): axum::Json<Value>| async move {
                        let mut captures = started.lock().unwrap();
                        let capture = json!({"id": captures.len() + 1, "name": request["name"], "state": "running"});
                        captures.push(capture.clone());
                        axum::Json(capture)
                    },
                ),
            )
            .route(
                "/api/v1/captures/{id}",
                delete(move |axum::extract::Path(id): axum::extract::Path<u64>| async move {
                    let mut captures = stopped.lock().unwrap();
                    let capture = captures.iter_mut().find(|c| c["id"] == id).expect("a capture the gateway started");
                    capture["state"] = json!("finished");
                    axum::Json(capture.clone())
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        port
    }

    fn received(&self) -> Vec<String> {
        self.configs.lock().unwrap().clone()
    }

    /// Names of the running captures.
    fn running(&self) -> Vec<String> {
        let captures = self.captures.lock().unwrap();
        captures.iter().filter(|c| c["state"] == "running").map(|c| c["name"].as_str().unwrap().to_owned()).collect()
    }
}

struct Harness {
    api: FakeApi,
    gateway: Gateway,
    ctx: Arc<Context>,
}

async fn harness() -> Harness {
    let api = FakeApi::new();
    let gateway = Gateway::default();
    let port = gateway.serve().await;
    let client = api.client();
    let reporter = Reporter { controller: "daqiri-operator".into(), instance: None };
    let ctx = Arc::new(Context::new(
        client.clone(),
        "default".into(),
        Options {
            config_map: "daqiri-gateway-config".into(),
            gateway_selector: "app.kubernetes.io/component=gateway".into(),
        },
        GatewayClient::new(port, None),
        Recorder::new(client, reporter),
        Metrics::default(),
    ));
    Harness { api, gateway, ctx }
}

impl Harness {
    /// Runs the whole controller (watches and worker) in the background.
    fn start(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(controller::run(Arc::clone(&self.ctx)))
    }

    fn condition(&self, collection: &str, name: &str, kind: &str) -> Option<Value> {
        let object = self.api.get(collection, name)?;
        object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind).cloned()
    }

    fn reason(&self, collection: &str, name: &str) -> Option<String> {
        self.condition(collection, name, "Ready").and_then(|c| c["reason"].as_str().map(str::to_owned))
    }

    /// Waits until `done` holds, up to `limit`; returns how long it took.
    async fn until(&self, limit: Duration, what: &str, done: impl Fn(&Self) -> bool) -> Duration {
        let started = Instant::now();
        while !done(self) {
            assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        started.elapsed()
    }

    /// Waits until no pass has run for a while (the worker is idle).
    async fn settle(&self) -> u64 {
        let mut passes = self.ctx.metrics.passes();
        loop {
            tokio::time::sleep(Duration::from_millis(800)).await;
            let now = self.ctx.metrics.passes();
            if now == passes {
                return now;
            }
            passes = now;
        }
    }

    fn events_about(&self, name: &str) -> Vec<Value> {
        self.api
            .calls(&Method::POST, EVENTS)
            .into_iter()
            .map(|c| c.body)
            .filter(|b| b["regarding"]["name"] == name)
            .collect()
    }

    fn node_config(&self) -> String {
        let cm = self.api.get(CONFIG_MAPS, NODE_1_CONFIG).expect("node-1's ConfigMap exists");
        cm["data"]["config.yaml"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn a_burst_of_ten_changes_runs_one_pass_and_publishes_each_event_once() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PODS, gateway_pod("node-1"));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    let controller = h.start();
    h.until(Duration::from_secs(10), "port ready", |h| h.reason(PORTS, "udp-rx").as_deref() == Some("ConfigApplied"))
        .await;
    let (passes, configs) = (h.settle().await, h.gateway.received().len());

    for i in 0..10 {
        let mut flow = sample("flows.yaml", 0);
        flow["metadata"]["name"] = json!(format!("adc-{i}"));
        flow["spec"]["id"] = json!(100 + i);
        flow["spec"]["match"] = json!({"udpSrc": (20000 + i).to_string()});
        h.api.put(FLOWS, flow);
    }
    h.until(Duration::from_secs(10), "all ten flows ready", |h| {
        (0..10).all(|i| h.reason(FLOWS, &format!("adc-{i}")).as_deref() == Some("ConfigApplied"))
    })
    .await;
    let after = h.settle().await;
    assert_eq!(after - passes, 1, "ten changes in a burst make one pass");
    assert_eq!(h.gateway.received().len() - configs, 1, "and one config push");
    let config = h.gateway.received().last().unwrap().clone();
    assert_eq!(config.matches("id: 10").count(), 10, "the pushed config has all ten flows:\n{config}");
    assert_eq!(config, h.node_config(), "the node's ConfigMap holds what was pushed");
    for i in 0..10 {
        let events = h.events_about(&format!("adc-{i}"));
        assert_eq!(events.len(), 1, "one Ready event per flow: {events:?}");
        assert_eq!(events[0]["reason"], "ConfigApplied");
        let flow = h.api.get(FLOWS, &format!("adc-{i}")).unwrap();
        assert_eq!(flow["metadata"]["finalizers"], json!([FINALIZER]));
        assert_eq!(flow["metadata"]["ownerReferences"][0]["name"], "udp-rx");
    }
    controller.abort();
}

#[tokio::test]
async fn a_stale_pass_cannot_overwrite_a_newer_status() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    // Another writer changes the port's status between this pass's read and its write.
    let newer = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "WrittenByANewerPass",
        "message": "newer", "lastTransitionTime": "2026-11-23T00:00:00Z"}]}});
    h.api.interfere_before(Method::PATCH, "/daqiriports/udp-rx/status", newer);
    let result = controller::sync(&h.ctx).await;
    assert!(matches!(result, Err(Error::Conflict(ref what)) if what.contains("udp-rx")), "{result:?}");
    assert_eq!(h.reason(PORTS, "udp-rx").as_deref(), Some("WrittenByANewerPass"), "the stale write lost");
    assert!(h.events_about("udp-rx").is_empty(), "no event for a status that was not written");

    // The worker reruns a pass that met a conflict at once, on fresh data.
    h.api.interfere_before(Method::PATCH, "/daqiriports/udp-rx/status", json!({"metadata": {"labels": {"x": "y"}}}));
    let controller = h.start();
    h.until(Duration::from_secs(10), "the rerun pass wins", |h| {
        h.reason(PORTS, "udp-rx").as_deref() == Some("GatewayNotFound")
    })
    .await;
    assert!(h.ctx.metrics.render().contains("daqiri_operator_sync_errors_total{cause=\"conflict\"} 1"));
    let progressing = h.condition(PORTS, "udp-rx", "Progressing").unwrap();
    assert_eq!((&progressing["status"], &progressing["reason"]), (&json!("True"), &json!("WaitingForGateway")));
    assert_eq!(h.condition(PORTS, "udp-rx", "Degraded").unwrap()["status"], "False");
    controller.abort();
}

#[tokio::test]
async fn a_new_gateway_pod_is_configured_without_waiting_for_the_resync() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    let controller = h.start();
    h.until(Duration::from_secs(10), "waiting for a gateway", |h| {
        h.reason(PORTS, "udp-rx").as_deref() == Some("GatewayNotFound")
    })
    .await;
    h.settle().await;
    assert!(h.gateway.received().is_empty());
    let state = h.api.get(STATES, "node-1").expect("node-1 has a DaqiriNodeState");
    assert_eq!(state["status"]["engineState"], "NoGateway");

    h.api.put(PODS, gateway_pod("node-1"));
    let took = h
        .until(Duration::from_secs(10), "the new gateway configured", |h| {
            h.reason(PORTS, "udp-rx").as_deref() == Some("ConfigApplied")
        })
        .await;
    assert!(took < controller::worker::RESYNC / 10, "took {took:?}");
    assert_eq!(h.gateway.received(), vec![h.node_config()]);
    // The node's state is written after the port's condition: wait for it
    // too (a loaded machine showed the port's first).
    h.until(Duration::from_secs(10), "the node state updated", |h| {
        h.api.get(STATES, "node-1").is_some_and(|s| s["status"]["engineState"] == "running")
    })
    .await;
    let state = h.api.get(STATES, "node-1").unwrap();
    assert_eq!(
        (&state["status"]["engineState"], &state["status"]["gatewayPod"], &state["status"]["ports"]),
        (&json!("running"), &json!("gateway-node-1"), &json!(["udp-rx"]))
    );
    assert_eq!(state["status"]["appliedSha256"], state["status"]["renderedSha256"]);
    assert_eq!(state["metadata"]["ownerReferences"][0]["kind"], "Node");
    controller.abort();
}

#[tokio::test]
async fn a_drifted_config_map_is_repaired_and_a_stale_one_deleted() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    // What a previous version left: one ConfigMap for all nodes.
    h.api.put(
        CONFIG_MAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "daqiri-gateway-config",
               "labels": {"app.kubernetes.io/managed-by": "daqiri-operator"}}, "data": {"node-1.yaml": "x"}}),
    );
    let controller = h.start();
    h.until(Duration::from_secs(10), "node-1's ConfigMap", |h| h.api.get(CONFIG_MAPS, NODE_1_CONFIG).is_some()).await;
    h.settle().await;
    assert!(h.api.get(CONFIG_MAPS, "daqiri-gateway-config").is_none(), "the old shared ConfigMap is gone");
    let rendered = h.node_config();
    h.api.patch(CONFIG_MAPS, NODE_1_CONFIG, &json!({"data": {"config.yaml": "edited by hand"}}));
    h.until(Duration::from_secs(5), "drift repaired", |h| h.node_config() == rendered).await;
    controller.abort();
}

#[tokio::test]
async fn deleting_a_flow_removes_it_from_the_config_then_drops_the_finalizer() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PODS, gateway_pod("node-1"));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    h.api.put(FLOWS, sample("flows.yaml", 0));
    let controller = h.start();
    h.until(Duration::from_secs(10), "flow ready", |h| h.reason(FLOWS, "adc-a").as_deref() == Some("ConfigApplied"))
        .await;
    assert!(h.node_config().contains("id: 10"));
    h.api.delete(FLOWS, "adc-a");
    assert!(h.api.get(FLOWS, "adc-a").is_some(), "the finalizer holds the flow");
    h.until(Duration::from_secs(10), "flow gone", |h| h.api.get(FLOWS, "adc-a").is_none()).await;
    assert!(!h.node_config().contains("id: 10"), "{}", h.node_config());
    assert!(!h.gateway.received().last().unwrap().contains("id: 10"), "the gateway got the config without it");
    controller.abort();
}

#[tokio::test]
async fn a_standing_capture_runs_while_its_flow_has_one_and_starts_again_under_a_new_name() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PODS, gateway_pod("node-1"));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    let with_capture = sample("flows.yaml", 1);
    h.api.put(FLOWS, with_capture.clone());
    let controller = h.start();
    let one_running = |h: &Harness| h.gateway.running().len() == 1;
    h.until(Duration::from_secs(10), "the capture starts", one_running).await;
    let first = h.gateway.running()[0].clone();
    assert!(first.starts_with("operator.flow-adc-b_"), "{first}");

    // The field goes: the capture stops.
    let mut without = h.api.get(FLOWS, "adc-b").unwrap();
    without["spec"].as_object_mut().unwrap().remove("capture");
    h.api.put(FLOWS, without);
    h.until(Duration::from_secs(10), "the capture stops", |h| h.gateway.running().is_empty()).await;

    // It comes back: a new capture, under a name of its own (files are never appended to).
    let mut again = h.api.get(FLOWS, "adc-b").unwrap();
    again["spec"]["capture"] = with_capture["spec"]["capture"].clone();
    h.api.put(FLOWS, again);
    h.until(Duration::from_secs(10), "the capture starts again", one_running).await;
    assert_ne!(h.gateway.running()[0], first);

    // The flow goes: its capture stops.
    h.api.delete(FLOWS, "adc-b");
    h.until(Duration::from_secs(10), "the capture stops with its flow", |h| h.gateway.running().is_empty()).await;
    controller.abort();
}

#[tokio::test]
async fn an_invalid_flow_is_degraded_with_the_validators_path_and_the_rest_runs() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(PODS, gateway_pod("node-1"));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    let mut flow = sample("flows.yaml", 0);
    flow["spec"]["queue"] = json!(9);
    h.api.put(FLOWS, flow);
    h.api.put(FLOWS, sample("flows.yaml", 1));
    controller::sync(&h.ctx).await.unwrap();
    let degraded = h.condition(FLOWS, "adc-a", "Degraded").unwrap();
    assert_eq!((&degraded["status"], &degraded["reason"]), (&json!("True"), &json!("ValidationFailed")));
    let message = degraded["message"].as_str().unwrap();
    assert!(message.contains("daqiri.cfg.interfaces[0].rx.flows[0].action.id"), "{message}");
    assert!(message.contains("valid: 0, 1"), "{message}");
    assert_eq!(h.condition(FLOWS, "adc-a", "Progressing").unwrap()["reason"], "Stalled");
    assert_eq!(h.reason(FLOWS, "adc-b").as_deref(), Some("ConfigApplied"));
    let warning = &h.events_about("adc-a")[0];
    assert_eq!((&warning["type"], &warning["reason"]), (&json!("Warning"), &json!("ValidationFailed")));
    // A second pass over the same state writes nothing and publishes nothing.
    let writes = h.api.calls(&Method::PATCH, "/status").len();
    controller::sync(&h.ctx).await.unwrap();
    let again: Vec<_> =
        h.api.calls(&Method::PATCH, "/status").into_iter().skip(writes).map(|c| (c.path, c.body)).collect();
    assert!(again.is_empty(), "{again:#?}");
    assert_eq!(h.events_about("adc-a").len(), 1);
}

#[tokio::test]
async fn a_port_whose_vf_resource_has_nothing_allocatable_says_so() {
    let h = harness().await;
    let labels = json!({"daqiri.nvidia.com/instrument": "true"});
    let mut n = node("node-1", json!({"nvidia.com/cx7_vf": "0"}));
    n["metadata"]["labels"] = labels;
    h.api.put(NODES, n);
    h.api.put(PORTS, sample("port-sriov-dpdk.yaml", 0));
    controller::sync(&h.ctx).await.unwrap();
    let degraded = h.condition(PORTS, "cx7-vf", "Degraded").unwrap();
    assert_eq!((&degraded["status"], &degraded["reason"]), (&json!("True"), &json!("NoAllocatableVFs")));
    assert!(degraded["message"].as_str().unwrap().contains("node node-1: nvidia.com/cx7_vf has 0 allocatable"));
    let state = h.api.get(STATES, "node-1").unwrap();
    assert_eq!(
        state["status"]["sriovResources"],
        json!([{"resourceName": "nvidia.com/cx7_vf", "capacity": 0, "allocatable": 0}])
    );

    // VFs appear: the node's watch triggers a pass and the shortage is gone.
    let controller = h.start();
    h.api.patch(NODES, "node-1", &json!({"status": {"allocatable": {"nvidia.com/cx7_vf": "4"}}}));
    h.until(Duration::from_secs(10), "VFs seen", |h| {
        h.condition(PORTS, "cx7-vf", "Degraded").is_some_and(|c| c["status"] == "False")
    })
    .await;
    controller.abort();
}

#[tokio::test]
async fn nodes_without_a_config_lose_their_config_map_and_state() {
    let h = harness().await;
    h.api.put(NODES, node("node-1", json!({})));
    h.api.put(NODES, node("node-2", json!({})));
    h.api.put(PORTS, sample("port-socket.yaml", 0));
    controller::sync(&h.ctx).await.unwrap();
    let names = |c: &str| -> Vec<String> {
        h.api.list(c).iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(CONFIG_MAPS), ["daqiri-gateway-config-node-1", "daqiri-gateway-config-node-2"]);
    assert_eq!(names(STATES), ["node-1", "node-2"]);
    h.api.patch(PORTS, "udp-rx", &json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "node-2"}}}));
    controller::sync(&h.ctx).await.unwrap();
    assert_eq!(names(CONFIG_MAPS), ["daqiri-gateway-config-node-2"]);
    assert_eq!(names(STATES), ["node-2"]);
    let sizes: BTreeMap<String, usize> = h
        .api
        .list(CONFIG_MAPS)
        .iter()
        .map(|c| (c["metadata"]["name"].as_str().unwrap().to_owned(), c["data"]["config.yaml"].as_str().unwrap().len()))
        .collect();
    assert!(sizes.values().all(|&s| s < 64 * 1024), "{sizes:?}");
}
