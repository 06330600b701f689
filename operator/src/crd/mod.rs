//! The custom resources: `DaqiriPort` (one NIC port or socket endpoint on a
//! set of nodes) and `DaqiriFlow` (a match steered to queues of a port).
//!
//! Specs are camelCase, as Kubernetes resources are; [`crate::render`] maps
//! every field onto its DAQIRI YAML key. The OpenAPI schema comes from these
//! types (schemars), and the cross-field rules the API server can check are
//! CEL rules on them, so a wrong resource is refused at `kubectl apply`.
//! `DaqiriNodeState` is the operator's report on each node.

mod condition;
mod flow;
mod integers;
mod node_state;
mod port;

pub use condition::{Condition, ConditionStatus, GatewayStatus, ResourceStatus, bounded_message};
pub use flow::{BitFieldSpec, CapturePolicy, DaqiriFlow, DaqiriFlowSpec, DataTypesSpec, FlowMatchSpec, ReorderSpec};
pub use node_state::{DaqiriNodeState, DaqiriNodeStateSpec, NodeStateStatus, SriovResource};
pub use port::{
    DaqiriPort, DaqiriPortSpec, DeviceSpec, MemoryRegionSpec, PortBackend, QueueSpec, RoceIngestSpec, RoceSpec,
    SocketSpec,
};

/// The API group of both resources.
pub const GROUP: &str = "daqiri.nvidia.com";

/// Both CRDs, in the order `crdgen` writes them.
pub fn all() -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![DaqiriPort::crd(), DaqiriFlow::crd(), DaqiriNodeState::crd()].into_iter().map(integers::bounded).collect()
}
