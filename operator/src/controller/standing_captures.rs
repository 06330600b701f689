//! Standing captures: a flow with `spec.capture` has one capture running on
//! every gateway its port is placed on, for as long as the flow is Ready
//! and keeps the field. Each start gets a name of its own
//! (`operator.flow-<flow>_<unix milliseconds>`): the gateway never appends to a
//! capture's files, so a capture started again after one ended must not
//! reuse the old name. A running capture of ours whose flow is gone, lost
//! its `capture`, or left the node is stopped.

use std::collections::{BTreeMap, BTreeSet};

use crate::crd::CapturePolicy;

/// What the captures this operator starts are named after.
const PREFIX: &str = "operator.flow-";

/// One flow's standing capture.
#[derive(Debug, Clone)]
pub(super) struct Wanted {
    pub(super) interface: String,
    pub(super) flow_id: u32,
    pub(super) policy: CapturePolicy,
    pub(super) nodes: BTreeSet<String>,
}

/// The name every start of flow `flow`'s standing capture begins with.
pub(super) fn base_name(flow: &str) -> String {
    format!("{PREFIX}{flow}")
}

/// The base name of one of our captures (`None` for anyone else's).
fn base_of(name: &str) -> Option<&str> {
    name.starts_with(PREFIX).then(|| name.rsplit_once('_').map_or(name, |(base, _)| base))
}

/// Makes each gateway run exactly the standing captures `wanted` (by base
/// name) places on its node: starts the missing, stops those no longer wanted.
pub(super) async fn reconcile(
    gateway: &crate::gateway::GatewayClient,
    ips: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, Wanted>,
) {
    for (node, ip) in ips {
        let running = match gateway.running_captures(ip).await {
            Ok(running) => running,
            Err(e) => {
                tracing::warn!(%node, "standing captures not checked: {e}");
                continue;
            }
        };
        let mut ours: BTreeSet<&str> = BTreeSet::new();
        for (id, name) in &running {
            let Some(base) = base_of(name) else { continue };
            if wanted.get(base).is_some_and(|w| w.nodes.contains(node)) {
                ours.insert(base);
            } else if let Err(e) = gateway.stop_capture(ip, *id).await {
                tracing::warn!(%node, capture = %name, "standing capture not stopped: {e}");
            }
        }
        let millis = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        for (base, w) in wanted.iter().filter(|(base, w)| w.nodes.contains(node) && !ours.contains(base.as_str())) {
            let name = format!("{base}_{millis}");
            if let Err(e) = gateway.start_capture(ip, &w.interface, w.flow_id, &name, &w.policy).await {
                tracing::warn!(%node, capture = %name, "standing capture not started: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_captures_have_a_base_and_a_start_time_is_not_part_of_it() {
        assert_eq!(base_of("operator.flow-adc-b_1764232000"), Some("operator.flow-adc-b"));
        assert_eq!(base_of("operator.flow-adc-b"), Some("operator.flow-adc-b"));
        assert_eq!(base_of("flow-adc-b"), None, "a capture someone else started");
        assert_eq!(base_of(&format!("{}_7", base_name("a.b"))), Some("operator.flow-a.b"));
    }
}
