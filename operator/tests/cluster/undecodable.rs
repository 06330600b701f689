//! A flow the server holds but the operator cannot read (stored under an
//! older schema, before `spec.id` had its bound: the test writes it into
//! etcd as such a server would have) is marked Degraded alone; the rest of
//! the namespace is still configured, and deleting it completes.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::configure::{configured, deploy, flow, nothing_forbidden, port};
use super::etcd::Etcd;
use super::harness::{Stage, condition, free_port, until};

pub async fn scenario(stage: Stage) {
    let deployment = deploy(&stage, &["replica-a"]).await;
    let flows = stage.api("DaqiriFlow");
    let create = PostParams::default();
    stage.api("DaqiriPort").create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap()).await.unwrap();
    for (name, id, sources) in [("adc-a", 10, "10000-10049"), ("adc-b", 11, "10050-10099")] {
        flows.create(&create, &serde_json::from_value(flow(name, id, sources)).unwrap()).await.unwrap();
    }
    until(Duration::from_secs(60), "both flows are Ready", async || {
        configured(&flows, "adc-a").await?;
        configured(&flows, "adc-b").await
    })
    .await;

    let key = format!("/registry/daqiri.nvidia.com/daqiriflows/{}/adc-b", stage.namespace);
    Etcd::of(&stage).change_spec(&key, |spec| spec["id"] = json!(4_294_967_296_u64)).await;
    let degraded = until(Duration::from_secs(60), "the unreadable flow is Degraded", async || {
        let flow = serde_json::to_value(flows.get("adc-b").await.ok()?).ok()?;
        let degraded = condition(&flow, "Degraded")?.clone();
        (degraded["reason"] == "Undecodable").then_some(degraded)
    })
    .await;
    assert!(degraded["message"].as_str().unwrap().contains("spec.id"), "{degraded}");

    // The namespace is not halted: a new flow is configured, the unreadable one left out.
    flows.create(&create, &serde_json::from_value(flow("adc-c", 12, "10100-10149")).unwrap()).await.unwrap();
    until(Duration::from_secs(60), "a new flow is Ready beside it", async || configured(&flows, "adc-c").await).await;
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
