//! A flow the server holds but the operator cannot read (stored under an
//! older schema, before `spec.id` had its bound: the test writes it into
//! etcd as such a server would have) is marked Degraded alone; the rest of
//! the namespace is still configured, and deleting it completes.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use super::configure::{deploy, flow, nothing_forbidden, port};
use super::harness::{Stage, condition, free_port, ready_reason, until};

/// The etcd of `tests/k8s/control-plane.sh`, beside the kubeconfig it wrote.
pub fn etcd(stage: &Stage) -> String {
    let file = stage.admin.with_file_name("etcd.url");
    let url = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!("{}: {e}; this test writes into the store of tests/k8s/control-plane.sh's cluster", file.display())
    });
    url.trim().to_owned()
}

/// Rewrites a stored object through etcd's JSON gateway.
pub async fn rewrite_stored(stage: &Stage, key: &str, change: impl FnOnce(&mut Value)) {
    let http = reqwest::Client::new();
    let url = etcd(stage);
    let range: Value = http
        .post(format!("{url}/v3/kv/range"))
        .json(&json!({"key": STANDARD.encode(key)}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stored = STANDARD.decode(range["kvs"][0]["value"].as_str().expect("the object is stored")).unwrap();
    let mut object: Value = serde_json::from_slice(&stored).unwrap();
    change(&mut object);
    let value = STANDARD.encode(serde_json::to_vec(&object).unwrap());
    let put = http.post(format!("{url}/v3/kv/put")).json(&json!({"key": STANDARD.encode(key), "value": value}));
    assert!(put.send().await.unwrap().status().is_success());
}

pub async fn scenario(stage: Stage) {
    let deployment = deploy(&stage, &["replica-a"]).await;
    let flows = stage.api("DaqiriFlow");
    let create = PostParams::default();
    stage.api("DaqiriPort").create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap()).await.unwrap();
    for (name, id, sources) in [("adc-a", 10, "10000-10049"), ("adc-b", 11, "10050-10099")] {
        flows.create(&create, &serde_json::from_value(flow(name, id, sources)).unwrap()).await.unwrap();
    }
    let ready = async |name: &str| {
        let flow = serde_json::to_value(flows.get(name).await.ok()?).ok()?;
        (ready_reason(&flow).as_deref() == Some("ConfigApplied")).then_some(())
    };
    until(Duration::from_secs(60), "both flows are Ready", async || {
        ready("adc-a").await?;
        ready("adc-b").await
    })
    .await;

    let key = format!("/registry/daqiri.nvidia.com/daqiriflows/{}/adc-b", stage.namespace);
    // As that server would have written a spec change: with the next generation.
    rewrite_stored(&stage, &key, |flow| {
        flow["spec"]["id"] = json!(4_294_967_296_u64);
        flow["metadata"]["generation"] = json!(flow["metadata"]["generation"].as_i64().unwrap() + 1);
    })
    .await;
    let degraded = until(Duration::from_secs(60), "the unreadable flow is Degraded", async || {
        let flow = serde_json::to_value(flows.get("adc-b").await.ok()?).ok()?;
        let degraded = condition(&flow, "Degraded")?.clone();
        (degraded["reason"] == "Undecodable").then_some(degraded)
    })
    .await;
    assert!(degraded["message"].as_str().unwrap().contains("spec.id"), "{degraded}");

    // The namespace is not halted: a new flow is configured, the unreadable one left out.
    flows.create(&create, &serde_json::from_value(flow("adc-c", 12, "10100-10149")).unwrap()).await.unwrap();
    until(Duration::from_secs(60), "a new flow is Ready beside it", async || ready("adc-c").await).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let node_config = format!("{}-config-{}", stage.fullname(), deployment.node);
    let data = config_maps.get(&node_config).await.unwrap().data.unwrap_or_default();
    let rendered = &data["config.yaml"];
    assert!(rendered.contains("id: 10") && rendered.contains("id: 12"), "{rendered}");
    assert!(!rendered.contains("id: 11") && !rendered.contains("4294967296"), "{rendered}");

    flows.delete("adc-b", &DeleteParams::default()).await.unwrap();
    until(Duration::from_secs(60), "the unreadable flow is deleted", async || {
        flows.get_opt("adc-b").await.ok()?.is_none().then_some(())
    })
    .await;
    nothing_forbidden(&stage, &["replica-a", "node-config"]);
}
