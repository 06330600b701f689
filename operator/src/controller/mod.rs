//! The controllers: one for `DaqiriPort`, one for `DaqiriFlow`. Any change
//! to either runs the same [`sync`] pass over the namespace, since every
//! node's config depends on all of them. Finalizers make a deletion go
//! through a pass that leaves the resource out (render skips resources
//! being deleted) before the finalizer is dropped.

mod metrics;
pub mod status;
mod sync;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::Recorder;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

pub use metrics::Metrics;
pub use sync::{MANAGER, sync};

use crate::crd::{DaqiriFlow, DaqiriPort};
use crate::gateway::GatewayClient;

/// The finalizer both resources carry while the operator manages them.
pub const FINALIZER: &str = "daqiri.nvidia.com/gateway-config";

/// How often a healthy resource is looked at again (rates, gateways that restarted).
const RESYNC: Duration = Duration::from_secs(60);

/// Where things are.
#[derive(Debug, Clone)]
pub struct Options {
    /// ConfigMap the gateways mount (one key per node).
    pub config_map: String,
    /// Label selector of the gateway pods.
    pub gateway_selector: String,
}

/// What every reconcile needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Namespace of the resources, the ConfigMap and the gateways.
    pub namespace: String,
    /// Names and selectors.
    pub options: Options,
    /// The gateways' admin API.
    pub gateway: GatewayClient,
    /// Publishes Kubernetes Events.
    pub recorder: Recorder,
    /// Reconcile counters.
    pub metrics: Metrics,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("namespace", &self.namespace).field("options", &self.options).finish()
    }
}

/// What can go wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Adding or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(String),
}

/// Reconciles a `DaqiriPort`.
pub async fn reconcile_port(port: Arc<DaqiriPort>, ctx: Arc<Context>) -> Result<Action, Error> {
    reconcile(port, ctx, "daqiriport").await
}

/// Reconciles a `DaqiriFlow`.
pub async fn reconcile_flow(flow: Arc<DaqiriFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    reconcile(flow, ctx, "daqiriflow").await
}

async fn reconcile<K>(object: Arc<K>, ctx: Arc<Context>, kind: &'static str) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let started = Instant::now();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    tracing::debug!(kind, name = %object.name_any(), "reconciling");
    // Apply and Cleanup run the same pass: a resource being deleted renders as absent.
    let result = finalizer(&api, FINALIZER, object, |event| {
        let ctx = Arc::clone(&ctx);
        async move {
            let (Finalizer::Apply(_) | Finalizer::Cleanup(_)) = event;
            sync(&ctx).await.map(|()| Action::requeue(RESYNC))
        }
    })
    .await
    .map_err(|e| Error::Finalizer(e.to_string()));
    ctx.metrics.observe(kind, started.elapsed(), result.is_ok());
    result
}

fn error_policy<K>(object: Arc<K>, error: &Error, _ctx: Arc<Context>) -> Action
where
    K: ResourceExt,
{
    tracing::warn!(name = %object.name_any(), "reconcile failed: {error}");
    Action::requeue(Duration::from_secs(10))
}

/// Runs both controllers until the stream ends (shutdown signal).
pub async fn run(ctx: Arc<Context>) {
    let ports: Api<DaqiriPort> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let flows: Api<DaqiriFlow> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let port_controller = Controller::new(ports, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile_port, error_policy, Arc::clone(&ctx))
        .for_each(|_| futures::future::ready(()));
    let flow_controller = Controller::new(flows, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile_flow, error_policy, Arc::clone(&ctx))
        .for_each(|_| futures::future::ready(()));
    futures::future::join(port_controller, flow_controller).await;
}
