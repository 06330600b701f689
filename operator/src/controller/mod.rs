//! The controller: every change that can alter a node's config (a port, a
//! flow, a gateway pod, a node, a drifted ConfigMap) becomes a trigger for
//! the one work key there is, the namespace. A single worker runs one
//! [`sync`] pass at a time over the whole namespace, since every node's config
//! depends on all resources; triggers that arrive while it waits or runs are
//! coalesced into the next pass.
//!
//! Finalizers make a deletion go through a pass that leaves the resource out
//! (render skips resources being deleted) before the finalizer is dropped.

pub mod config_maps;
mod metrics;
mod node_states;
pub mod status;
mod sync;
pub mod triggers;
pub mod worker;
mod writes;

use std::collections::BTreeMap;
use std::sync::Mutex;

use kube::Client;
use kube::runtime::events::Recorder;

pub use metrics::Metrics;
pub use sync::{MANAGER, sync};

use crate::gateway::GatewayClient;

/// The finalizer both resources carry while the operator manages them.
pub const FINALIZER: &str = "daqiri.nvidia.com/gateway-config";

/// Label on every object the operator writes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", MANAGER);

/// Label naming the node a ConfigMap or node state is for.
pub const NODE_LABEL: &str = "daqiri.nvidia.com/node";

/// Where things are.
#[derive(Debug, Clone)]
pub struct Options {
    /// Prefix of the per-node ConfigMaps (`<prefix>-<node>`, key `config.yaml`).
    pub config_map: String,
    /// Label selector of the gateway pods.
    pub gateway_selector: String,
}

/// What every pass needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Namespace of the resources, the ConfigMaps and the gateways.
    pub namespace: String,
    /// Names and selectors.
    pub options: Options,
    /// The gateways' admin API.
    pub gateway: GatewayClient,
    /// Publishes Kubernetes Events.
    pub recorder: Recorder,
    /// Pass counters.
    pub metrics: Metrics,
    /// SHA-256 of the data each managed ConfigMap should hold, by name: a
    /// ConfigMap event that disagrees is drift, and triggers a pass.
    pub expected_config_maps: Mutex<BTreeMap<String, String>>,
}

impl Context {
    /// A context with nothing written yet.
    pub fn new(
        client: Client,
        namespace: String,
        options: Options,
        gateway: GatewayClient,
        recorder: Recorder,
        metrics: Metrics,
    ) -> Self {
        Self { client, namespace, options, gateway, recorder, metrics, expected_config_maps: Mutex::default() }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("namespace", &self.namespace).field("options", &self.options).finish()
    }
}

/// What can go wrong in a pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// An object changed after this pass read it; the next pass reads it again.
    #[error("{0} changed while the pass ran")]
    Conflict(String),
}

impl Error {
    /// Sorts an API error: a failed precondition (409) is a [`Error::Conflict`] on `what`.
    pub fn from_write(what: impl Into<String>, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(ref status) if status.code == 409 => Self::Conflict(what.into()),
            e => Self::Kube(e),
        }
    }
}

/// Runs the watches and the worker until `shutdown` completes.
pub async fn run(ctx: std::sync::Arc<Context>) {
    let triggers = triggers::all(&ctx);
    worker::run(ctx, triggers).await;
}
