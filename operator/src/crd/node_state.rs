//! `DaqiriNodeState`: what the operator knows of one node, written by the
//! operator only (as sriov-network-operator's `SriovNetworkNodeState`). One per
//! node that runs a config, named after the node and owned by its `Node`, so
//! it goes when the node does.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::Condition;

/// The node a state describes.
#[derive(CustomResource, KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "daqiri.nvidia.com",
    version = "v1alpha1",
    kind = "DaqiriNodeState",
    namespaced,
    status = "NodeStateStatus",
    shortname = "dqnode",
    category = "daqiri",
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".spec.nodeName"}"#,
    printcolumn = r#"{"name":"Engine","type":"string","jsonPath":".status.engineState"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DaqiriNodeStateSpec {
    /// The node.
    pub node_name: String,
    /// The ConfigMap holding this node's rendered config (key `config.yaml`).
    pub config_map: String,
}

/// What the node runs and what it has.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStateStatus {
    /// `Ready`: the node's gateway runs the rendered config.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// SHA-256 of the config the operator rendered for the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered_sha256: Option<String>,
    /// SHA-256 of the config the gateway runs, as it reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_sha256: Option<String>,
    /// The gateway's config generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_generation: Option<u64>,
    /// The gateway pod serving the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_pod: Option<String>,
    /// The gateway's engine: `running`, `down`, ... as its `/api/v1/status`
    /// says; `NoGateway` without a running gateway pod, `Unreachable` when it
    /// did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_state: Option<String>,
    /// The `DaqiriPort`s in the node's config.
    #[serde(default)]
    pub ports: Vec<String>,
    /// The `DaqiriFlow`s in the node's config.
    #[serde(default)]
    pub flows: Vec<String>,
    /// The last thing that went wrong on this node, until it runs its config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The SR-IOV device-plugin resources the node's ports ask for.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["resourceName"]))]
    pub sriov_resources: Vec<SriovResource>,
}

/// One SR-IOV device-plugin resource on a node, from `Node.status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SriovResource {
    /// e.g. `nvidia.com/cx7_vf`.
    pub resource_name: String,
    /// `Node.status.capacity` (0 when the node does not advertise it).
    pub capacity: i64,
    /// `Node.status.allocatable` (0 when the node does not advertise it).
    pub allocatable: i64,
}
