//! What every pass shares: the client, where things are, the gateways'
//! API, the counters, and the names of what the operator owns.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kube::Client;
use kube::runtime::events::Recorder;

use super::metrics::Metrics;
use crate::gateway::GatewayClient;

/// The field manager of every write, and the `managed-by` label's value.
pub const MANAGER: &str = "daqiri-operator";

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
