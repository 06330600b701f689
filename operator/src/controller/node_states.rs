//! One `DaqiriNodeState` per node with a config: what the operator rendered,
//! what the gateway runs, and the SR-IOV resources the node's ports need.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::{Context, MANAGED_BY, MANAGER, NODE_LABEL};
use super::error::Error;
use super::status::GatewayOutcome;
use super::{config_maps, writes};
use crate::crd::{
    Condition, ConditionStatus, DaqiriNodeState, DaqiriNodeStateSpec, DaqiriPort, NodeStateStatus, SriovResource,
    bounded_message,
};
use crate::render::{NodeConfig, Verdict};

/// What a pass learnt about one node's gateway.
#[derive(Debug, Clone)]
pub struct NodeGateway {
    /// What it did with the config.
    pub outcome: GatewayOutcome,
    /// Its pod, if one runs.
    pub pod: Option<String>,
    /// Its engine state, if it answered.
    pub engine: Option<String>,
}

/// The SR-IOV resources `ports` ask for, as `node` advertises them.
pub fn sriov_resources(node: Option<&Node>, ports: &[&DaqiriPort]) -> Vec<SriovResource> {
    let mut names: Vec<&str> = ports.iter().filter_map(|p| p.spec.device.as_ref()?.resource_name.as_deref()).collect();
    names.sort_unstable();
    names.dedup();
    let status = node.and_then(|n| n.status.as_ref());
    let count = |map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
                 name: &str| {
        map.and_then(|m| m.get(name)).and_then(|q| q.0.parse::<i64>().ok()).unwrap_or(0)
    };
    names
        .into_iter()
        .map(|name| SriovResource {
            resource_name: name.to_owned(),
            capacity: count(status.and_then(|s| s.capacity.as_ref()), name),
            allocatable: count(status.and_then(|s| s.allocatable.as_ref()), name),
        })
        .collect()
}

/// The status a node's state should have.
pub fn desired(
    config: &NodeConfig,
    gateway: &NodeGateway,
    sriov: Vec<SriovResource>,
    previous: Option<&NodeStateStatus>,
    now: Timestamp,
) -> NodeStateStatus {
    let included = |verdicts: &BTreeMap<String, Verdict>| {
        verdicts.iter().filter(|(_, v)| **v == Verdict::Included).map(|(name, _)| name.clone()).collect()
    };
    let (applied_sha256, config_generation) = match &gateway.outcome {
        GatewayOutcome::Applied { generation, sha256 } => (Some(sha256.clone()), Some(*generation)),
        _ => (None, None),
    };
    let (status, reason, message, last_error) = match &gateway.outcome {
        GatewayOutcome::Applied { .. } => {
            (ConditionStatus::True, "ConfigApplied", "the gateway runs the rendered config".to_owned(), None)
        }
        GatewayOutcome::NotFound => {
            let why = "no running gateway pod on the node".to_owned();
            (ConditionStatus::False, "GatewayNotFound", why.clone(), Some(why))
        }
        GatewayOutcome::Failed(why) => {
            let why = bounded_message(why.clone());
            (ConditionStatus::False, "GatewayFailed", why.clone(), Some(why))
        }
    };
    let since = previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == status)
        .map_or_else(|| now.to_string(), |c| c.last_transition_time.clone());
    let engine_state = gateway.engine.clone().unwrap_or_else(|| match gateway.outcome {
        GatewayOutcome::NotFound => "NoGateway".to_owned(),
        _ => "Unreachable".to_owned(),
    });
    NodeStateStatus {
        conditions: vec![Condition {
            type_: "Ready".to_owned(),
            status,
            reason: reason.to_owned(),
            message,
            last_transition_time: since,
            observed_generation: None,
        }],
        rendered_sha256: Some(config.sha256.clone()),
        applied_sha256,
        config_generation,
        gateway_pod: gateway.pod.clone(),
        engine_state: Some(engine_state),
        ports: included(&config.ports),
        flows: included(&config.flows),
        last_error,
        sriov_resources: sriov,
    }
}

/// Writes each node's state (creating it, owned by its Node) and deletes the
/// states of nodes without a config. `existing` is what the pass listed.
pub async fn apply(
    ctx: &Context,
    states: Vec<(String, NodeStateStatus)>,
    nodes: &[Node],
    existing: &[DaqiriNodeState],
) -> Result<(), Error> {
    let api: Api<DaqiriNodeState> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    for (node, status) in &states {
        let mut current = match existing.iter().find(|s| &s.name_any() == node) {
            Some(current) => current.clone(),
            None => api
                .patch(node, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&new_state(ctx, node, nodes)))
                .await
                .map_err(|e| Error::from_write(format!("DaqiriNodeState {node}"), e))?,
        };
        if current.status.as_ref() == Some(status) {
            continue;
        }
        writes::merge(&api, &mut current, json!({ "status": status }), true).await?;
    }
    for stale in existing.iter().filter(|s| !states.iter().any(|(node, _)| *node == s.name_any())) {
        writes::delete_unchanged(&api, stale).await?;
    }
    Ok(())
}

fn new_state(ctx: &Context, node: &str, nodes: &[Node]) -> DaqiriNodeState {
    let owner = nodes.iter().find(|n| n.name_any() == node).and_then(|n| {
        Some(OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Node".to_owned(),
            name: node.to_owned(),
            uid: n.meta().uid.clone()?,
            ..OwnerReference::default()
        })
    });
    let mut state = DaqiriNodeState::new(
        node,
        DaqiriNodeStateSpec {
            node_name: node.to_owned(),
            config_map: config_maps::name_for(&ctx.options.config_map, node),
        },
    );
    state.metadata = ObjectMeta {
        name: Some(node.to_owned()),
        namespace: Some(ctx.namespace.clone()),
        labels: Some(
            [
                (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
                (NODE_LABEL.to_owned(), config_maps::label_value(node)),
            ]
            .into(),
        ),
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    state
}
