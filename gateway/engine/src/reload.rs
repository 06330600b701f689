//! What a running engine can take from a new config: nothing to do, a live
//! swap of RX flows, or a restart, with the YAML path of the first change
//! that needs it. The admin API answers with the same value.

use daqiri_config::EngineConfig;
use daqiri_config::model::Interface;

/// How a new config differs from the one an engine runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadChange {
    /// Nothing the engine runs on changed (comments, layout, tool sections).
    Unchanged,
    /// Only `rx.flows` / `rx.flow_isolation`: swapped live, nothing lost.
    FlowsOnly,
    /// Something else changed, first at `path`: the engine must restart.
    Restart {
        /// YAML path of the first change beyond flows.
        path: String,
    },
}

impl ReloadChange {
    /// Compares what an engine runs with a new config.
    pub fn between(old: &EngineConfig, new: &EngineConfig) -> Self {
        if old == new {
            return ReloadChange::Unchanged;
        }
        match first_difference_beyond_flows(old, new) {
            Some(path) => ReloadChange::Restart { path },
            None => ReloadChange::FlowsOnly,
        }
    }

    /// `unchanged`, `flows` or `restart`, as the admin API reports it.
    pub const fn as_str(&self) -> &'static str {
        match self {
            ReloadChange::Unchanged => "unchanged",
            ReloadChange::FlowsOnly => "flows",
            ReloadChange::Restart { .. } => "restart",
        }
    }
}

/// The YAML path of the first difference outside RX flows, or `None` when
/// the configs differ only in `rx.flows` / `rx.flow_isolation`.
fn first_difference_beyond_flows(old: &EngineConfig, new: &EngineConfig) -> Option<String> {
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
