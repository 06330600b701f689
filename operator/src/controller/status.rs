//! The status a resource should have, from where the plan placed it and
//! what the gateways answered. Pure: the caller patches it when it differs.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::crd::{Condition, ConditionStatus, GatewayStatus, ResourceStatus};
use crate::render::Placement;

/// What the gateway of one node did with its config.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayOutcome {
    /// It runs the rendered config.
    Applied { generation: u64, sha256: String },
    /// No running gateway pod on the node.
    NotFound,
    /// It did not answer, or refused.
    Failed(String),
}

/// Builds the status; `previous` keeps transition times of unchanged conditions.
pub fn desired(
    generation: Option<i64>,
    placement: &Placement,
    gateways: &BTreeMap<String, GatewayOutcome>,
    rates: &BTreeMap<String, f64>,
    previous: Option<&ResourceStatus>,
    now: Timestamp,
) -> ResourceStatus {
    let now_text = now.to_string();
    let refused: Vec<String> = placement.refused.iter().map(|(node, f)| format!("node {node}: {f}")).collect();
    let invalid = match (&placement.unplaced, refused.is_empty()) {
        (Some(f), _) if f.path == "spec.port" => Some(("PortNotFound", f.to_string())),
        (_, false) => Some(("ValidationFailed", refused.join("; "))),
        _ => None,
    };
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
    let problems: Vec<String> = placement
        .nodes
        .iter()
        .filter_map(|node| match gateways.get(node).unwrap_or(&GatewayOutcome::NotFound) {
            GatewayOutcome::Applied { .. } => None,
            GatewayOutcome::NotFound => Some(format!("node {node}: no running gateway pod")),
            GatewayOutcome::Failed(why) => Some(format!("node {node}: {why}")),
        })
        .collect();
    let applied = if placement.nodes.is_empty() {
        let why = placement.unplaced.as_ref().map_or_else(|| refused.join("; "), ToString::to_string);
        (ConditionStatus::False, "NotScheduled", why)
    } else if problems.is_empty() {
        (ConditionStatus::True, "ConfigApplied", format!("running on {}", placement.nodes.join(", ")))
    } else if problems.iter().all(|p| p.ends_with("no running gateway pod")) {
        (ConditionStatus::False, "GatewayNotFound", problems.join("; "))
    } else {
        (ConditionStatus::False, "GatewayFailed", problems.join("; "))
    };
    let ready = match (&invalid, applied.0) {
        (Some((reason, message)), _) => (ConditionStatus::False, *reason, message.clone()),
        (None, ConditionStatus::True) => (ConditionStatus::True, "ConfigApplied", applied.2.clone()),
        (None, _) => (ConditionStatus::False, applied.1, applied.2.clone()),
    };
    let invalid = match invalid {
        Some((reason, message)) => (ConditionStatus::True, reason, message),
        None => (ConditionStatus::False, "Valid", "accepted by the gateway's validator".to_owned()),
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
            message,
            last_transition_time: since,
            observed_generation: generation,
        }
    };
    let total: f64 = statuses.iter().filter_map(|g| g.rx_packets_per_second).sum();
    ResourceStatus {
        conditions: vec![condition("Ready", ready), condition("Applied", applied), condition("Invalid", invalid)],
        observed_generation: generation,
        gateways: statuses,
        rx_packets_per_second: (!rates.is_empty()).then_some(total),
        rates_sampled_at: (!rates.is_empty()).then(|| now_text.clone()),
    }
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
