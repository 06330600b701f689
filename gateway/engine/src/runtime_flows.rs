//! RX flows added and deleted while the engine runs (DAQIRI's dynamic flows,
//! up to `rx.dynamic_flow_capacity` per raw interface, or
//! `model::DEFAULT_RUNTIME_FLOWS` where that is 0, as DAQIRI allows them there too).
//!
//! Each edit becomes a whole new config, validated exactly as a file would
//! be, and reaches the drivers through the same live flow swap as a flow
//! reload: one path programs the NIC (or the software table), so a runtime
//! flow gets the checks, priorities and make-before-break of a configured
//! one. Flows added at runtime outlive config reloads that still allow them.

use daqiri_config::model::{Flow, RxConfig};
use daqiri_config::{Report, ValidConfig, YamlPath};

use crate::error::{Error, Result, Status};

/// The flows added at runtime, per port, in the order they were added.
#[derive(Debug)]
pub(crate) struct RuntimeFlows {
    per_port: Vec<Vec<Flow>>,
}

impl RuntimeFlows {
    pub(crate) fn new(ports: usize) -> Self {
        Self { per_port: vec![Vec::new(); ports] }
    }

    /// The flows added to `port` and still in place.
    pub(crate) fn of(&self, port: usize) -> &[Flow] {
        &self.per_port[port]
    }

    /// `running` with `flow` appended to `port`'s RX flows, checked against
    /// the interface's runtime flow limit and validated whole.
    pub(crate) fn with_added(&self, running: &ValidConfig, port: usize, flow: &Flow) -> Result<ValidConfig> {
        let iface = &running.config().interfaces[port];
        if !running.backend(port).is_raw() {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "interface \"{}\" takes no flows at runtime: dynamic flows exist only for raw streams",
                    iface.name
                ),
            ));
        }
        let no_rx = RxConfig::default();
        let rx = iface.rx.as_ref().unwrap_or(&no_rx);
        let limit = rx.runtime_flow_limit() as usize;
        if self.per_port[port].len() >= limit {
            let bound = if rx.dynamic_flow_capacity == 0 {
                "the bound for an rx.dynamic_flow_capacity of 0"
            } else {
                "its rx.dynamic_flow_capacity"
            };
            return Err(Error::new(
                Status::NoSpaceAvailable,
                format!(
                    "interface \"{}\" holds {limit} runtime flows, {bound}; delete one first or raise rx.dynamic_flow_capacity",
                    iface.name
                ),
            ));
        }
        let mut config = running.config().clone();
        let flows = &mut config.interfaces[port].rx.get_or_insert_with(Default::default).flows;
        flows.push(flow.clone());
        let at = flows.len() - 1;
        let valid = config.validate().map_err(|report| refused_flow(&report, port, at, &flow.name))?;
        crate::support::require_supported(&valid)?;
        Ok(valid)
    }

    /// `running` without `port`'s RX flow `flow_id`, and that flow.
    pub(crate) fn with_removed(running: &ValidConfig, port: usize, flow_id: u32) -> Result<(ValidConfig, Flow)> {
        let iface = &running.config().interfaces[port];
        let flows = iface.rx.as_ref().map_or(&[][..], |rx| &rx.flows);
        let Some(at) = flows.iter().position(|f| f.id == flow_id) else {
            let ids: Vec<String> = flows.iter().map(|f| f.id.to_string()).collect();
            return Err(Error::invalid(format!(
                "interface \"{}\" has no RX flow with id {flow_id}; its flow ids: [{}]",
                iface.name,
                ids.join(", ")
            )));
        };
        let mut config = running.config().clone();
        let removed = config.interfaces[port].rx.as_mut().expect("the flow was found in rx").flows.remove(at);
        // Removing a flow cannot invalidate the rest, but a reorder plan may name its id.
        let valid = config
            .validate()
            .map_err(|report| Error::invalid(format!("flow {flow_id} cannot be deleted: {}", one_line(&report))))?;
        Ok((valid, removed))
    }

    /// Forgets flow `flow_id` of `port` after it was deleted.
    pub(crate) fn forget(&mut self, port: usize, flow_id: u32) {
        self.per_port[port].retain(|f| f.id != flow_id);
    }

    /// Records a flow added to `port`.
    pub(crate) fn record(&mut self, port: usize, flow: Flow) {
        self.per_port[port].push(flow);
    }

    /// A reloaded config with this engine's runtime flows carried into it:
    /// each one the new config still allows (room left, no clash of name or
    /// id) is appended; the others are dropped and logged. Returns the
    /// merged config and the runtime flows it holds.
    pub(crate) fn carried_into(&self, new: ValidConfig) -> (ValidConfig, RuntimeFlows) {
        let mut merged = new;
        let mut kept = RuntimeFlows::new(self.per_port.len());
        for (port, flows) in self.per_port.iter().enumerate() {
            for flow in flows {
                match kept.with_added(&merged, port, flow) {
                    Ok(config) => {
                        merged = config;
                        kept.record(port, flow.clone());
                    }
                    Err(why) => tracing::warn!(
                        interface = %merged.config().interfaces[port].name,
                        flow = %flow.name,
                        "a flow added at runtime does not fit the reloaded config and is removed: {}",
                        why.message
                    ),
                }
            }
        }
        (merged, kept)
    }
}

/// Why a flow cannot be added, with the paths made relative to the flow
/// (`flow.match.udp_dst: ...`) so a caller sees its own fields.
fn refused_flow(report: &Report, port: usize, at: usize, name: &str) -> Error {
    let own = YamlPath::cfg().key("interfaces").index(port).key("rx").key("flows").index(at).to_string();
    let findings: Vec<String> = report
        .errors()
        .map(|d| match d.path.strip_prefix(&own) {
            Some(rest) => format!("flow{rest}: {}", d.message),
            None => format!("{}: {}", d.path, d.message),
        })
        .collect();
    Error::invalid(format!("flow \"{name}\" cannot be added: {}", findings.join("; ")))
}

fn one_line(report: &Report) -> String {
    report.errors().map(|d| format!("{}: {}", d.path, d.message)).collect::<Vec<_>>().join("; ")
}
