//! The status a resource should have, from where the plan placed it and
//! what the gateways answered. Pure: the caller patches it when it differs.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::crd::{Condition, ConditionStatus, GatewayStatus, ResourceStatus, bounded_message};
use crate::render::Placement;

/// What the gateway of one node did with its config.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayOutcome {
    /// It runs the rendered config.
    Applied {
        /// The node's config generation it runs.
        generation: u64,
        /// The SHA-256 of that config's text, as the gateway confirmed it.
        sha256: String,
    },
    /// No running gateway pod on the node.
    NotFound,
    /// It did not answer, or refused.
    Failed(String),
}

/// Nodes where a port's SR-IOV resource has nothing left to allocate, with
/// the resource name; empty for ports without one.
pub type VfShortage = Vec<(String, String)>;

/// Builds the status; `previous` keeps transition times of unchanged conditions.
///
/// `Ready` says whether every node the resource is placed on runs it;
/// `Degraded` says that something needs a person (the resource is invalid,
/// selects no node, a gateway refused, no VF is allocatable); `Progressing`
/// is true while it is only waiting (for a gateway pod to start).
pub fn desired(
    generation: Option<i64>,
    placement: &Placement,
    gateways: &BTreeMap<String, GatewayOutcome>,
    rates: &BTreeMap<String, f64>,
    vf_shortage: &VfShortage,
    previous: Option<&ResourceStatus>,
    now: Timestamp,
) -> ResourceStatus {
    let statuses: Vec<GatewayStatus> = placement
        .nodes
        .iter()
        .map(|node| {
            let outcome = gateways.get(node).unwrap_or(&GatewayOutcome::NotFound);
            let (generation, sha256) = match outcome {
                GatewayOutcome::Applied { generation, sha256 } => (Some(*generation), Some(sha256.clone())),
                _ => (None, None),
            };
            GatewayStatus {
                node: node.clone(),
                config_generation: generation,
                config_sha256: sha256,
                applied: matches!(outcome, GatewayOutcome::Applied { .. }),
                rx_packets_per_second: rates.get(node).copied(),
            }
        })
        .collect();
    let verdict = verdict(placement, gateways, vf_shortage);
    from_verdict(generation, &verdict, statuses, rates, previous, now)
}

/// The status of a resource the server holds but this operator cannot read
/// (written under another version of its schema): `Degraded` with the reason
/// `Undecodable` and the decoder's message, placed nowhere.
pub fn undecodable(
    generation: Option<i64>,
    message: String,
    previous: Option<&ResourceStatus>,
    now: Timestamp,
) -> ResourceStatus {
    from_verdict(generation, &Verdict::Stuck("Undecodable", message), Vec::new(), &BTreeMap::new(), previous, now)
}

fn from_verdict(
    generation: Option<i64>,
    verdict: &Verdict,
    statuses: Vec<GatewayStatus>,
    rates: &BTreeMap<String, f64>,
    previous: Option<&ResourceStatus>,
    now: Timestamp,
) -> ResourceStatus {
    let now_text = now.to_string();
    let (ready, progressing, degraded) = match verdict {
        Verdict::Applied(message) => (
            (ConditionStatus::True, "ConfigApplied", message.clone()),
            (ConditionStatus::False, "Complete", message.clone()),
            (ConditionStatus::False, "AsExpected", "nothing needs attention".to_owned()),
        ),
        Verdict::Waiting(message) => (
            (ConditionStatus::False, "GatewayNotFound", message.clone()),
            (ConditionStatus::True, "WaitingForGateway", message.clone()),
            (ConditionStatus::False, "AsExpected", "waiting for gateway pods to start".to_owned()),
        ),
        Verdict::Stuck(reason, message) => (
            (ConditionStatus::False, *reason, message.clone()),
            (ConditionStatus::False, "Stalled", format!("no progress until this is mended: {message}")),
            (ConditionStatus::True, *reason, message.clone()),
        ),
    };
    let condition = |kind: &str, (status, reason, message): (ConditionStatus, &str, String)| {
        let since = previous
            .and_then(|p| p.condition(kind))
            .filter(|c| c.status == status)
            .map_or_else(|| now_text.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: kind.to_owned(),
            status,
            reason: reason.to_owned(),
            message: bounded_message(message),
            last_transition_time: since,
            observed_generation: generation,
        }
    };
    let total: f64 = statuses.iter().filter_map(|g| g.rx_packets_per_second).sum();
    ResourceStatus {
        conditions: vec![
            condition("Ready", ready),
            condition("Progressing", progressing),
            condition("Degraded", degraded),
        ],
        observed_generation: generation,
        gateways: statuses,
        rx_packets_per_second: (!rates.is_empty()).then_some(total),
        rates_sampled_at: (!rates.is_empty()).then(|| now_text.clone()),
    }
}

/// Where a resource stands.
enum Verdict {
    /// Every node it is placed on runs it.
    Applied(String),
    /// Only waiting for gateway pods.
    Waiting(String),
    /// Needs a person: the reason and what to mend.
    Stuck(&'static str, String),
}

fn verdict(placement: &Placement, gateways: &BTreeMap<String, GatewayOutcome>, vf_shortage: &VfShortage) -> Verdict {
    let refused: Vec<String> = placement.refused.iter().map(|(node, f)| format!("node {node}: {f}")).collect();
    if let Some(f) = placement.unplaced.as_ref().filter(|f| f.path == "spec.port") {
        return Verdict::Stuck("PortNotFound", f.to_string());
    }
    if !refused.is_empty() {
        return Verdict::Stuck("ValidationFailed", refused.join("; "));
    }
    if placement.nodes.is_empty() {
        let why = placement.unplaced.as_ref().map_or_else(|| "no node matches".to_owned(), ToString::to_string);
        return Verdict::Stuck("NotScheduled", why);
    }
    if !vf_shortage.is_empty() {
        let nodes: Vec<String> =
            vf_shortage.iter().map(|(node, resource)| format!("node {node}: {resource} has 0 allocatable")).collect();
        return Verdict::Stuck(
            "NoAllocatableVFs",
            format!(
                "{} (are the VFs created and the SR-IOV device plugin running there? see the node's DaqiriNodeState)",
                nodes.join("; ")
            ),
        );
    }
    let mut missing = Vec::new();
    let mut failed = Vec::new();
    for node in &placement.nodes {
        match gateways.get(node).unwrap_or(&GatewayOutcome::NotFound) {
            GatewayOutcome::Applied { .. } => {}
            GatewayOutcome::NotFound => missing.push(format!("node {node}: no running gateway pod")),
            GatewayOutcome::Failed(why) => failed.push(format!("node {node}: {why}")),
        }
    }
    if !failed.is_empty() {
        failed.extend(missing);
        return Verdict::Stuck("GatewayFailed", failed.join("; "));
    }
    if !missing.is_empty() {
        return Verdict::Waiting(missing.join("; "));
    }
    Verdict::Applied(format!("running on {}", placement.nodes.join(", ")))
}

/// How often rates alone justify a status patch.
pub const RATE_REFRESH: Duration = Duration::from_secs(60);

/// Whether `new` is worth a patch over `old`: anything but the rates
/// changed, or the rates are older than [`RATE_REFRESH`]. (Patching fresh
/// rates every time would re-trigger the reconcile it came from, forever.)
pub fn differs(old: Option<&ResourceStatus>, new: &ResourceStatus, now: Timestamp) -> bool {
    let Some(old) = old else { return true };
    let strip = |s: &ResourceStatus| {
        let mut s = s.clone();
        s.rx_packets_per_second = None;
        s.rates_sampled_at = None;
        for g in &mut s.gateways {
            g.rx_packets_per_second = None;
        }
        s
    };
    if strip(old) != strip(new) {
        return true;
    }
    let sampled = old.rates_sampled_at.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
    new.rates_sampled_at.is_some() && sampled.is_none_or(|at| now.duration_since(at).unsigned_abs() >= RATE_REFRESH)
}
