//! One pass over a namespace: render every node's config, store it in the
//! gateways' ConfigMap, push it to each node's gateway, and write back what
//! happened into every resource's status (and an Event when Ready changes).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::status::{self, GatewayOutcome};
use super::{Context, Error};
use crate::crd::{ConditionStatus, DaqiriFlow, DaqiriPort, ResourceStatus};
use crate::gateway::Rates;
use crate::render::{self, NodeInfo, Plan};

/// Field manager of everything the operator applies.
pub const MANAGER: &str = "daqiri-operator";

/// Brings configs, gateways and statuses in line with the resources.
pub async fn sync(ctx: &Context) -> Result<(), Error> {
    let ports_api: Api<DaqiriPort> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let flows_api: Api<DaqiriFlow> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let ports = ports_api.list(&ListParams::default()).await?.items;
    let flows = flows_api.list(&ListParams::default()).await?.items;
    let nodes = Api::<Node>::all(ctx.client.clone()).list(&ListParams::default()).await?.items;
    let nodes: Vec<NodeInfo> =
        nodes.iter().map(|n| NodeInfo { name: n.name_any(), labels: n.labels().clone() }).collect();
    let plan = render::plan(&nodes, &ports, &flows);
    apply_config_map(ctx, &plan).await?;
    let gateways = push_to_gateways(ctx, &plan).await?;
    let (outcomes, rates) = (&gateways.outcomes, &gateways.rates);
    let now = Timestamp::now();

    for port in ports.iter().filter(|p| p.meta().deletion_timestamp.is_none()) {
        let name = port.name_any();
        let iface = render::interface_name(port);
        let port_rates = per_node(rates, |r| r.interfaces.get(&iface).copied());
        let placement = plan.ports.get(&name).cloned().unwrap_or_default();
        let status =
            status::desired(port.meta().generation, &placement, outcomes, &port_rates, port.status.as_ref(), now);
        update_status(ctx, &ports_api, port, status, now).await?;
    }
    for flow in flows.iter().filter(|f| f.meta().deletion_timestamp.is_none()) {
        let name = flow.name_any();
        let port = ports.iter().find(|p| p.name_any() == flow.spec.port);
        let iface = port.map(render::interface_name).unwrap_or_default();
        let flow_rates = per_node(rates, |r| r.flows.get(&(iface.clone(), flow.spec.id)).copied());
        let placement = plan.flows.get(&name).cloned().unwrap_or_default();
        let status =
            status::desired(flow.meta().generation, &placement, outcomes, &flow_rates, flow.status.as_ref(), now);
        if let Some(port) = port {
            adopt(&flows_api, flow, port).await?;
        }
        let ready = status.condition("Ready").is_some_and(|c| c.status == ConditionStatus::True);
        if let (true, Some(policy)) = (ready, &flow.spec.capture) {
            for node in &placement.nodes {
                let Some(ip) = gateways.ips.get(node) else { continue };
                let name = format!("flow-{name}");
                if let Err(e) = ctx.gateway.ensure_capture(ip, &iface, flow.spec.id, &name, policy).await {
                    tracing::warn!(flow = %name, %node, "standing capture not started: {e}");
                }
            }
        }
        update_status(ctx, &flows_api, flow, status, now).await?;
    }
    Ok(())
}

fn per_node(rates: &BTreeMap<String, Rates>, pick: impl Fn(&Rates) -> Option<f64>) -> BTreeMap<String, f64> {
    rates.iter().filter_map(|(node, r)| pick(r).map(|v| (node.clone(), v))).collect()
}

/// The ConfigMap the gateways mount: one key per node, `<node>.yaml`.
async fn apply_config_map(ctx: &Context, plan: &Plan) -> Result<(), Error> {
    let data: BTreeMap<String, String> =
        plan.configs.iter().map(|c| (format!("{}.yaml", c.node), c.yaml.clone())).collect();
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(ctx.options.config_map.clone()),
            namespace: Some(ctx.namespace.clone()),
            labels: Some([("app.kubernetes.io/managed-by".to_owned(), MANAGER.to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    api.patch(&ctx.options.config_map, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&config_map)).await?;
    Ok(())
}

/// What the gateways said, by node.
#[derive(Debug, Default)]
struct Gateways {
    outcomes: BTreeMap<String, GatewayOutcome>,
    rates: BTreeMap<String, Rates>,
    ips: BTreeMap<String, String>,
}

/// Sends each node's config to the gateway pod running there; reads rates.
async fn push_to_gateways(ctx: &Context, plan: &Plan) -> Result<Gateways, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let pods = pods.list(&ListParams::default().labels(&ctx.options.gateway_selector)).await?.items;
    let mut gateways = Gateways::default();
    for config in &plan.configs {
        let ip = pods.iter().find_map(|pod| {
            let spec = pod.spec.as_ref()?;
            let status = pod.status.as_ref()?;
            (spec.node_name.as_deref() == Some(&config.node) && status.phase.as_deref() == Some("Running"))
                .then(|| status.pod_ip.clone())
                .flatten()
        });
        let Some(ip) = ip else {
            gateways.outcomes.insert(config.node.clone(), GatewayOutcome::NotFound);
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
        if matches!(outcome, GatewayOutcome::Applied { .. })
            && let Ok(r) = ctx.gateway.rates(&ip).await
        {
            gateways.rates.insert(config.node.clone(), r);
        }
        gateways.outcomes.insert(config.node.clone(), outcome);
        gateways.ips.insert(config.node.clone(), ip);
    }
    Ok(gateways)
}

/// Makes the flow's port its owner, so deleting a port deletes its flows.
async fn adopt(api: &Api<DaqiriFlow>, flow: &DaqiriFlow, port: &DaqiriPort) -> Result<(), Error> {
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
    let patch = json!({ "metadata": { "ownerReferences": owners } });
    api.patch(&flow.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

async fn update_status<K>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    status: ResourceStatus,
    now: Timestamp,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + HasStatus,
{
    let previous = object.status();
    if !status::differs(previous, &status, now) {
        return Ok(());
    }
    let was_ready = previous.and_then(|p| p.condition("Ready")).map(|c| (c.status, c.reason.clone()));
    let ready = status.condition("Ready").expect("desired() always sets Ready").clone();
    api.patch_status(&object.name_any(), &PatchParams::default(), &Patch::Merge(&json!({ "status": status }))).await?;
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
