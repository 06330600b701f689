//! Software flow steering: match a packet's UDP/IP fields against the
//! interface's `rx.flows` and pick its queue, as a NIC's flow engine would.
//!
//! Rules are tried in config order; the first match wins. A rule with two or
//! more queue ids spreads flows over them with Toeplitz RSS, flow-affine like
//! the NIC: one five-tuple always lands on one queue.

use std::sync::Arc;

use daqiri_config::model::{ActionType, Flow, FlowAction, PortMatch, RxConfig};

use crate::headers::FlowKey;
use crate::stats::FlowStats;

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// Matched rule `rule` and goes to queue index `queue`.
    Flow { rule: usize, queue: usize },
    /// Unmatched, delivered to the default queue (isolation off).
    Default { queue: usize },
    /// Unmatched and flow isolation is on.
    Unmatched,
}

#[derive(Debug)]
pub(crate) struct FlowRule {
    pub(crate) flow_id: u32,
    pub(crate) name: String,
    udp_src: Option<PortMatch>,
    udp_dst: Option<PortMatch>,
    ipv4_len: Option<u16>,
    queues: Vec<usize>,
    /// Header transforms before the queue (`vlan_pop`, `tunnel_decap`),
    /// which only a NIC's flow engine performs.
    transforms: Vec<FlowAction>,
    pub(crate) stats: Arc<FlowStats>,
}

impl FlowRule {
    fn matches(&self, key: &FlowKey) -> bool {
        self.udp_src.is_none_or(|p| p.contains(key.src_port))
            && self.udp_dst.is_none_or(|p| p.contains(key.dst_port))
            && self.ipv4_len.is_none_or(|l| l == key.ipv4_len)
    }

    fn same_rule(&self, other: &FlowRule) -> bool {
        (self.flow_id, &self.name, self.udp_src, self.udp_dst, self.ipv4_len, &self.queues, &self.transforms)
            == (
                other.flow_id,
                &other.name,
                other.udp_src,
                other.udp_dst,
                other.ipv4_len,
                &other.queues,
                &other.transforms,
            )
    }

    /// Queue indices the rule steers to.
    pub(crate) fn queues(&self) -> &[usize] {
        &self.queues
    }

    /// The UDP source ports, UDP destination ports and IPv4 total length
    /// the rule matches (`None`: any).
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn match_fields(&self) -> (Option<PortMatch>, Option<PortMatch>, Option<u16>) {
        (self.udp_src, self.udp_dst, self.ipv4_len)
    }

    /// The transforms applied before the queue, in config order.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn transforms(&self) -> &[FlowAction] {
        &self.transforms
    }

    /// Whether a packet could match both rules (their matches intersect).
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn overlaps(&self, other: &FlowRule) -> bool {
        matches_overlap(self.match_fields(), other.match_fields())
    }
}

/// Whether a packet could match both (UDP source, UDP destination, IPv4
/// length) matches; `None` fields match anything.
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub(crate) fn matches_overlap(
    a: (Option<PortMatch>, Option<PortMatch>, Option<u16>),
    b: (Option<PortMatch>, Option<PortMatch>, Option<u16>),
) -> bool {
    let ports = |a: Option<PortMatch>, b: Option<PortMatch>| match (a, b) {
        (Some(a), Some(b)) => a.first <= b.last && b.first <= a.last,
        _ => true,
    };
    ports(a.0, b.0) && ports(a.1, b.1) && (a.2.is_none() || b.2.is_none() || a.2 == b.2)
}

/// The RX flow rules of one interface.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    pub(crate) rules: Vec<FlowRule>,
    /// (flow id, rule index), sorted, for packets a NIC marked.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    by_flow_id: Vec<(u32, usize)>,
    isolation: bool,
}

impl FlowTable {
    /// Builds the table; queue ids are resolved to positions in `rx.queues`.
    pub(crate) fn new(rx: &RxConfig) -> Self {
        Self::replacing(rx, None)
    }

    /// Builds the table for a reload: rules identical to one of `old` keep
    /// its counters, so an unchanged flow's statistics run on.
    pub(crate) fn replacing(rx: &RxConfig, old: Option<&FlowTable>) -> Self {
        let position =
            |id: u16| rx.queues.iter().position(|q| q.id == id).expect("validated: flows name existing queues");
        let rules = rx
            .flows
            .iter()
            .map(|flow: &Flow| {
                let m = flow.matches.clone().unwrap_or_default();
                let mut rule = FlowRule {
                    flow_id: flow.id,
                    name: flow.name.clone(),
                    udp_src: m.udp_src,
                    udp_dst: m.udp_dst,
                    ipv4_len: m.ipv4_len,
                    queues: flow.queue_ids().into_iter().map(position).collect(),
                    transforms: flow.action_list().iter().filter(|a| a.kind != ActionType::Queue).cloned().collect(),
                    stats: Arc::default(),
                };
                if let Some(same) = old.and_then(|t| t.rules.iter().find(|r| r.same_rule(&rule))) {
                    rule.stats = Arc::clone(&same.stats);
                }
                rule
            })
            .collect::<Vec<FlowRule>>();
        let mut by_flow_id: Vec<(u32, usize)> = rules.iter().enumerate().map(|(i, r)| (r.flow_id, i)).collect();
        by_flow_id.sort_unstable();
        Self { rules, by_flow_id, isolation: rx.flow_isolation }
    }

    /// Whether every packet goes to the default queue without a flow id (no
    /// rules, no isolation), so a receiver need not read its headers.
    pub(crate) fn steers_nothing(&self) -> bool {
        self.rules.is_empty() && !self.isolation
    }

    /// Whether unmatched packets are dropped (`flow_isolation`).
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn isolation(&self) -> bool {
        self.isolation
    }

    /// The index of the rule with flow id `flow_id` (a NIC's MARK).
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn rule_of(&self, flow_id: u32) -> Option<usize> {
        let at = self.by_flow_id.binary_search_by_key(&flow_id, |&(id, _)| id).ok()?;
        Some(self.by_flow_id[at].1)
    }

    /// Where a packet goes that is not Ethernet/IPv4/UDP: no rule can match it.
    pub(crate) fn steer_unparsed(&self) -> Steering {
        if self.isolation { Steering::Unmatched } else { Steering::Default { queue: 0 } }
    }

    /// Picks the queue for a whole Ethernet frame (read for its headers).
    pub(crate) fn steer_frame(&self, frame: &[u8]) -> Steering {
        FlowKey::from_frame(frame).map_or_else(|| self.steer_unparsed(), |key| self.steer(&key))
    }

    /// Picks the queue for a packet.
    pub(crate) fn steer(&self, key: &FlowKey) -> Steering {
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.matches(key) {
                let queue = match rule.queues.len() {
                    1 => rule.queues[0],
                    n => rule.queues[(toeplitz_hash(key) % n as u32) as usize],
                };
                return Steering::Flow { rule: index, queue };
            }
        }
        self.steer_unparsed()
    }
}

/// The RSS key most NICs ship as default (Microsoft's RSS verification key);
/// a NIC's RSS is given the same key, so both spread flows alike.
pub(crate) const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Toeplitz hash over src/dst IPv4 and src/dst UDP port, as NIC RSS computes it.
/// Written here because the hash is a dozen lines and no maintained crate offers it.
fn toeplitz_hash(key: &FlowKey) -> u32 {
    let mut input = [0u8; 12];
    input[..4].copy_from_slice(&key.src_ip);
    input[4..8].copy_from_slice(&key.dst_ip);
    input[8..10].copy_from_slice(&key.src_port.to_be_bytes());
    input[10..].copy_from_slice(&key.dst_port.to_be_bytes());
    let mut hash = 0u32;
    let mut window = u32::from_be_bytes([RSS_KEY[0], RSS_KEY[1], RSS_KEY[2], RSS_KEY[3]]);
    for (i, byte) in input.iter().enumerate() {
        for bit in (0..8).rev() {
            if byte & (1 << bit) != 0 {
                hash ^= window;
            }
            window = (window << 1) | u32::from((RSS_KEY[i + 4] >> bit) & 1);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> FlowKey {
        FlowKey { src_ip: src, dst_ip: dst, src_port: sport, dst_port: dport, ipv4_len: 100 }
    }

    #[test]
    fn toeplitz_matches_the_published_verification_vectors() {
        // Microsoft RSS verification suite, IPv4 with TCP/UDP ports.
        assert_eq!(toeplitz_hash(&key([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766)), 0x51cc_c178);
        assert_eq!(toeplitz_hash(&key([199, 92, 111, 2], [65, 69, 140, 83], 14230, 4739)), 0xc626_b0ea);
    }

    #[test]
    fn first_matching_rule_wins_and_isolation_drops_the_rest() {
        let rx: RxConfig = serde_yaml::from_str(
            "queues: [{name: a, id: 0, cpu_core: 0, batch_size: 1}, {name: b, id: 5, cpu_core: 0, batch_size: 1}]\n\
             flow_isolation: true\n\
             flows:\n\
             - {name: f, id: 7, action: {type: queue, id: 5}, match: {udp_dst: \"5000-5009\"}}\n\
             - {name: g, id: 8, action: {type: queue, id: 0}, match: {udp_dst: 5001}}\n",
        )
        .unwrap();
        let table = FlowTable::new(&rx);
        assert_eq!(table.steer(&key([1; 4], [2; 4], 1, 5001)), Steering::Flow { rule: 0, queue: 1 });
        assert_eq!(table.steer(&key([1; 4], [2; 4], 1, 6000)), Steering::Unmatched);
    }

    #[test]
    fn rss_is_flow_affine_and_spreads() {
        let rx: RxConfig = serde_yaml::from_str(
            "queues: [{name: a, id: 0, cpu_core: 0, batch_size: 1}, {name: b, id: 1, cpu_core: 0, batch_size: 1}]\n\
             flows: [{name: f, id: 1, action: {type: queue, ids: [0, 1]}}]\n",
        )
        .unwrap();
        let table = FlowTable::new(&rx);
        let mut seen = [0; 2];
        for port in 1000..1100 {
            let k = key([10, 0, 0, 1], [10, 0, 0, 2], port, 4096);
            let Steering::Flow { queue, .. } = table.steer(&k) else { panic!() };
            assert_eq!(table.steer(&k), Steering::Flow { rule: 0, queue });
            seen[queue] += 1;
        }
        assert!(seen[0] > 20 && seen[1] > 20, "{seen:?}");
    }
}
