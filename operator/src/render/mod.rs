//! Rendering: every `DaqiriPort` and `DaqiriFlow` of a namespace into one
//! DAQIRI config per node. Pure functions, no API calls.
//!
//! Each node's config is checked by the gateway's own validator
//! (`daqiri-config`). Resources are added one at a time, ports first, in name
//! order; one that makes the config invalid is left out and reported with the
//! validator's message and YAML path, so a bad flow never takes the others
//! down with it.

mod convert;

use std::collections::BTreeMap;

use daqiri_config::{Diagnostic, Document, EngineConfig};
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::crd::{DaqiriFlow, DaqiriPort, PortBackend};
pub use convert::interface_name;

/// A node as far as rendering cares: its name and labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`, matched against each port's `nodeSelector`.
    pub labels: BTreeMap<String, String>,
}

/// What became of one resource on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// In the node's config.
    Included,
    /// Left out of the node's config.
    Invalid(Finding),
}

/// Why a resource was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// YAML path in the rendered config, or the resource field at fault.
    pub path: String,
    /// What is wrong and what would be valid.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The config of one node and what each resource on it became.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// Node name.
    pub node: String,
    /// The DAQIRI YAML the node's gateway runs.
    pub yaml: String,
    /// SHA-256 of `yaml`, as the gateway reports it.
    pub sha256: String,
    /// By `DaqiriPort` name.
    pub ports: BTreeMap<String, Verdict>,
    /// By `DaqiriFlow` name.
    pub flows: BTreeMap<String, Verdict>,
}

/// Whether a port runs on a node: every selector label matches.
pub fn selects(port: &DaqiriPort, node: &NodeInfo) -> bool {
    port.spec.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
}

/// Renders the config of `node`; `None` when no port selects it.
///
/// Resources being deleted (with a deletion timestamp) are left out, which is
/// how a finalizer removes them from the gateway before they disappear.
pub fn render_node(node: &NodeInfo, ports: &[DaqiriPort], flows: &[DaqiriFlow]) -> Option<NodeConfig> {
    let mut ports: Vec<&DaqiriPort> =
        ports.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && selects(p, node)).collect();
    ports.sort_by_key(|p| p.name_any());
    let first = ports.first()?;
    let mut config = convert::engine_config(first.spec.backend);
    let mut rendered = NodeConfig {
        node: node.name.clone(),
        yaml: String::new(),
        sha256: String::new(),
        ports: BTreeMap::new(),
        flows: BTreeMap::new(),
    };
    let mut accepted: Vec<&DaqiriPort> = Vec::new();
    for port in ports.iter().copied() {
        let verdict = if engine_class(port.spec.backend) != engine_class(first.spec.backend) {
            Verdict::Invalid(Finding {
                path: "spec.backend".into(),
                message: format!(
                    "{:?} cannot share node {} with port {} ({:?}): a gateway runs socket/rdma, dpdk or af_xdp ports, one kind at a time",
                    port.spec.backend,
                    node.name,
                    first.name_any(),
                    first.spec.backend
                )
                .to_lowercase(),
            })
        } else {
            let mut candidate = config.clone();
            candidate.memory_regions.extend(convert::memory_regions(port));
            candidate.interfaces.push(convert::interface(port, &[]));
            match first_error(&candidate) {
                None => {
                    config = candidate;
                    accepted.push(port);
                    Verdict::Included
                }
                Some(finding) => Verdict::Invalid(finding),
            }
        };
        rendered.ports.insert(port.name_any(), verdict);
    }

    let mut flows: Vec<&DaqiriFlow> = flows.iter().filter(|f| f.metadata.deletion_timestamp.is_none()).collect();
    flows.sort_by_key(|f| (f.spec.port.clone(), f.spec.id, f.name_any()));
    let mut kept: BTreeMap<String, Vec<&DaqiriFlow>> = BTreeMap::new();
    for flow in flows {
        let Some(index) = accepted.iter().position(|p| p.name_any() == flow.spec.port) else {
            continue; // its port is not on this node, or was left out (reported there)
        };
        let port = accepted[index];
        let mut with_flow = kept.get(&port.name_any()).cloned().unwrap_or_default();
        with_flow.push(flow);
        let mut candidate = config.clone();
        candidate.interfaces[index] = convert::interface(port, &with_flow);
        let verdict = match first_error(&candidate) {
            None => {
                config = candidate;
                kept.insert(port.name_any(), with_flow);
                Verdict::Included
            }
            Some(finding) => Verdict::Invalid(finding),
        };
        rendered.flows.insert(flow.name_any(), verdict);
    }
    rendered.yaml = Document::engine_yaml(&config);
    rendered.sha256 = sha256_hex(&rendered.yaml);
    Some(rendered)
}

/// SHA-256 of `text` in lowercase hex, as the gateway reports its config's.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Ports of one class share a gateway: its config names one engine.
fn engine_class(backend: PortBackend) -> u8 {
    match backend {
        PortBackend::Socket | PortBackend::Rdma => 0,
        PortBackend::Dpdk => 1,
        PortBackend::AfXdp => 2,
    }
}

/// The validator's first error, if the config is invalid.
fn first_error(config: &EngineConfig) -> Option<Finding> {
    let report = config.clone().validate().err()?;
    let first: Option<&Diagnostic> = report.errors().next();
    first.map(|d| Finding { path: d.path.clone(), message: d.message.clone() })
}

/// Every node's config and, per resource, where it landed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// One per node that some port selects, in node name order.
    pub configs: Vec<NodeConfig>,
    /// By `DaqiriPort` name.
    pub ports: BTreeMap<String, Placement>,
    /// By `DaqiriFlow` name.
    pub flows: BTreeMap<String, Placement>,
}

/// Where one resource runs, and where and why it was refused.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Nodes whose config includes it.
    pub nodes: Vec<String>,
    /// Nodes that left it out, with the reason.
    pub refused: Vec<(String, Finding)>,
    /// Why it is on no node at all (no matching node, missing port).
    pub unplaced: Option<Finding>,
}

/// Renders every node and places every resource (deleted ones excepted).
pub fn plan(nodes: &[NodeInfo], ports: &[DaqiriPort], flows: &[DaqiriFlow]) -> Plan {
    let mut plan = Plan::default();
    let mut nodes: Vec<&NodeInfo> = nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    for node in nodes {
        let Some(config) = render_node(node, ports, flows) else { continue };
        for (name, verdict) in &config.ports {
            record(plan.ports.entry(name.clone()).or_default(), &config.node, verdict);
        }
        for (name, verdict) in &config.flows {
            record(plan.flows.entry(name.clone()).or_default(), &config.node, verdict);
        }
        plan.configs.push(config);
    }
    for port in ports.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        plan.ports.entry(port.name_any()).or_insert_with(|| Placement {
            unplaced: Some(Finding {
                path: "spec.nodeSelector".into(),
                message: "no node matches the nodeSelector".into(),
            }),
            ..Placement::default()
        });
    }
    for flow in flows.iter().filter(|f| f.metadata.deletion_timestamp.is_none()) {
        let port = ports.iter().find(|p| p.name_any() == flow.spec.port && p.metadata.deletion_timestamp.is_none());
        let placement = plan.flows.entry(flow.name_any()).or_default();
        if placement.nodes.is_empty() && placement.refused.is_empty() {
            let message = match port {
                None => format!("DaqiriPort \"{}\" does not exist in this namespace", flow.spec.port),
                Some(_) => format!("DaqiriPort \"{}\" runs on no node", flow.spec.port),
            };
            placement.unplaced = Some(Finding { path: "spec.port".into(), message });
        }
    }
    plan
}

fn record(placement: &mut Placement, node: &str, verdict: &Verdict) {
    match verdict {
        Verdict::Included => placement.nodes.push(node.to_owned()),
        Verdict::Invalid(finding) => placement.refused.push((node.to_owned(), finding.clone())),
    }
}
