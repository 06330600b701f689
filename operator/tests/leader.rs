//! Leader election and the node-config agent against the in-memory API server.

mod common;

use std::time::{Duration, Instant};

use common::fake_api::FakeApi;
use daqiri_operator::leader::{LEASE_DURATION, LeaderElector, RETRY_PERIOD};
use daqiri_operator::node_config::NodeConfigAgent;
use serde_json::json;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn one_replica_leads_and_a_released_lease_is_taken_at_the_next_retry() {
    let api = FakeApi::new();
    let a = LeaderElector::new(api.client(), "default", "daqiri-operator", "replica-a");
    let b = LeaderElector::new(api.client(), "default", "daqiri-operator", "replica-b");
    assert!(a.try_acquire_or_renew().await.unwrap(), "the first replica takes the free lease");
    assert!(!b.try_acquire_or_renew().await.unwrap(), "a held lease is not taken");
    assert!(a.try_acquire_or_renew().await.unwrap(), "the holder renews");
    let lease = api.get(LEASES, "daqiri-operator").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], LEASE_DURATION.as_secs());

    let standby = tokio::spawn(async move {
        b.acquire(&|| {}).await;
        Instant::now()
    });
    tokio::time::sleep(RETRY_PERIOD / 2).await;
    let released = Instant::now();
    a.release().await.unwrap();
    let taken = standby.await.unwrap();
    let failover = taken - released;
    assert!(failover <= RETRY_PERIOD + Duration::from_millis(500), "took over after {failover:?}");
    let lease = api.get(LEASES, "daqiri-operator").unwrap();
    assert_eq!(
        (&lease["spec"]["holderIdentity"], &lease["spec"]["leaseTransitions"]),
        (&json!("replica-b"), &json!(1))
    );
    assert!(!a.try_acquire_or_renew().await.unwrap(), "the old leader is a follower now");
}

#[tokio::test]
async fn an_expired_lease_is_taken_and_a_holder_that_lost_it_learns_so() {
    let api = FakeApi::new();
    api.put(
        LEASES,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
               "spec": {"holderIdentity": "gone", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"}}),
    );
    let b = LeaderElector::new(api.client(), "default", "l", "replica-b");
    assert!(b.try_acquire_or_renew().await.unwrap(), "an expired lease is free");
    // Another replica overwrites it (as after a partition): the renewal sees it.
    api.patch(LEASES, "l", &json!({"spec": {"holderIdentity": "replica-c", "renewTime": k8s_now()}}));
    let lost = tokio::time::timeout(RETRY_PERIOD * 3, b.hold(&|| {})).await.expect("the loss is noticed");
    assert!(lost.contains("another replica"), "{lost}");
}

fn k8s_now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[tokio::test]
async fn the_node_config_agent_follows_its_nodes_config_map() {
    let api = FakeApi::new();
    let dir = std::env::temp_dir().join(format!("node-config-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("config.yaml");
    let agent = NodeConfigAgent {
        namespace: "default".into(),
        prefix: "daqiri-gateway-config".into(),
        node: "node-1".into(),
        out: out.clone(),
    };
    let config_map = |name: &str, yaml: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"config.yaml": yaml}});
    api.put(CONFIG_MAPS, config_map("daqiri-gateway-config-node-2", "other: node\n"));
    let running = tokio::spawn({
        let client = api.client();
        async move { agent.run(client).await }
    });
    let wait_for = |expected: Option<&'static str>| {
        let out = out.clone();
        async move {
            for _ in 0..250 {
                if std::fs::read_to_string(&out).ok().as_deref() == expected {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("{} never became {expected:?}", out.display());
        }
    };
    wait_for(None).await;
    api.put(CONFIG_MAPS, config_map("daqiri-gateway-config-node-1", "a: 1\n"));
    wait_for(Some("a: 1\n")).await;
    api.put(CONFIG_MAPS, config_map("daqiri-gateway-config-node-2", "other: change\n"));
    api.patch(CONFIG_MAPS, "daqiri-gateway-config-node-1", &json!({"data": {"config.yaml": "a: 2\n"}}));
    wait_for(Some("a: 2\n")).await;
    api.delete(CONFIG_MAPS, "daqiri-gateway-config-node-1");
    wait_for(None).await;
    running.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}
