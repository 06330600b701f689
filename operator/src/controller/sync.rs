//! One pass over a namespace: put the finalizer on new resources, render
//! every node's config, store it in the node's ConfigMap, push it to the
//! node's gateway, and write back what happened into every resource's
//! status, each node's `DaqiriNodeState`, and an Event when Ready changes.
//! Resources being deleted lose their finalizer once a pass left them out.
//!
//! Every write carries the resourceVersion this pass read (or is a
//! server-side apply with this operator's field manager): if anything changed
//! since, the write fails with a conflict, and the worker runs a fresh pass
//! instead of letting stale data win.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::{Context, FINALIZER, MANAGED_BY};
use super::error::Error;
use super::node_states::{self, NodeGateway};
use super::status::{self, GatewayOutcome, VfShortage};
use super::undecodable::{self, Unreadable};
use super::{config_maps, standing_captures, writes};
use crate::crd::{ConditionStatus, DaqiriFlow, DaqiriNodeState, DaqiriPort, ResourceStatus, SriovResource};
use crate::gateway::Rates;
use crate::render::{self, NodeInfo, Plan};

/// Everything a pass reads, listed once at its start.
struct Snapshot {
    ports: Vec<DaqiriPort>,
    flows: Vec<DaqiriFlow>,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    config_maps: Vec<ConfigMap>,
    node_states: Vec<DaqiriNodeState>,
    /// Ports and flows that do not decode: left out, reported one by one.
    unreadable: Vec<Unreadable>,
}

async fn read(ctx: &Context) -> Result<Snapshot, Error> {
    let (client, ns) = (ctx.client.clone(), ctx.namespace.as_str());
    let all = ListParams::default();
    let managed = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let (ports, mut unreadable) = undecodable::list::<DaqiriPort>(&client, ns).await?;
    let (flows, unreadable_flows) = undecodable::list::<DaqiriFlow>(&client, ns).await?;
    unreadable.extend(unreadable_flows);
    Ok(Snapshot {
        ports,
        flows,
        unreadable,
        nodes: Api::<Node>::all(client.clone()).list(&all).await?.items,
        pods: Api::<Pod>::namespaced(client.clone(), ns)
            .list(&ListParams::default().labels(&ctx.options.gateway_selector))
            .await?
            .items,
        config_maps: Api::<ConfigMap>::namespaced(client.clone(), ns).list(&managed).await?.items,
        node_states: Api::<DaqiriNodeState>::namespaced(client, ns).list(&all).await?.items,
    })
}

/// Brings configs, gateways and statuses in line with the resources.
pub async fn sync(ctx: &Context) -> Result<(), Error> {
    let mut snapshot = read(ctx).await?;
    let ports_api: Api<DaqiriPort> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let flows_api: Api<DaqiriFlow> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    for port in &mut snapshot.ports {
        add_finalizer(&ports_api, port).await?;
    }
    for flow in &mut snapshot.flows {
        add_finalizer(&flows_api, flow).await?;
    }
    let node_infos: Vec<NodeInfo> =
        snapshot.nodes.iter().map(|n| NodeInfo { name: n.name_any(), labels: n.labels().clone() }).collect();
    let plan = render::plan(&node_infos, &snapshot.ports, &snapshot.flows);
    config_maps::apply(ctx, &plan, &snapshot.config_maps).await?;
    let gateways = push_to_gateways(ctx, &plan, &snapshot.pods).await;
    let outcomes: BTreeMap<String, GatewayOutcome> =
        gateways.nodes.iter().map(|(node, g)| (node.clone(), g.outcome.clone())).collect();
    let now = Timestamp::now();
    // A conflict on one status does not stop the others; the pass reports it at the end.
    let mut conflict = None;

    let live_ports = snapshot.ports.iter().filter(|p| p.meta().deletion_timestamp.is_none());
    for port in live_ports {
        let name = port.name_any();
        let iface = render::interface_name(port);
        let port_rates = per_node(&gateways.rates, |r| r.interfaces.get(&iface).copied());
        let placement = plan.ports.get(&name).cloned().unwrap_or_default();
        let shortage = vf_shortage(port, &placement.nodes, &snapshot.nodes);
        let status = status::desired(
            port.meta().generation,
            &placement,
            &outcomes,
            &port_rates,
            &shortage,
            port.status.as_ref(),
            now,
        );
        keep_first_conflict(&mut conflict, update_status(ctx, &ports_api, port, status, now).await)?;
    }
    let live_flows = snapshot.flows.iter().filter(|f| f.meta().deletion_timestamp.is_none());
    let mut captures = BTreeMap::new();
    for flow in live_flows {
        let name = flow.name_any();
        let port = snapshot.ports.iter().find(|p| p.name_any() == flow.spec.port);
        let iface = port.map(render::interface_name).unwrap_or_default();
        let flow_rates = per_node(&gateways.rates, |r| r.flows.get(&(iface.clone(), flow.spec.id)).copied());
        let placement = plan.flows.get(&name).cloned().unwrap_or_default();
        let shortage = port.map(|p| vf_shortage(p, &placement.nodes, &snapshot.nodes)).unwrap_or_default();
        let status = status::desired(
            flow.meta().generation,
            &placement,
            &outcomes,
            &flow_rates,
            &shortage,
            flow.status.as_ref(),
            now,
        );
        let mut flow = flow.clone();
        if let Some(port) = port {
            keep_first_conflict(&mut conflict, adopt(&flows_api, &mut flow, port).await)?;
        }
        let ready = status.condition("Ready").is_some_and(|c| c.is_true());
        if let (true, Some(policy)) = (ready, &flow.spec.capture) {
            let wanted = standing_captures::Wanted {
                interface: iface.clone(),
                flow_id: flow.spec.id,
                policy: policy.clone(),
                nodes: placement.nodes.iter().cloned().collect(),
            };
            captures.insert(standing_captures::base_name(&name), wanted);
        }
        keep_first_conflict(&mut conflict, update_status(ctx, &flows_api, &flow, status, now).await)?;
    }
    standing_captures::reconcile(&ctx.gateway, &gateways.ips, &captures).await;

    let states = plan
        .configs
        .iter()
        .map(|config| {
            // push_to_gateways answers for every config of the plan.
            let gateway = &gateways.nodes[&config.node];
            let node = snapshot.nodes.iter().find(|n| n.name_any() == config.node);
            let on_node: Vec<&DaqiriPort> =
                snapshot.ports.iter().filter(|p| config.ports.contains_key(&p.name_any())).collect();
            let previous = snapshot.node_states.iter().find(|s| s.name_any() == config.node);
            let status = node_states::desired(
                config,
                gateway,
                node_states::sriov_resources(node, &on_node),
                previous.and_then(|s| s.status.as_ref()),
                now,
            );
            (config.node.clone(), status)
        })
        .collect();
    keep_first_conflict(&mut conflict, node_states::apply(ctx, states, &snapshot.nodes, &snapshot.node_states).await)?;

    // The config without them is stored and pushed: their finalizers can go.
    for port in snapshot.ports.iter().filter(|p| p.meta().deletion_timestamp.is_some()) {
        keep_first_conflict(&mut conflict, drop_finalizer(&ports_api, port).await)?;
    }
    for flow in snapshot.flows.iter().filter(|f| f.meta().deletion_timestamp.is_some()) {
        keep_first_conflict(&mut conflict, drop_finalizer(&flows_api, flow).await)?;
    }
    for unreadable in &snapshot.unreadable {
        tracing::warn!(
            "{} {}: left out, {}",
            unreadable.kind,
            unreadable.object.metadata.name.as_deref().unwrap_or(""),
            unreadable.error
        );
        keep_first_conflict(&mut conflict, undecodable::report(&ctx.client, &ctx.namespace, unreadable, now).await)?;
    }
    conflict.map_or(Ok(()), Err)
}

/// Passes a conflict on (remembering the first), fails on anything else.
fn keep_first_conflict(first: &mut Option<Error>, result: Result<(), Error>) -> Result<(), Error> {
    match result {
        Err(e @ Error::Conflict(_)) => {
            first.get_or_insert(e);
            Ok(())
        }
        other => other,
    }
}

fn per_node(rates: &BTreeMap<String, Rates>, pick: impl Fn(&Rates) -> Option<f64>) -> BTreeMap<String, f64> {
    rates.iter().filter_map(|(node, r)| pick(r).map(|v| (node.clone(), v))).collect()
}

/// The nodes among `placed` where the port's SR-IOV resource has 0 allocatable.
fn vf_shortage(port: &DaqiriPort, placed: &[String], nodes: &[Node]) -> VfShortage {
    if port.spec.device.as_ref().and_then(|d| d.resource_name.as_ref()).is_none() {
        return Vec::new();
    }
    placed
        .iter()
        .flat_map(|name| {
            let node = nodes.iter().find(|n| &n.name_any() == name);
            node_states::sriov_resources(node, &[port])
                .into_iter()
                .filter(|r: &SriovResource| r.allocatable == 0)
                .map(|r| (name.clone(), r.resource_name))
        })
        .collect()
}

/// What the gateways said, by node.
#[derive(Debug, Default)]
struct Gateways {
    nodes: BTreeMap<String, NodeGateway>,
    rates: BTreeMap<String, Rates>,
    ips: BTreeMap<String, String>,
}

/// Sends each node's config to the gateway pod running there; reads its
/// engine state and rates.
async fn push_to_gateways(ctx: &Context, plan: &Plan, pods: &[Pod]) -> Gateways {
    let mut gateways = Gateways::default();
    for config in &plan.configs {
        let pod = pods.iter().find(|pod| {
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            let here = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(config.node.as_str());
            running && here && pod.meta().deletion_timestamp.is_none()
        });
        let Some((pod, ip)) = pod.and_then(|p| Some((p.name_any(), p.status.as_ref()?.pod_ip.clone()?))) else {
            let outcome = GatewayOutcome::NotFound;
            gateways.nodes.insert(config.node.clone(), NodeGateway { outcome, pod: None, engine: None });
            continue;
        };
        let outcome = match ctx.gateway.apply(&ip, &config.yaml).await {
            Ok(applied) if applied.sha256 == config.sha256 => {
                GatewayOutcome::Applied { generation: applied.generation, sha256: applied.sha256 }
            }
            Ok(applied) => GatewayOutcome::Failed(format!(
                "gateway runs config {} but {} was sent",
                &applied.sha256[..12.min(applied.sha256.len())],
                &config.sha256[..12]
            )),
            Err(e) => GatewayOutcome::Failed(e.to_string()),
        };
        let engine = ctx.gateway.engine_state(&ip).await.ok();
        if matches!(outcome, GatewayOutcome::Applied { .. })
            && let Ok(r) = ctx.gateway.rates(&ip).await
        {
            gateways.rates.insert(config.node.clone(), r);
        }
        gateways.nodes.insert(config.node.clone(), NodeGateway { outcome, pod: Some(pod), engine });
        gateways.ips.insert(config.node.clone(), ip);
    }
    gateways
}

async fn add_finalizer<K>(api: &Api<K>, object: &mut K) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if object.meta().deletion_timestamp.is_some() || object.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let mut finalizers = object.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    writes::merge(api, object, json!({ "metadata": { "finalizers": finalizers } }), false).await
}

async fn drop_finalizer<K>(api: &Api<K>, object: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !object.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let finalizers: Vec<&String> = object.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    writes::merge(api, &mut object.clone(), json!({ "metadata": { "finalizers": finalizers } }), false).await
}

/// Makes the flow's port its owner, so deleting a port deletes its flows.
async fn adopt(api: &Api<DaqiriFlow>, flow: &mut DaqiriFlow, port: &DaqiriPort) -> Result<(), Error> {
    let Some(owner) = port.controller_owner_ref(&()).map(|mut o| {
        o.controller = Some(false);
        o
    }) else {
        return Ok(());
    };
    if flow.owner_references().iter().any(|o| o.uid == owner.uid) {
        return Ok(());
    }
    let mut owners = flow.owner_references().to_vec();
    owners.push(owner);
    writes::merge(api, flow, json!({ "metadata": { "ownerReferences": owners } }), false).await
}

/// Patches the status if it changed (with the resourceVersion precondition)
/// and publishes an Event when Ready changes.
async fn update_status<K>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    status: ResourceStatus,
    now: Timestamp,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug + HasStatus,
{
    let previous = object.status();
    if !status::differs(previous, &status, now) {
        return Ok(());
    }
    let was_ready = previous.and_then(|p| p.condition("Ready")).map(|c| (c.status, c.reason.clone()));
    let ready = status.condition("Ready").expect("desired() always sets Ready").clone();
    writes::merge(api, &mut object.clone(), json!({ "status": status }), true).await?;
    if was_ready != Some((ready.status, ready.reason.clone())) {
        let event = Event {
            type_: if ready.status == ConditionStatus::True { EventType::Normal } else { EventType::Warning },
            reason: ready.reason,
            note: Some(ready.message.chars().take(1000).collect()),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::warn!("cannot publish event: {e}");
        }
    }
    Ok(())
}

/// Both resources carry a [`ResourceStatus`].
pub trait HasStatus {
    /// The current status, if any.
    fn status(&self) -> Option<&ResourceStatus>;
}

impl HasStatus for DaqiriPort {
    fn status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }
}

impl HasStatus for DaqiriFlow {
    fn status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }
}
