//! What the chart runs before `helm uninstall` deletes anything (its
//! pre-delete hook): the operator's replicas stop, then its finalizer comes
//! off every DaqiriPort and DaqiriFlow, so deleting the namespace afterwards
//! completes although no operator is left to render them out. The resources
//! themselves stay (they are the user's), and so does what the gateways run
//! until their DaemonSet goes.
//!
//! The replicas stop through their own election: the hook takes the Lease for
//! [`HOLD`], the leader finds another holder at its next renewal and exits,
//! and standbys wait for a Lease that does not expire before Helm has deleted
//! their Deployment. The Lease itself stays (the operator made it, not the
//! chart): an install into the same namespace within [`HOLD`] leads once it
//! expires.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use crate::controller::release_finalizer;
use crate::crd::{DaqiriFlow, DaqiriPort};
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

/// Stops the operator of `namespace` (its Lease `lease`) and removes its
/// finalizer from every resource; returns how many resources let go.
pub async fn release(client: Client, namespace: &str, lease: &str) -> Result<usize, UninstallError> {
    LeaderElector::new(client.clone(), namespace, lease, HOLDER).seize(HOLD).await?;
    tracing::info!("holding the lease {lease}; waiting for the leader to stop");
    // The leader renews every retry period; a write of its last pass may still land.
    tokio::time::sleep(RETRY_PERIOD * 2).await;
    let mut released = 0;
    for resource in [ApiResource::erase::<DaqiriFlow>(&()), ApiResource::erase::<DaqiriPort>(&())] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        released += release_all(&api, &resource.kind).await?;
    }
    Ok(released)
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
