//! Leader election on a real Lease: a standby leads within seconds of the
//! leader's SIGTERM (the leader clears the Lease), and after a SIGKILL only
//! once the Lease has expired; the new leader configures a flow.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};

use super::configure::{configured, deploy, flow, logged, nothing_forbidden, port, replica};
use super::harness::{Stage, free_port, until};

const LEASE_DURATION: Duration = daqiri_operator::leader::LEASE_DURATION;
const RETRY_PERIOD: Duration = daqiri_operator::leader::RETRY_PERIOD;

fn kill(child: &std::process::Child, signal: &str) -> Instant {
    let status = std::process::Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    Instant::now()
}

pub async fn scenario(stage: Stage) {
    let mut deployment = deploy(&stage, &["replica-a"]).await;
    let leases: Api<Lease> = Api::namespaced(stage.client.clone(), &stage.namespace);
    let lease = format!("{}-operator", stage.fullname());
    let holder = async || leases.get(&lease).await.ok()?.spec?.holder_identity;
    until(Duration::from_secs(30), "replica-a leads", async || {
        (holder().await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let standby = replica(&stage, deployment.admin_port, "replica-b");
    deployment.processes.0.push(standby);
    tokio::time::sleep(RETRY_PERIOD * 2).await;
    assert_eq!(holder().await.as_deref(), Some("replica-a"), "the standby waits while the lease is held");

    let terminated = kill(&deployment.processes.0[2], "-TERM");
    until(Duration::from_secs(10), "replica-b leads after SIGTERM", async || {
        (holder().await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    let after_term = terminated.elapsed();
    assert!(after_term <= RETRY_PERIOD + Duration::from_secs(2), "failover after SIGTERM took {after_term:?}");

    let standby = replica(&stage, deployment.admin_port, "replica-c");
    deployment.processes.0.push(standby);
    tokio::time::sleep(RETRY_PERIOD * 2).await;
    let killed = kill(&deployment.processes.0[3], "-KILL");
    let mut holders = Vec::new();
    until(LEASE_DURATION + RETRY_PERIOD * 3, "replica-c leads after SIGKILL", async || {
        let now = holder().await;
        holders.push((killed.elapsed(), now.clone()));
        (now.as_deref() == Some("replica-c")).then_some(())
    })
    .await;
    let after_kill = killed.elapsed();
    // The killed leader renewed at most one retry period before it died.
    assert!(
        after_kill >= LEASE_DURATION - RETRY_PERIOD - Duration::from_secs(1),
        "replica-c took the lease before it expired ({after_kill:?}): {holders:?}"
    );
    assert!(holders.iter().all(|(_, h)| matches!(h.as_deref(), Some("replica-b" | "replica-c"))), "{holders:?}");

    let flows = stage.api("DaqiriFlow");
    let create = PostParams::default();
    stage.api("DaqiriPort").create(&create, &serde_json::from_value(port(&stage, free_port())).unwrap()).await.unwrap();
    flows.create(&create, &serde_json::from_value(flow("adc-b", 11, "10050-10099")).unwrap()).await.unwrap();
    until(Duration::from_secs(60), "the new leader configures a flow", async || configured(&flows, "adc-b").await)
        .await;
    let logs = ["replica-a", "replica-b", "replica-c"];
    nothing_forbidden(&stage, &logs);
    let leading = logs.iter().filter(|name| logged(&stage, name).contains("leading:")).count();
    assert_eq!(leading, 3, "each replica led once, in turn");
}
