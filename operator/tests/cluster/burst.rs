//! A burst of changes: twenty flows created at once while another writer
//! keeps labelling them. Passes coalesce (the gateway is sent far fewer
//! configs than there were changes, and never refuses one), every flow ends
//! Ready, and none of the other writer's labels is lost: the operator's
//! writes carry the version they read and lose to newer ones.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::configure::{configured, deploy, flow, nothing_forbidden, port};
use super::harness::{Stage, free_port, until};

const FLOWS: u32 = 20;

fn name(i: u32) -> String {
    format!("burst-{i:02}")
}

/// A counter of the gateway's Prometheus text.
async fn gateway_counter(admin_port: u16, metric: &str) -> f64 {
    let text = reqwest::get(format!("http://127.0.0.1:{admin_port}/metrics")).await.unwrap().text().await.unwrap();
    text.lines()
        .find(|line| line.starts_with(metric))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

pub async fn scenario(stage: Stage) {
    let deployment = deploy(&stage, &["replica-a"]).await;
    let flows = stage.api("DaqiriFlow");
    let create = PostParams::default();
    stage.api("DaqiriPort").create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap()).await.unwrap();
    until(Duration::from_secs(60), "the port's config is applied", async || {
        (gateway_counter(deployment.admin_port, "daqiri_config_reloads_total").await >= 1.0).then_some(())
    })
    .await;
    let before = gateway_counter(deployment.admin_port, "daqiri_config_reloads_total").await;

    for i in 0..FLOWS {
        let low = 20_000 + i * 10;
        let flow = flow(&name(i), 100 + i, &format!("{low}-{}", low + 9));
        flows.create(&create, &serde_json::from_value(flow).unwrap()).await.unwrap();
    }
    // Another writer labels every flow, over and over, while the passes run.
    let mut last = BTreeMap::new();
    for round in 0..10 {
        for i in 0..FLOWS {
            let label = json!({"metadata": {"labels": {"e2e-touch": round.to_string()}}});
            flows.patch(&name(i), &PatchParams::default(), &Patch::Merge(&label)).await.unwrap();
            last.insert(name(i), round.to_string());
        }
    }
    let flows_ready = async || {
        for i in 0..FLOWS {
            configured(&flows, &name(i)).await?;
        }
        Some(())
    };
    until(Duration::from_secs(90), "every flow of the burst is Ready", flows_ready).await;
    for (flow, label) in &last {
        let object = flows.get(flow).await.unwrap();
        let labels = object.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("e2e-touch"), Some(label), "{flow}: another writer's label was lost");
        assert_eq!(object.metadata.finalizers.unwrap_or_default(), ["daqiri.nvidia.com/gateway-config"]);
    }
    let configs = gateway_counter(deployment.admin_port, "daqiri_config_reloads_total").await - before;
    let refused = gateway_counter(deployment.admin_port, "daqiri_config_reload_failures_total").await;
    assert!(configs >= 1.0 && configs < f64::from(FLOWS), "{configs} configs sent for {FLOWS} new flows");
    assert_eq!(refused, 0.0, "the gateway refused a config");
    eprintln!("{FLOWS} new flows and {} labels written: {configs} configs sent to the gateway", FLOWS * 10);
    nothing_forbidden(&stage, &["replica-a", "node-config"]);
}
