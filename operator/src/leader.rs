//! Leader election over a `coordination.k8s.io` Lease, as client-go does it:
//! every replica tries to acquire or renew the Lease each retry period, with
//! resourceVersion preconditions, and the leader clears it on shutdown.
//!
//! Written here rather than taken from kube-lease-manager, whose followers
//! sleep until the lease they saw expires: a Lease released on SIGTERM would
//! still be picked up only a whole lease duration later.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// How long a Lease stays valid without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often every replica looks at the Lease (the leader renews, followers try to take it).
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// A leader that could not renew for this long stops leading, before its Lease expires.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// One replica's side of the election.
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector").field("name", &self.name).field("identity", &self.identity).finish()
    }
}

impl LeaderElector {
    /// The Lease `name` in `namespace`, contended for as `identity`.
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str) -> Self {
        Self { api: Api::namespaced(client, namespace), name: name.to_owned(), identity: identity.to_owned() }
    }

    /// One round: takes the Lease if it is free or expired, renews it if
    /// held. Returns whether this replica holds it now; a write that lost a
    /// race (409) is "not holding", never an error.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(self.held_spec(now, now, 0)),
            };
            return tolerate_conflict(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        let transitions = spec.lease_transitions.unwrap_or(0);
        let acquired = match holder {
            Some(h) if h == self.identity => spec.acquire_time.map_or(now, |t| t.0),
            Some(_) if !expired(&spec, now) => return Ok(false),
            _ => {
                tracing::info!(identity = %self.identity, previous = ?holder, "taking the lease {}", self.name);
                lease.spec = Some(self.held_spec(now, now, transitions + 1));
                return tolerate_conflict(self.api.replace(&self.name, &PostParams::default(), &lease).await);
            }
        };
        lease.spec = Some(self.held_spec(acquired, now, transitions));
        // `replace` sends the resourceVersion we read: a concurrent writer makes it fail with 409.
        tolerate_conflict(self.api.replace(&self.name, &PostParams::default(), &lease).await)
    }

    /// Clears the Lease if this replica holds it, so a follower takes over
    /// at its next retry instead of waiting for expiry.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else { return Ok(()) };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        spec.acquire_time = None;
        lease.spec = Some(spec);
        tolerate_conflict(self.api.replace(&self.name, &PostParams::default(), &lease).await).map(|_| ())
    }

    /// Takes the Lease whoever holds it, for `duration`: its holder finds
    /// another holder at its next renewal and stops leading, and no replica
    /// takes it back before `duration` has passed.
    pub async fn seize(&self, duration: Duration) -> Result<(), kube::Error> {
        loop {
            let now = Timestamp::now();
            let mut spec = self.held_spec(now, now, 0);
            spec.lease_duration_seconds = Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX));
            let written = match self.api.get_opt(&self.name).await? {
                None => {
                    let metadata = ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() };
                    self.api.create(&PostParams::default(), &Lease { metadata, spec: Some(spec) }).await
                }
                Some(mut lease) => {
                    let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);
                    spec.lease_transitions = Some(transitions + 1);
                    lease.spec = Some(spec);
                    self.api.replace(&self.name, &PostParams::default(), &lease).await
                }
            };
            if tolerate_conflict(written)? {
                return Ok(());
            }
        }
    }

    /// Retries until this replica holds the Lease; `contacted` is called after
    /// every answered round (readiness).
    pub async fn acquire(&self, contacted: &(dyn Fn() + Sync)) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    contacted();
                    return;
                }
                Ok(false) => contacted(),
                Err(e) => tracing::warn!("lease {}: {e}", self.name),
            }
            tokio::time::sleep(RETRY_PERIOD).await;
        }
    }

    /// Renews while leading; returns when the lease is lost (another holder,
    /// or no renewal for [`RENEW_DEADLINE`]).
    pub async fn hold(&self, contacted: &(dyn Fn() + Sync)) -> String {
        let mut renewed = SystemTime::now();
        loop {
            tokio::time::sleep(RETRY_PERIOD).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    renewed = SystemTime::now();
                    contacted();
                }
                Ok(false) => return format!("another replica holds the lease {}", self.name),
                Err(e) => tracing::warn!("cannot renew the lease {}: {e}", self.name),
            }
            if renewed.elapsed().unwrap_or_default() > RENEW_DEADLINE {
                return format!("the lease {} was not renewed for {RENEW_DEADLINE:?}", self.name);
            }
        }
    }

    fn held_spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}

/// Whether the holder's last renewal is older than its lease duration.
fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else { return true };
    now.duration_since(renewed.0).as_secs() >= i64::from(seconds)
}

fn tolerate_conflict(result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
