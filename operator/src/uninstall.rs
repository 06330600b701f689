//! What the chart runs before `helm uninstall` deletes anything (its
//! pre-delete hook): the operator's replicas stop, its finalizer comes off
//! every DaqiriPort and DaqiriFlow, so deleting the namespace afterwards
//! completes although no operator is left to render them out, and what the
//! operator made goes: each node's ConfigMap (its gateway stops its engine
//! and waits, moments before its DaemonSet goes) and DaqiriNodeState. The
//! ports and flows themselves stay (they are the user's).
//!
//! The replicas stop through their own election: the hook takes the Lease for
//! [`HOLD`], the leader finds another holder at its next renewal and exits,
//! and standbys wait for a Lease that does not expire before Helm has deleted
//! their Deployment. The hook makes that Deployment the Lease's owner, so the
//! Lease goes with it (garbage collection) and a new install leads at once.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::controller::{MANAGED_BY, release_finalizer};
use crate::crd::{DaqiriFlow, DaqiriNodeState, DaqiriPort};
use crate::leader::{LeaderElector, RETRY_PERIOD};

/// The Lease holder while uninstalling.
pub const HOLDER: &str = "helm-uninstall";
/// How long the hook holds the Lease: past the deletion of the operator's
/// pods (their grace period is 30 s), short enough not to hold up a new install.
pub const HOLD: Duration = Duration::from_secs(120);
/// Conditional writes that lose to another writer are retried this often.
const ATTEMPTS: usize = 5;

/// Why the finalizers could not all be removed.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// The API server refused or did not answer.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// Others kept writing the resources of this kind.
    #[error("{0}: finalizers still changing after {ATTEMPTS} rounds of writes")]
    StillChanging(String),
}

/// What [`release`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Ports and flows that let go of the operator's finalizer.
    pub finalizers: usize,
    /// The operator's ConfigMaps and DaqiriNodeStates deleted.
    pub deleted: usize,
}

/// Stops the operator of `namespace` (its Lease `lease`, given to the
/// Deployment `operator` to go with it), removes its finalizer from every
/// resource and deletes what it made.
pub async fn release(client: Client, namespace: &str, lease: &str, operator: &str) -> Result<Released, UninstallError> {
    LeaderElector::new(client.clone(), namespace, lease, HOLDER).seize(HOLD).await?;
    tracing::info!("holding the lease {lease}; waiting for the leader to stop");
    owned_by_deployment(&client, namespace, lease, operator).await?;
    // The leader renews every retry period; a write of its last pass may still land.
    tokio::time::sleep(RETRY_PERIOD * 2).await;
    let mut finalizers = 0;
    for resource in [ApiResource::erase::<DaqiriFlow>(&()), ApiResource::erase::<DaqiriPort>(&())] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        finalizers += release_all(&api, &resource.kind).await?;
    }
    let deleted = delete_made(Api::<ConfigMap>::namespaced(client.clone(), namespace)).await?
        + delete_made(Api::<DaqiriNodeState>::namespaced(client, namespace)).await?;
    Ok(Released { finalizers, deleted })
}

/// Makes the Deployment `operator` the Lease's owner; without that
/// Deployment (the operator runs elsewhere) the Lease stays and expires.
async fn owned_by_deployment(client: &Client, namespace: &str, lease: &str, operator: &str) -> Result<(), kube::Error> {
    let Some(deployment) = Api::<Deployment>::namespaced(client.clone(), namespace).get_opt(operator).await? else {
        tracing::warn!("no Deployment {operator}: the lease {lease} stays until deleted");
        return Ok(());
    };
    let owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "apps/v1", "kind": "Deployment", "name": operator, "uid": deployment.metadata.uid,
    }]}});
    Api::<Lease>::namespaced(client.clone(), namespace)
        .patch(lease, &PatchParams::default(), &Patch::Merge(&owner))
        .await?;
    Ok(())
}

/// Deletes every object of `api` the operator labelled as its own.
async fn delete_made<K>(api: Api<K>) -> Result<usize, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let mine = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let mut deleted = 0;
    for object in api.list(&mine).await?.items {
        let name = object.meta().name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                deleted += 1;
                tracing::info!("{} {name} deleted", K::kind(&K::DynamicType::default()));
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// Removes the finalizer from each object of `api` that has it, each write
/// conditional on the version read; a write that lost a race re-reads, and
/// after [`ATTEMPTS`] such rounds it gives up (the hook's Job runs again).
async fn release_all(api: &Api<DynamicObject>, kind: &str) -> Result<usize, UninstallError> {
    let mut released = 0;
    for _ in 0..ATTEMPTS {
        let mut lost_race = false;
        for object in api.list(&ListParams::default()).await?.items {
            let name = object.metadata.name.as_deref().unwrap_or_default();
            match release_finalizer(api, &object).await {
                Ok(true) => {
                    tracing::info!("{kind} {name}: finalizer removed");
                    released += 1;
                }
                Ok(false) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => lost_race = true,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !lost_race {
            return Ok(released);
        }
    }
    Err(UninstallError::StillChanging(kind.to_owned()))
}
