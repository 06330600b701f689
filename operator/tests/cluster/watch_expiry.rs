//! A watch that expires: the API server goes away, a flow changes in the
//! store meanwhile and the store is compacted past it, and the server comes
//! back. The operator's watches resume from a version the store no longer
//! has (410 Gone), list again, and the change is configured: nothing missed.
//! Runs on a control plane of its own, since it stops the API server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::configure::{configured, deploy, flow, logged, port};
use super::etcd::Etcd;
use super::harness::{Stage, free_port, until};

/// A control plane of `tests/k8s/control-plane.sh`, stopped when dropped.
pub struct PrivateControlPlane {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/k8s/control-plane.sh")
}

fn control_plane(verb: &str, dir: &Path) -> String {
    let out = Command::new(script()).arg(verb).arg(dir).output().unwrap();
    assert!(out.status.success(), "control-plane.sh {verb}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl PrivateControlPlane {
    pub fn start(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("control-plane-{tag}-{}", std::process::id()));
        let kubeconfig = PathBuf::from(control_plane("start", &dir));
        Self { dir, kubeconfig }
    }
}

impl Drop for PrivateControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub async fn scenario(stage: Stage, plane: PathBuf) {
    let deployment = deploy(&stage, &["replica-a"]).await;
    let flows = stage.api("DaqiriFlow");
    let create = PostParams::default();
    stage.api("DaqiriPort").create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap()).await.unwrap();
    flows.create(&create, &serde_json::from_value(flow("adc-a", 10, "10000-10049")).unwrap()).await.unwrap();
    until(Duration::from_secs(60), "the flow is Ready", async || configured(&flows, "adc-a").await).await;

    // The leader keeps its lease for 10 s without the server: be back well before.
    control_plane("stop-apiserver", &plane);
    let key = format!("/registry/daqiri.nvidia.com/daqiriflows/{}/adc-a", stage.namespace);
    let store = Etcd::of(&stage);
    store.change_spec(&key, |spec| spec["match"]["udpSrc"] = json!("10200-10249")).await;
    store.compact().await;
    control_plane("start-apiserver", &plane);

    let config_maps: Api<ConfigMap> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let node_config = format!("{}-config-{}", stage.fullname(), deployment.node);
    until(Duration::from_secs(90), "the change made while the server was away is configured", async || {
        let flow = configured(&flows, "adc-a").await?;
        let current = flow["status"]["observedGeneration"] == flow["metadata"]["generation"];
        let data = config_maps.get(&node_config).await.ok()?.data?;
        (current && data["config.yaml"].contains("10200")).then_some(())
    })
    .await;
    let log = logged(&stage, "replica-a");
    assert!(log.contains("410") || log.contains("too old"), "the watches came back to an expired version:\n{log}");
    assert!(!log.contains("exiting"), "the leader kept its lease:\n{log}");
}
