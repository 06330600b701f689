//! What every cluster test stands on: the admin's client, the workspace's
//! binaries and tools, and a stage (a namespace of its own with the chart's
//! RBAC, and tokens for the chart's service accounts) that is taken down
//! however the scenario ends.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

pub use super::tools::tool;

/// The admin's kubeconfig, which `tests/k8s/control-plane.sh start` wrote.
pub fn admin_kubeconfig() -> PathBuf {
    PathBuf::from(std::env::var("DAQIRI_TEST_KUBECONFIG").expect("DAQIRI_TEST_KUBECONFIG names a kubeconfig"))
}

/// A client acting as whoever `kubeconfig` names.
pub async fn client_of(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig names a usable context");
    kube::Client::try_from(config).expect("a client for the cluster")
}

/// A binary of this workspace, beside the operator Cargo built for this test
/// (so `CARGO_TARGET_DIR` and the profile are honoured).
pub fn workspace_binary(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_daqiri-operator")).with_file_name(name);
    assert!(path.exists(), "{} is missing: `cargo build --workspace` builds it", path.display());
    path
}

/// The operator binary under test.
pub fn operator_binary() -> &'static str {
    env!("CARGO_BIN_EXE_daqiri-operator")
}

/// The chart's directory.
pub fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/daqiri-gateway")
}

/// Runs `command`, feeding it `stdin`; panics with what it printed if it fails.
pub fn run(command: &mut Command, stdin: &str) -> String {
    let out = output(command, stdin);
    assert!(out.status.success(), "{command:?} failed:\n{}{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// Runs `command`, feeding it `stdin`.
pub fn output(command: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// kubectl as whoever `kubeconfig` names.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = tool("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig).args(args);
    command
}

/// Child processes killed (SIGKILL) when the test ends, however it ends.
#[derive(Default)]
pub struct Processes(pub Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback TCP port free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Polls `check` every 250 ms until it gives a value; fails after `limit`.
pub async fn until<T>(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The reason of an object's Ready condition.
pub fn ready_reason(object: &Value) -> Option<String> {
    condition(object, "Ready")?["reason"].as_str().map(str::to_owned)
}

/// One condition of an object's status.
pub fn condition<'v>(object: &'v Value, kind: &str) -> Option<&'v Value> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
}

/// One of our custom resources' API.
pub fn api_resource(kind: &str) -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("daqiri.nvidia.com", "v1alpha1", kind);
    kube::api::ApiResource::from_gvk(&gvk)
}

/// A scenario's namespace with the chart's RBAC applied in it as the release
/// `release`, and kubeconfigs for the chart's service accounts.
#[derive(Clone)]
pub struct Stage {
    /// The admin's kubeconfig and client.
    pub admin: PathBuf,
    pub client: kube::Client,
    pub namespace: String,
    pub release: String,
    /// A scratch directory, removed at the end.
    pub dir: PathBuf,
}

const CRD_KINDS: [&str; 3] = ["DaqiriFlow", "DaqiriPort", "DaqiriNodeState"];

impl Stage {
    /// The chart's name for an object of this release (`daqiri.fullname`).
    pub fn fullname(&self) -> String {
        format!("{}-daqiri-gateway", self.release)
    }

    /// A kubeconfig acting as the chart's service account `account` (a
    /// token from the TokenRequest API, signed by the API server).
    pub fn service_account_kubeconfig(&self, account: &str) -> PathBuf {
        let token = run(&mut self.kubectl(&["create", "token", account, "-n", &self.namespace, "--duration=2h"]), "");
        let admin = std::fs::read_to_string(&self.admin).unwrap();
        let mut config: serde_yaml::Value = serde_yaml::from_str(&admin).unwrap();
        config["users"][0]["user"] = serde_yaml::to_value(json!({"token": token.trim()})).unwrap();
        let path = self.dir.join(format!("{account}.kubeconfig"));
        std::fs::write(&path, serde_yaml::to_string(&config).unwrap()).unwrap();
        path
    }

    /// kubectl as the admin, with a discovery cache of the stage's own (a
    /// shared one outlives API server restarts that other tests make).
    pub fn kubectl(&self, args: &[&str]) -> Command {
        let mut command = kubectl(&self.admin, &["--cache-dir"]);
        command.arg(self.dir.join("kube-cache")).args(args);
        command
    }

    /// The operator's own kubeconfig, as its pod would have it.
    pub fn operator_kubeconfig(&self) -> PathBuf {
        self.service_account_kubeconfig(&format!("{}-operator", self.fullname()))
    }

    /// The gateway's (its node-config agent's) kubeconfig.
    pub fn gateway_kubeconfig(&self) -> PathBuf {
        self.service_account_kubeconfig(&format!("{}-gateway", self.fullname()))
    }

    /// A custom resource API in this namespace.
    pub fn api(&self, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &api_resource(kind))
    }

    /// A Node object for this stage (no kubelet runs it), removed at the end.
    pub async fn node(&self, name: &str) {
        let node =
            json!({"metadata": {"name": name, "labels": {"daqiri-e2e": "true", "daqiri-e2e-stage": self.namespace}}});
        Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), &serde_json::from_value(node).unwrap())
            .await
            .unwrap();
    }
}

/// Runs `scenario` on a fresh stage named after `tag`, then takes the stage
/// down however the scenario ended (a passing one also fails if its
/// namespace is left Terminating); a scenario's panic is raised again after.
pub async fn on_stage<F>(tag: &str, with_rbac: bool, scenario: impl FnOnce(Stage) -> F)
where
    F: Future<Output = ()>,
{
    on_stage_of(&admin_kubeconfig(), tag, with_rbac, scenario).await;
}

/// [`on_stage`] on the cluster `admin` (a kubeconfig) names.
pub async fn on_stage_of<F>(admin: &Path, tag: &str, with_rbac: bool, scenario: impl FnOnce(Stage) -> F)
where
    F: Future<Output = ()>,
{
    let stage = Stage::open(admin, tag, with_rbac).await;
    // Caught, not spawned: the scenarios' async closures are not provably Send.
    let outcome = AssertUnwindSafe(scenario(stage.clone())).catch_unwind().await;
    let namespace_gone = stage.take_down().await;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&stage.dir);
    } else {
        eprintln!("the stage's logs are kept in {}", stage.dir.display());
    }
    match outcome {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(()) => assert!(namespace_gone, "namespace {} still there 120 s after its deletion", stage.namespace),
    }
}

impl Stage {
    /// A fresh namespace named after `tag`, with the CRDs applied and, with
    /// `with_rbac`, the chart's RBAC for the operator and the gateway.
    async fn open(admin: &Path, tag: &str, with_rbac: bool) -> Self {
        let client = client_of(admin).await;
        let release = format!("e2e-{tag}-{}", std::process::id());
        let dir = std::env::temp_dir().join(&release);
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new(operator_binary()).arg("apply-crds").env("KUBECONFIG", admin).status().unwrap();
        assert!(status.success(), "apply-crds failed");
        let namespace = json!({"metadata": {"name": release}});
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &serde_json::from_value(namespace).unwrap())
            .await
            .unwrap();
        // Pods are admitted once the namespace has its `default` service
        // account, which the controller manager adds.
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &release);
        until(Duration::from_secs(60), "the namespace's default service account", async || {
            accounts.get_opt("default").await.ok()?.map(|_| ())
        })
        .await;
        let stage = Stage { admin: admin.to_owned(), client, namespace: release.clone(), release, dir };
        if with_rbac {
            let mut template = tool("helm");
            template.args(["template", &stage.release]).arg(chart()).args(["--namespace", &stage.namespace]);
            template.args([
                "--show-only",
                "templates/operator-rbac.yaml",
                "--show-only",
                "templates/gateway-service.yaml",
            ]);
            let rendered = run(&mut template, "");
            run(&mut stage.kubectl(&["apply", "-n", &stage.namespace, "-f", "-"]), &rendered);
        }
        stage
    }

    /// Removes what the stage made: its resources' finalizers (left by an
    /// operator the scenario stopped early), its pods, the namespace, the
    /// chart's cluster-wide RBAC and its nodes. Whether the namespace went
    /// within 120 s.
    async fn take_down(&self) -> bool {
        for kind in CRD_KINDS {
            let api = self.api(kind);
            for object in api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
                let name = object.metadata.name.clone().unwrap_or_default();
                let strip = json!({"metadata": {"finalizers": null}});
                let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&strip)).await;
            }
        }
        // No kubelet confirms a pod's end: delete the stage's pods at once, as it would.
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        let _ = pods.delete_collection(&now, &ListParams::default()).await;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces.delete(&self.namespace, &DeleteParams::default()).await;
        let deleting = Instant::now();
        let mut gone = false;
        while deleting.elapsed() < Duration::from_secs(120) && !gone {
            gone = matches!(namespaces.get_opt(&self.namespace).await, Ok(None));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let label = format!("app.kubernetes.io/instance={}", self.release);
        let _ = self.kubectl(&["delete", "clusterrole,clusterrolebinding", "-l", &label, "--wait=false"]).output();
        let ours = ListParams::default().labels(&format!("daqiri-e2e-stage={}", self.namespace));
        let _ = Api::<Node>::all(self.client.clone()).delete_collection(&DeleteParams::default(), &ours).await;
        gone
    }
}
