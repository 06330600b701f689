//! Who steers a DPDK port's flows: the NIC through rte_flow, or, where the
//! PMD has no flow engine and one queue makes it needless, the receiver in
//! software. Flow tables are swapped make-before-break: the new rules are
//! programmed before the old ones go, and a table the PMD refuses leaves
//! the old rules and table in place. The new rules take priorities below
//! the old ones' while both are in (the next swap goes back to the top):
//! PMDs whose rules are TC filters (net_tap) refuse a second rule of the
//! same priority and match.

use std::sync::{Arc, Mutex};

use super::flow_rules::{self, Marking, RuleSpec};
use super::rte::{EthPort, InstalledFlow, Traffic};
use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;
use crate::port::Port;

/// The steering state of one port.
#[derive(Debug)]
pub(super) struct PortSteering {
    rx_queues: usize,
    /// Whether the port is in rte_flow isolated mode.
    isolated: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// `None` while software steers (no rules on the NIC).
    marking: Option<Marking>,
    installed: Vec<InstalledFlow>,
    /// The priorities the installed rules take: `first..end`.
    band: std::ops::Range<u32>,
}

impl PortSteering {
    /// Before the port is configured: isolated mode when the table asks for
    /// isolation and the PMD has it. Without it, unmatched packets still
    /// reach the receiver, which drops and counts them as software does.
    pub(super) fn prepare(eth: &EthPort, table: &FlowTable, rx_queues: usize) -> Self {
        let isolated = table.isolation()
            && match eth.isolate() {
                Ok(()) => true,
                Err(reason) => {
                    tracing::info!(
                        port = %eth.address(),
                        "the {} PMD has no isolated mode ({reason}): unmatched packets are dropped by the receiver",
                        eth.driver_name()
                    );
                    false
                }
            };
        Self { rx_queues, isolated, state: Mutex::new(State { marking: None, installed: Vec::new(), band: 0..0 }) }
    }

    /// Programs `table` on the started port, replacing the rules it has, and
    /// makes it the receiver's table. Fails with the PMD's message when the
    /// table needs the NIC (several queues, header transforms) and the PMD
    /// cannot program it; then nothing changes.
    pub(super) fn apply(&self, eth: &EthPort, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let needed = flow_rules::needs_flow_engine(&table, self.rx_queues) || self.isolated;
        let empty = table.rules.is_empty() && !needed;
        // MARK first (flow ids from the NIC), then without (flow ids by matching).
        let attempts: &[Marking] = match state.marking {
            Some(Marking::Off) => &[Marking::Off],
            _ => &[Marking::On, Marking::Off],
        };
        let mut refusal = None;
        let mut programmed = None;
        // Below the installed rules while they are in; at the top otherwise.
        let first = if state.installed.is_empty() || state.band.start > 0 { 0 } else { state.band.end };
        if !empty {
            for &marking in attempts {
                let mut rules = flow_rules::rules(&table, self.rx_queues, self.isolated, marking);
                rules.iter_mut().for_each(|rule| rule.priority += first);
                match install(eth, &rules) {
                    Ok(flows) => {
                        let end = rules.iter().map(|rule| rule.priority + 1).max().unwrap_or(first);
                        programmed = Some((marking, flows, first..end));
                        break;
                    }
                    Err(reason) => refusal = Some(reason),
                }
            }
        }
        match (programmed, refusal) {
            (Some((marking, flows, band)), _) => {
                remove(eth, std::mem::replace(&mut state.installed, flows));
                state.band = band;
                if state.marking != Some(marking) {
                    tracing::info!(
                        port = %eth.address(),
                        "flows programmed with rte_flow on the {} PMD{}",
                        eth.driver_name(),
                        if marking == Marking::On { ", flow ids by MARK" } else { "; it has no MARK, so flow ids come from matching" }
                    );
                }
                state.marking = Some(marking);
            }
            (None, Some(reason)) if needed => {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "rx.flows of interface \"{}\": the {} PMD cannot program its flows, which {}: {reason}",
                        port.name,
                        eth.driver_name(),
                        if self.rx_queues > 1 { "steer to one of several RX queues" } else { "transform headers" }
                    ),
                ));
            }
            (None, refusal) => {
                if let Some(reason) = refusal {
                    tracing::info!(
                        port = %eth.address(),
                        "the {} PMD cannot program flows ({reason}); with one queue the receiver steers in software",
                        eth.driver_name()
                    );
                }
                remove(eth, std::mem::take(&mut state.installed));
                state.marking = None;
            }
        }
        port.flows.store(table);
        Ok(())
    }
}

/// Creates every rule, or none: on a refusal the ones made are removed.
fn install(eth: &EthPort, rules: &[RuleSpec]) -> std::result::Result<Vec<InstalledFlow>, String> {
    let mut made = Vec::with_capacity(rules.len());
    for rule in rules {
        match eth.create_flow(rule, Traffic::Ingress) {
            Ok(flow) => made.push(flow),
            Err(reason) => {
                remove(eth, made);
                let which = rule.flow.map_or("the catch-all rule".to_owned(), |id| format!("flow id {id}"));
                return Err(format!("{which}: {reason}"));
            }
        }
    }
    Ok(made)
}

fn remove(eth: &EthPort, flows: Vec<InstalledFlow>) {
    for flow in flows {
        if let Err(reason) = eth.destroy_flow(flow) {
            tracing::warn!(port = %eth.address(), "removing a flow rule failed: {reason}");
        }
    }
}
