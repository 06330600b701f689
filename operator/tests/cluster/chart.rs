//! `helm install`, `helm upgrade` and `helm uninstall` of the chart against
//! the server, with each of its values files: admission validates every
//! object, and the hook Jobs run. No kubelet runs here, so the test stands in
//! for it where the chart needs one: a hook Job's pod is run as a local
//! process (its own command, under its own service account's token) and its
//! phase written back; the Deployment's and DaemonSet's pods stay Pending.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::json;

use super::configure::{flow, logged, port, replica};
use super::harness::{Processes, Stage, chart, free_port, operator_binary, output, run, tool, until};

/// Which of the chart's pods a test process stands in for.
const HOOKS: &str = "app.kubernetes.io/component in (crds, release)";

/// Runs each hook pod of the stage once, as its kubelet would, until aborted.
async fn hook_kubelet(stage: Stage) {
    let pods: Api<Pod> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let mut done = std::collections::HashSet::new();
    loop {
        for pod in pods.list(&ListParams::default().labels(HOOKS)).await.map(|l| l.items).unwrap_or_default() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|p| p == "Pending");
            if !pending || !done.insert(name.clone()) {
                continue;
            }
            let spec = pod.spec.clone().unwrap_or_default();
            let container = &spec.containers[0];
            // Only the operator's own commands are run here; anything else fails the pod (and helm).
            let command = container.command.clone().unwrap_or_default();
            let kubeconfig =
                stage.service_account_kubeconfig(spec.service_account_name.as_deref().unwrap_or("default"));
            let args = container.args.clone().unwrap_or_default();
            let ran = tokio::task::spawn_blocking({
                let log = stage.dir.join(format!("{name}.log"));
                move || {
                    if command != ["daqiri-operator"] {
                        std::fs::write(log, format!("not the operator's command: {command:?}")).unwrap();
                        return -1;
                    }
                    let out = output(Command::new(operator_binary()).args(&args).env("KUBECONFIG", kubeconfig), "");
                    std::fs::write(log, [out.stdout, out.stderr].concat()).unwrap();
                    out.status.code().unwrap_or(-1)
                }
            })
            .await
            .unwrap();
            let phase = if ran == 0 { "Succeeded" } else { "Failed" };
            let terminated = json!({"exitCode": ran, "reason": if ran == 0 { "Completed" } else { "Error" }});
            let status = json!({"status": {"phase": phase, "containerStatuses": [{
                "name": container.name, "image": container.image, "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": terminated}}]}});
            pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// helm `verb` of the stage's release, with a values file of the chart's.
async fn helm(stage: &Stage, verb: &[&str], values: Option<&str>) -> String {
    let mut command = tool("helm");
    command.args(verb).arg(&stage.release);
    if verb[0] != "uninstall" {
        command.arg(chart());
    }
    command.args(["--namespace", &stage.namespace, "--timeout", "3m"]);
    command.arg("--kubeconfig").arg(&stage.admin);
    if let Some(values) = values {
        command.arg("-f").arg(chart().join(values));
    }
    tokio::task::spawn_blocking(move || run(&mut command, "")).await.unwrap()
}

/// The kinds of the objects the chart renders with `values`, hooks left out.
fn kinds_rendered(values: Option<&str>) -> Vec<String> {
    let mut command = tool("helm");
    command.args(["template", "x"]).arg(chart());
    if let Some(values) = values {
        command.arg("-f").arg(chart().join(values));
    }
    let rendered = run(&mut command, "");
    serde_yaml::Deserializer::from_str(&rendered)
        .filter_map(|doc| serde_yaml::Value::deserialize(doc).ok())
        .filter(|doc| doc["metadata"]["annotations"]["helm.sh/hook"].is_null())
        .map(|doc| doc["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Every object the release made, by kind, as the server lists it.
fn installed_kinds(stage: &Stage) -> String {
    run(
        &mut stage.kubectl(&[
            "get",
            "all,configmaps,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,servicemonitors",
            "-n",
            &stage.namespace,
            "-l",
            &format!("app.kubernetes.io/instance={}", stage.release),
            "-o",
            "name",
        ]),
        "",
    )
}

/// Install, upgrade and uninstall with `values`; the namespace is then
/// deleted and must go.
pub async fn scenario(stage: Stage, values: Option<&'static str>) {
    let kubelet = tokio::spawn(hook_kubelet(stage.clone()));
    let installed = helm(&stage, &["install"], values).await;
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    let listed = installed_kinds(&stage);
    for kind in kinds_rendered(values) {
        let resource = match kind.as_str() {
            "ClusterRole" | "ClusterRoleBinding" | "Pod" => continue,
            kind => kind.to_lowercase(),
        };
        let ours = |line: &str| line.split('/').next().and_then(|kind| kind.split('.').next()) == Some(&resource);
        assert!(listed.lines().any(ours), "no {kind} installed: {listed}");
    }
    // The CRD hook labelled the namespace with the gateways' Pod Security level.
    let namespaces: Api<Namespace> = Api::all(stage.client.clone());
    let labels = namespaces.get(&stage.namespace).await.unwrap().metadata.labels.unwrap_or_default();
    let level = labels.get("pod-security.kubernetes.io/enforce");
    let labelled = values != Some("ci/socket-only.yaml"); // podSecurity.labelNamespace: false
    assert_eq!(level.is_some(), labelled, "{labels:?}");
    // The chart's `helm test` pod is admitted (no kubelet here runs it).
    let mut test_pod = tool("helm");
    test_pod.args(["template", &stage.release]).arg(chart()).args(["--namespace", &stage.namespace]);
    test_pod.args(["--show-only", "templates/tests/readyz.yaml"]);
    let test_pod = run(&mut test_pod, "");
    run(&mut stage.kubectl(&["apply", "--dry-run=server", "-n", &stage.namespace, "-f", "-"]), &test_pod);

    let upgraded = helm(&stage, &["upgrade", "--set", "operator.replicas=1"], values).await;
    assert!(upgraded.contains("has been upgraded"), "{upgraded}");

    // An operator (standing in for its pod, as the chart's service account)
    // puts its finalizer on a port and a flow; uninstalling stops it and
    // takes the finalizers off, so the namespace goes.
    let mut operator = Processes::default();
    if values.is_none() {
        operator.0.push(replica(&stage, free_port(), "chart-operator"));
        let create = PostParams::default();
        stage
            .api("DaqiriPort")
            .create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap())
            .await
            .unwrap();
        stage
            .api("DaqiriFlow")
            .create(&create, &serde_json::from_value(flow("adc-a", 10, "10000-10049")).unwrap())
            .await
            .unwrap();
        let flows = stage.api("DaqiriFlow");
        until(Duration::from_secs(60), "the operator puts its finalizer on the flow", async || {
            let flow = flows.get("adc-a").await.ok()?;
            flow.metadata.finalizers.is_some_and(|f| !f.is_empty()).then_some(())
        })
        .await;
    }
    let uninstalled = helm(&stage, &["uninstall", "--wait"], None).await;
    assert!(uninstalled.contains("uninstalled"), "{uninstalled}");
    if let Some(replica) = operator.0.first_mut() {
        let exited = until(Duration::from_secs(10), "the operator stops when the hook takes its lease", async || {
            replica.try_wait().unwrap()
        })
        .await;
        assert!(!exited.success(), "it exits for having lost the lease");
        let log = logged(&stage, "chart-operator");
        assert!(log.contains("another replica holds the lease"), "{log}");
    }
    kubelet.abort();
    // The gateways' and operator's pods went with their owners; none was bound to a node.
    namespaces.delete(&stage.namespace, &DeleteParams::default()).await.unwrap();
    until(Duration::from_secs(60), "the namespace is deleted after uninstall", async || {
        namespaces.get_opt(&stage.namespace).await.ok()?.is_none().then_some(())
    })
    .await;
}
