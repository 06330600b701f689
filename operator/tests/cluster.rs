//! End to end against a real Kubernetes API server: the one
//! `tests/k8s/control-plane.sh` builds and starts (kube-apiserver with RBAC,
//! kube-controller-manager, etcd), which `tests/run.sh` names in
//! `DAQIRI_TEST_KUBECONFIG`. Any cluster works whose kubeconfig may create
//! Nodes, Namespaces, CRDs and RBAC (cluster-admin); nothing runs on its
//! nodes: gateways and operators are processes on loopback, and a pod's
//! status is written by the test, as no kubelet runs it.
//!
//! Each test has a namespace of its own with the chart's RBAC, and runs the
//! operator under the chart's service account (a request RBAC refuses fails
//! the test). Every test here ends in `_through_a_real_api_server`, the name
//! tests/run.sh skips them by where no server was started. By hand:
//! `tests/k8s/control-plane.sh start target/k8s/run` prints the kubeconfig;
//! `DAQIRI_TEST_KUBECONFIG=<it> cargo nextest run -p daqiri-operator --test
//! cluster --run-ignored=all`.

#[path = "cluster/burst.rs"]
mod burst;
#[path = "support/cases.rs"]
mod cases;
#[path = "cluster/chart.rs"]
mod chart;
#[path = "cluster/configure.rs"]
mod configure;
#[path = "cluster/etcd.rs"]
mod etcd;
#[path = "cluster/harness.rs"]
mod harness;
#[path = "cluster/leadership.rs"]
mod leadership;
#[path = "cluster/rules.rs"]
mod rules;
#[path = "support/tools.rs"]
mod tools;
#[path = "cluster/undecodable.rs"]
mod undecodable;
#[path = "cluster/watch_expiry.rs"]
mod watch_expiry;

use harness::{on_stage, on_stage_of};

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn the_operator_configures_a_real_gateway_through_a_real_api_server() {
    on_stage("configure", true, configure::scenario).await;
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn the_server_enforces_every_crd_rule_through_a_real_api_server() {
    on_stage("rules", false, rules::scenario).await;
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn a_flow_the_operator_cannot_read_degrades_alone_through_a_real_api_server() {
    on_stage("undecodable", true, undecodable::scenario).await;
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn a_burst_of_changes_coalesces_and_loses_no_other_write_through_a_real_api_server() {
    on_stage("burst", true, burst::scenario).await;
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn leadership_moves_on_sigterm_and_on_sigkill_through_a_real_api_server() {
    on_stage("leader", true, leadership::scenario).await;
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn the_chart_installs_upgrades_and_uninstalls_with_its_defaults_through_a_real_api_server() {
    on_stage("chart", false, |stage| chart::scenario(stage, None)).await;
}

/// One test per values file in charts/daqiri-gateway/ci/ (`<tag>.yaml`),
/// and a test that no file there lacks one.
macro_rules! chart_values {
    ($($test:ident => $tag:literal),* $(,)?) => {
        $(
            #[tokio::test]
            #[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
            async fn $test() {
                on_stage($tag, false, |stage| chart::scenario(stage, Some(concat!("ci/", $tag, ".yaml")))).await;
            }
        )*

        #[test]
        fn every_values_file_of_the_chart_is_installed_by_a_test() {
            let tested = [$($tag),*];
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/daqiri-gateway/ci");
            for entry in std::fs::read_dir(dir).unwrap() {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                let tag = name.strip_suffix(".yaml").unwrap_or(&name).to_owned();
                assert!(tested.contains(&tag.as_str()), "charts/daqiri-gateway/ci/{name} has no test in chart_values!");
            }
        }
    };
}

chart_values! {
    the_chart_installs_with_af_xdp_values_through_a_real_api_server => "af-xdp",
    the_chart_installs_with_consumers_values_through_a_real_api_server => "consumers",
    the_chart_installs_with_network_policy_values_through_a_real_api_server => "network-policy",
    the_chart_installs_with_roce_values_through_a_real_api_server => "roce",
    the_chart_installs_with_servicemonitor_values_through_a_real_api_server => "servicemonitor",
    the_chart_installs_with_s3_captures_values_through_a_real_api_server => "s3-captures",
    the_chart_installs_with_socket_only_values_through_a_real_api_server => "socket-only",
    the_chart_installs_with_sriov_hugepages_gpu_values_through_a_real_api_server => "sriov-hugepages-gpu",
}

#[tokio::test]
#[ignore = "needs DAQIRI_TEST_KUBECONFIG naming a cluster; tests/run.sh starts one"]
async fn watches_resume_after_their_version_expires_through_a_real_api_server() {
    // Its own control plane: it stops the API server.
    let plane = watch_expiry::PrivateControlPlane::start("watch");
    let dir = plane.dir.clone();
    on_stage_of(&plane.kubeconfig, "watch", true, |stage| watch_expiry::scenario(stage, dir)).await;
}
