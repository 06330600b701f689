//! Status shared by both resources: conditions in the shape of
//! `metav1.Condition`, and what each gateway reports.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Status of a `DaqiriPort` or `DaqiriFlow`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// `Ready`, `Progressing` and `Degraded`, keyed by type.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// One entry per node whose gateway runs this resource.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["node"]))]
    pub gateways: Vec<GatewayStatus>,
    /// Packets per second received, summed over the gateways (flows: matched by this flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_packets_per_second: Option<f64>,
    /// When the rates were read (RFC 3339); refreshed at most once a minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub rates_sampled_at: Option<String>,
}

impl ResourceStatus {
    /// The condition of this type, if set.
    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == kind)
    }
}

/// One condition (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `Progressing` or `Degraded`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// CamelCase reason, e.g. `ConfigApplied`, `ValidationFailed`, `GatewayNotFound`.
    pub reason: String,
    /// Human-readable detail; for `ValidationFailed`, the validator's message with its YAML path.
    pub message: String,
    /// When `status` last changed (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `True`, `False` or `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known yet.
    Unknown,
}

/// What one node's gateway reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// Node name.
    pub node: String,
    /// The gateway's config generation after the operator's update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_generation: Option<u64>,
    /// SHA-256 of the config the gateway runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// Whether the gateway runs the config the operator rendered.
    pub applied: bool,
    /// Packets per second on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_packets_per_second: Option<f64>,
}

impl Condition {
    /// Whether the condition holds.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}
