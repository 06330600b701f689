//! What a running engine can take from a new config: which changes are
//! flow-only (hot-swappable) and, otherwise, where the first other change is.

use daqiri_config::EngineConfig;
use daqiri_config::model::Interface;

/// The YAML path of the first difference outside RX flows, or `None` when
/// the configs differ only in `rx.flows` / `rx.flow_isolation`.
pub(crate) fn first_difference_beyond_flows(old: &EngineConfig, new: &EngineConfig) -> Option<String> {
    let cfg = "daqiri.cfg";
    let strip = |c: &EngineConfig| EngineConfig { interfaces: Vec::new(), ..c.clone() };
    if strip(old) != strip(new) {
        let what = if old.memory_regions != new.memory_regions { "memory_regions" } else { "global settings" };
        return Some(format!("{cfg}.{what}"));
    }
    if old.interfaces.len() != new.interfaces.len() {
        return Some(format!("{cfg}.interfaces"));
    }
    old.interfaces.iter().zip(&new.interfaces).enumerate().find_map(|(i, (a, b))| {
        (without_flows(a) != without_flows(b)).then(|| {
            let part = if a.rx.as_ref().map(|r| &r.queues) != b.rx.as_ref().map(|r| &r.queues) {
                ".rx.queues"
            } else if a.tx != b.tx {
                ".tx"
            } else if a.rx.is_some() != b.rx.is_some()
                || a.rx.as_ref().map(|r| &r.reorder_configs) != b.rx.as_ref().map(|r| &r.reorder_configs)
            {
                ".rx"
            } else {
                ""
            };
            format!("{cfg}.interfaces[{i}]{part}")
        })
    })
}

fn without_flows(iface: &Interface) -> Interface {
    let mut iface = iface.clone();
    if let Some(rx) = iface.rx.as_mut() {
        rx.flows.clear();
        rx.flow_isolation = false;
    }
    iface
}
