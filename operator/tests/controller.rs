//! The controller against a mocked API server (tower-test, as kube-rs tests
//! its own controllers): every request it makes is checked in order, with
//! its method, path, query and body. No cluster exists here.

use std::sync::Arc;

use daqiri_operator::controller::{Context, FINALIZER, Metrics, Options, reconcile_flow};
use daqiri_operator::crd::DaqiriFlow;
use daqiri_operator::gateway::GatewayClient;
use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use tower_test::mock::Handle;

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples");
const FLOWS: &str = "/apis/daqiri.nvidia.com/v1alpha1/namespaces/default/daqiriflows";
const PORTS: &str = "/apis/daqiri.nvidia.com/v1alpha1/namespaces/default/daqiriports";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

fn sample(file: &str, index: usize) -> Value {
    let text = std::fs::read_to_string(format!("{SAMPLES}/{file}")).unwrap();
    let mut doc: Value = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .nth(index)
        .unwrap();
    doc["metadata"]["namespace"] = json!("default");
    doc["metadata"]["uid"] = json!(format!("uid-{}", doc["metadata"]["name"].as_str().unwrap()));
    doc["metadata"]["generation"] = json!(1);
    doc
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({ "apiVersion": "v1", "kind": kind, "metadata": { "resourceVersion": "1" }, "items": items })
}

fn context(client: Client) -> Arc<Context> {
    Arc::new(Context {
        client: client.clone(),
        namespace: "default".into(),
        options: Options {
            config_map: "daqiri-gateway-config".into(),
            gateway_selector: "app.kubernetes.io/component=gateway".into(),
        },
        gateway: GatewayClient::new(9464, None),
        recorder: Recorder::new(client, Reporter { controller: "daqiri-operator".into(), instance: None }),
        metrics: Metrics::default(),
    })
}

/// Checks a request's query string and JSON body.
type Check = dyn Fn(&str, &Value) + Send;

/// One expected request: method, path, and a check of query and body; the
/// response to give.
struct Expect {
    method: Method,
    path: String,
    check: Box<Check>,
    respond: Value,
}

fn expect(method: Method, path: &str, respond: Value, check: impl Fn(&str, &Value) + Send + 'static) -> Expect {
    Expect { method, path: path.to_owned(), check: Box::new(check), respond }
}

/// Answers the controller's requests in order, failing on any surprise.
async fn serve(mut handle: Handle<Request<Body>, Response<Body>>, script: Vec<Expect>) {
    for (step, e) in script.into_iter().enumerate() {
        let (request, send) = handle.next_request().await.unwrap_or_else(|| panic!("step {step}: no request"));
        let (query, path) = (request.uri().query().unwrap_or_default().to_owned(), request.uri().path().to_owned());
        assert_eq!((request.method(), path.as_str()), (&e.method, e.path.as_str()), "step {step} ({query})");
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
        (e.check)(&query, &body);
        send.send_response(Response::builder().body(Body::from(serde_json::to_vec(&e.respond).unwrap())).unwrap());
    }
}

fn no_check(_: &str, _: &Value) {}

/// The reads and the ConfigMap apply every sync pass starts with, over one
/// node (`node-1`) and no gateway pods; `check_data` sees the ConfigMap's data.
fn sync_reads(ports: Vec<Value>, flows: Vec<Value>, check_data: impl Fn(&Value) + Send + 'static) -> Vec<Expect> {
    let node = json!({"metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}}});
    vec![
        expect(Method::GET, PORTS, list("DaqiriPortList", ports), no_check),
        expect(Method::GET, FLOWS, list("DaqiriFlowList", flows), no_check),
        expect(Method::GET, "/api/v1/nodes", list("NodeList", vec![node]), no_check),
        expect(
            Method::PATCH,
            "/api/v1/namespaces/default/configmaps/daqiri-gateway-config",
            json!({"metadata": {"name": "daqiri-gateway-config"}}),
            move |query, body| {
                assert!(query.contains("fieldManager=daqiri-operator") && query.contains("force=true"), "{query}");
                check_data(&body["data"]);
            },
        ),
        expect(Method::GET, "/api/v1/namespaces/default/pods", list("PodList", vec![]), |query, _| {
            assert!(query.contains("labelSelector=app.kubernetes.io%2Fcomponent%3Dgateway"), "{query}");
        }),
    ]
}

/// The ownerReferences the operator gives a flow of port `udp-rx`.
fn owned_by_udp_rx() -> Value {
    json!([{"apiVersion": "daqiri.nvidia.com/v1alpha1", "kind": "DaqiriPort", "name": "udp-rx", "uid": "uid-udp-rx"}])
}

#[tokio::test]
async fn a_new_flow_first_gets_the_finalizer_and_nothing_else() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let flow = sample("flows.yaml", 0);
    let mut with_finalizer = flow.clone();
    with_finalizer["metadata"]["finalizers"] = json!([FINALIZER]);
    let script = vec![expect(Method::PATCH, &format!("{FLOWS}/adc-a"), with_finalizer, |_, body| {
        assert_eq!(body[1], json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}), "{body}");
    })];
    let server = tokio::spawn(serve(handle, script));
    let ctx = context(Client::new(service, "default"));
    let flow: DaqiriFlow = serde_json::from_value(flow).unwrap();
    reconcile_flow(Arc::new(flow), ctx).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn a_flow_is_rendered_applied_and_reported() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let port = sample("port-socket.yaml", 0);
    let mut flow = sample("flows.yaml", 0);
    flow["metadata"]["finalizers"] = json!([FINALIZER]);
    let mut owned = flow.clone();
    owned["metadata"]["ownerReferences"] = owned_by_udp_rx();
    let mut script = sync_reads(vec![port.clone()], vec![flow.clone()], |data| {
        let yaml = data["node-1.yaml"].as_str().unwrap();
        let config = daqiri_config::Document::parse(yaml).unwrap().validate().unwrap();
        let iface = &config.config().interfaces[0];
        assert_eq!((iface.name.as_str(), iface.rx.as_ref().unwrap().flows[0].id), ("udp-rx", 10));
    });
    script.extend([
        expect(Method::PATCH, &format!("{PORTS}/udp-rx/status"), port.clone(), |_, body| {
            let ready = &body["status"]["conditions"][0];
            assert_eq!(
                (&ready["type"], &ready["status"], &ready["reason"]),
                (&json!("Ready"), &json!("False"), &json!("GatewayNotFound")),
                "{body}"
            );
            assert_eq!(body["status"]["observedGeneration"], 1);
        }),
        expect(Method::POST, EVENTS, json!({}), |_, body| {
            assert_eq!((&body["reason"], &body["type"]), (&json!("GatewayNotFound"), &json!("Warning")), "{body}");
            assert_eq!(body["regarding"]["name"], "udp-rx");
        }),
        expect(Method::PATCH, &format!("{FLOWS}/adc-a"), owned.clone(), |_, body| {
            let owner = &body["metadata"]["ownerReferences"][0];
            assert_eq!(
                (&owner["kind"], &owner["name"], &owner["uid"]),
                (&json!("DaqiriPort"), &json!("udp-rx"), &json!("uid-udp-rx"))
            );
        }),
        expect(Method::PATCH, &format!("{FLOWS}/adc-a/status"), owned, |_, body| {
            let conditions = body["status"]["conditions"].as_array().unwrap();
            let by_type = |t: &str| conditions.iter().find(|c| c["type"] == t).unwrap().clone();
            assert_eq!(by_type("Ready")["reason"], "GatewayNotFound");
            assert_eq!(by_type("Invalid")["status"], "False");
            assert!(by_type("Applied")["message"].as_str().unwrap().contains("node node-1: no running gateway pod"));
        }),
        expect(Method::POST, EVENTS, json!({}), |_, body| assert_eq!(body["regarding"]["name"], "adc-a")),
    ]);
    let server = tokio::spawn(serve(handle, script));
    let ctx = context(Client::new(service, "default"));
    let flow: DaqiriFlow = serde_json::from_value(flow).unwrap();
    reconcile_flow(Arc::new(flow), Arc::clone(&ctx)).await.unwrap();
    server.await.unwrap();
    assert!(ctx.metrics.render().contains("daqiri_operator_reconciles_total{kind=\"daqiriflow\"} 1"));
}

#[tokio::test]
async fn an_invalid_flow_is_marked_invalid_with_the_validators_path() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let port = sample("port-socket.yaml", 0);
    let mut flow = sample("flows.yaml", 0);
    flow["metadata"]["finalizers"] = json!([FINALIZER]);
    flow["metadata"]["ownerReferences"] = owned_by_udp_rx();
    flow["spec"]["queue"] = json!(9);
    let mut port_ready = port.clone();
    port_ready["status"] = json!({"conditions": [{"type": "Ready", "status": "False", "reason": "GatewayNotFound", "message": "node node-1: no running gateway pod", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]});
    let mut script = sync_reads(vec![port], vec![flow.clone()], |data| {
        let yaml = data["node-1.yaml"].as_str().unwrap();
        assert!(!yaml.contains("adc-a"), "the invalid flow stays out of the config:\n{yaml}");
    });
    script.extend([
        expect(Method::PATCH, &format!("{PORTS}/udp-rx/status"), port_ready, no_check),
        expect(Method::POST, EVENTS, json!({}), no_check),
        expect(Method::PATCH, &format!("{FLOWS}/adc-a/status"), flow.clone(), |_, body| {
            let ready = &body["status"]["conditions"][0];
            assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("ValidationFailed")));
            let message = ready["message"].as_str().unwrap();
            assert!(message.contains("daqiri.cfg.interfaces[0].rx.flows[0].action.id"), "{message}");
            assert!(message.contains("valid: 0, 1"), "{message}");
        }),
        expect(Method::POST, EVENTS, json!({}), |_, body| {
            assert_eq!((&body["type"], &body["reason"]), (&json!("Warning"), &json!("ValidationFailed")));
        }),
    ]);
    let server = tokio::spawn(serve(handle, script));
    let ctx = context(Client::new(service, "default"));
    reconcile_flow(Arc::new(serde_json::from_value::<DaqiriFlow>(flow).unwrap()), ctx).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn deleting_a_flow_removes_it_from_the_config_then_drops_the_finalizer() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let mut port = sample("port-socket.yaml", 0);
    port["status"] = json!({"conditions": [
        {"type": "Ready", "status": "False", "reason": "GatewayNotFound", "message": "node node-1: no running gateway pod", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
        {"type": "Applied", "status": "False", "reason": "GatewayNotFound", "message": "node node-1: no running gateway pod", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
        {"type": "Invalid", "status": "False", "reason": "Valid", "message": "accepted by the gateway's validator", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}
    ], "observedGeneration": 1, "gateways": [{"node": "node-1", "applied": false}]});
    let mut flow = sample("flows.yaml", 1);
    flow["metadata"]["finalizers"] = json!([FINALIZER]);
    flow["metadata"]["deletionTimestamp"] = json!("2026-11-22T00:00:00Z");
    let mut script = sync_reads(vec![port], vec![flow.clone()], |data| {
        let yaml = data["node-1.yaml"].as_str().unwrap();
        assert!(!yaml.contains("adc-b"), "the deleted flow is gone:\n{yaml}");
    });
    script.extend([
        // The port's status is unchanged: no patch, no event. Then the finalizer goes.
        expect(Method::PATCH, &format!("{FLOWS}/adc-b"), flow.clone(), |_, body| {
            assert_eq!(body[1], json!({"op": "remove", "path": "/metadata/finalizers/0"}), "{body}");
        }),
    ]);
    let server = tokio::spawn(serve(handle, script));
    let ctx = context(Client::new(service, "default"));
    reconcile_flow(Arc::new(serde_json::from_value::<DaqiriFlow>(flow).unwrap()), ctx).await.unwrap();
    server.await.unwrap();
}
