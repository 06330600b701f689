//! Software flow steering: match a packet's Ethernet addresses and UDP/IP
//! fields against the interface's `rx.flows` and pick its queue, as a NIC's
//! flow engine would.
//!
//! Rules are tried in config order; the first match wins. A rule with two or
//! more queue ids spreads flows over them with Toeplitz RSS, flow-affine like
//! the NIC: one five-tuple always lands on one queue (for a rule of Ethernet
//! addresses alone, one pair of MACs).

use std::sync::Arc;

use daqiri_config::model::{ActionType, Flow, FlowAction, FlowMatch, PortMatch, RxConfig};

use crate::headers::{FlowKey, Macs};
use crate::stats::FlowStats;

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// Matched a rule and goes to one of its queues.
    Flow {
        /// The rule's position in the flow table.
        rule: usize,
        /// The queue's position in `rx.queues`.
        queue: usize,
    },
    /// Unmatched, delivered to the default queue (isolation off).
    Default {
        /// The queue's position in `rx.queues`.
        queue: usize,
    },
    /// Unmatched and flow isolation is on.
    Unmatched,
}

#[derive(Debug)]
pub(crate) struct FlowRule {
    pub(crate) flow_id: u32,
    pub(crate) name: String,
    ethernet: Option<MacMatch>,
    udp_ip: UdpIpMatch,
    queues: Vec<usize>,
    /// Header transforms before the queue (`vlan_pop`, `tunnel_decap`),
    /// which only a NIC's flow engine performs.
    transforms: Vec<FlowAction>,
    pub(crate) stats: Arc<FlowStats>,
}

/// `match.ethernet`: the addresses a frame must carry (`None`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MacMatch {
    pub(crate) src: Option<[u8; 6]>,
    pub(crate) dst: Option<[u8; 6]>,
}

impl MacMatch {
    fn matches(&self, macs: &Macs) -> bool {
        self.src.is_none_or(|m| m == macs.src) && self.dst.is_none_or(|m| m == macs.dst)
    }

    /// Whether one frame could carry the addresses of both.
    fn overlaps(&self, other: &MacMatch) -> bool {
        let same = |a: Option<[u8; 6]>, b: Option<[u8; 6]>| a.is_none() || b.is_none() || a == b;
        same(self.src, other.src) && same(self.dst, other.dst)
    }
}

/// The UDP/IP keys of a rule (`None`: any).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UdpIpMatch {
    pub(crate) udp_src: Option<PortMatch>,
    pub(crate) udp_dst: Option<PortMatch>,
    pub(crate) ipv4_len: Option<u16>,
    pub(crate) ipv4_src: Option<[u8; 4]>,
    pub(crate) ipv4_dst: Option<[u8; 4]>,
}

impl UdpIpMatch {
    /// The UDP/IP keys of `m`.
    pub(crate) fn of(m: &FlowMatch) -> Self {
        Self {
            udp_src: m.udp_src,
            udp_dst: m.udp_dst,
            ipv4_len: m.ipv4_len,
            ipv4_src: m.ipv4_src.map(|a| a.octets()),
            ipv4_dst: m.ipv4_dst.map(|a| a.octets()),
        }
    }

    /// Whether no key is set.
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn matches(&self, key: &FlowKey) -> bool {
        self.udp_src.is_none_or(|p| p.contains(key.src_port))
            && self.udp_dst.is_none_or(|p| p.contains(key.dst_port))
            && self.ipv4_len.is_none_or(|l| l == key.ipv4_len)
            && self.ipv4_src.is_none_or(|a| a == key.src_ip)
            && self.ipv4_dst.is_none_or(|a| a == key.dst_ip)
    }

    /// Whether a packet could match both; `None` keys match anything.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn overlaps(&self, other: &UdpIpMatch) -> bool {
        let ports = |a: Option<PortMatch>, b: Option<PortMatch>| match (a, b) {
            (Some(a), Some(b)) => a.overlaps(&b),
            _ => true,
        };
        fn same<T: PartialEq>(a: Option<T>, b: Option<T>) -> bool {
            a.is_none() || b.is_none() || a == b
        }
        ports(self.udp_src, other.udp_src)
            && ports(self.udp_dst, other.udp_dst)
            && same(self.ipv4_len, other.ipv4_len)
            && same(self.ipv4_src, other.ipv4_src)
            && same(self.ipv4_dst, other.ipv4_dst)
    }
}

impl FlowRule {
    /// Whether a frame with these addresses (none for a socket's datagram)
    /// and these UDP/IP fields (none for a frame of another kind) matches.
    fn matches(&self, macs: Option<&Macs>, key: Option<&FlowKey>) -> bool {
        if let Some(ethernet) = &self.ethernet
            && !macs.is_some_and(|m| ethernet.matches(m))
        {
            return false;
        }
        if self.is_ethernet_only() {
            return true;
        }
        key.is_some_and(|key| self.udp_ip.matches(key))
    }

    fn same_rule(&self, other: &FlowRule) -> bool {
        (self.flow_id, &self.name, self.ethernet, self.udp_ip, &self.queues, &self.transforms)
            == (other.flow_id, &other.name, other.ethernet, other.udp_ip, &other.queues, &other.transforms)
    }

    /// `match.ethernet`, if the rule has one.
    #[cfg_attr(not(any(feature = "dpdk", feature = "af_xdp")), allow(dead_code))]
    pub(crate) fn ethernet(&self) -> Option<MacMatch> {
        self.ethernet
    }

    /// Whether Ethernet addresses alone decide: the rule takes frames of any
    /// kind and spreads over its queues by MAC. A rule with UDP/IP keys, or
    /// with no key at all, takes only Ethernet/IPv4/UDP frames.
    pub(crate) fn is_ethernet_only(&self) -> bool {
        self.ethernet.is_some() && self.udp_ip.is_empty()
    }

    /// Queue indices the rule steers to.
    pub(crate) fn queues(&self) -> &[usize] {
        &self.queues
    }

    /// The UDP/IP keys the rule matches.
    pub(crate) fn udp_ip(&self) -> UdpIpMatch {
        self.udp_ip
    }

    /// The transforms applied before the queue, in config order.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn transforms(&self) -> &[FlowAction] {
        &self.transforms
    }

    /// Whether a packet could match both rules (their matches intersect).
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn overlaps(&self, other: &FlowRule) -> bool {
        let macs = match (self.ethernet, other.ethernet) {
            (Some(a), Some(b)) => a.overlaps(&b),
            _ => true,
        };
        // A rule of addresses alone takes UDP frames too.
        let udp = self.is_ethernet_only() || other.is_ethernet_only() || self.udp_ip.overlaps(&other.udp_ip);
        macs && udp
    }
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
                let ethernet = m.ethernet.as_ref().map(|e| MacMatch { src: e.src_mac(), dst: e.dst_mac() });
                let mut rule = FlowRule {
                    flow_id: flow.id,
                    name: flow.name.clone(),
                    ethernet,
                    udp_ip: UdpIpMatch::of(&m),
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
        self.steer_parsed(Macs::from_frame(frame).as_ref(), FlowKey::from_frame(frame).as_ref())
    }

    /// Picks the queue for a socket's datagram: UDP/IP fields, no Ethernet.
    pub(crate) fn steer(&self, key: &FlowKey) -> Steering {
        self.steer_parsed(None, Some(key))
    }

    fn steer_parsed(&self, macs: Option<&Macs>, key: Option<&FlowKey>) -> Steering {
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.matches(macs, key) {
                let queue = match rule.queues.len() {
                    1 => rule.queues[0],
                    n => {
                        let hash = match (rule.is_ethernet_only(), macs, key) {
                            (true, Some(macs), _) => toeplitz(&macs.rss_input()),
                            (_, _, Some(key)) => toeplitz(&key.rss_input()),
                            _ => unreachable!("a rule matched by addresses alone had them, any other the UDP key"),
                        };
                        rule.queues[(hash % n as u32) as usize]
                    }
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

/// Toeplitz hash of 12 bytes of header fields, as NIC RSS computes it.
/// Written here because the hash is a dozen lines and no maintained crate offers it.
fn toeplitz(input: &[u8; 12]) -> u32 {
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
        assert_eq!(toeplitz(&key([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766).rss_input()), 0x51cc_c178);
        assert_eq!(toeplitz(&key([199, 92, 111, 2], [65, 69, 140, 83], 14230, 4739).rss_input()), 0xc626_b0ea);
    }

    #[test]
    fn ipv4_addresses_match_alone_and_beside_ports() {
        let rx: RxConfig = serde_yaml::from_str(
            "queues: [{name: a, id: 0, cpu_core: 0, batch_size: 1}, {name: b, id: 1, cpu_core: 0, batch_size: 1}]\n\
             flow_isolation: true\n\
             flows:\n\
             - {name: s, id: 7, action: {type: queue, id: 1}, match: {ipv4_src: 10.0.0.7}}\n\
             - {name: d, id: 8, action: {type: queue, id: 0}, match: {ipv4_dst: 10.0.0.2, udp_dst: 5000}}\n",
        )
        .unwrap();
        let table = FlowTable::new(&rx);
        let steer = |src, dst, dport| table.steer(&key(src, dst, 4000, dport));
        assert_eq!(steer([10, 0, 0, 7], [10, 9, 9, 9], 1), Steering::Flow { rule: 0, queue: 1 });
        assert_eq!(steer([10, 0, 0, 8], [10, 0, 0, 2], 5000), Steering::Flow { rule: 1, queue: 0 });
        assert_eq!(steer([10, 0, 0, 8], [10, 0, 0, 2], 5001), Steering::Unmatched, "the port qualifies the address");
        assert_eq!(steer([10, 0, 0, 8], [10, 0, 0, 3], 5000), Steering::Unmatched);
        let (s, d) = (&table.rules[0], &table.rules[1]);
        assert!(s.overlaps(d), "a source and a destination can meet in one packet");
        assert!(!d.udp_ip().overlaps(&UdpIpMatch { ipv4_dst: Some([10, 0, 0, 3]), ..UdpIpMatch::default() }));
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

    /// An Ethernet/IPv4/UDP frame from `src_mac` to `dst_mac`, UDP port `sport` to 5000.
    fn frame(src_mac: [u8; 6], dst_mac: [u8; 6], sport: u16) -> Vec<u8> {
        let headers = crate::headers::UdpFrame {
            src_mac,
            dst_mac,
            src_ip: [10, 0, 0, 1].into(),
            dst_ip: [10, 0, 0, 2].into(),
            src_port: sport,
            dst_port: 5000,
        };
        let mut buf = vec![0u8; 64];
        let len = headers.write(&mut buf, b"data").unwrap();
        buf.truncate(len);
        buf
    }

    #[test]
    fn ethernet_addresses_qualify_a_udp_match_or_decide_alone() {
        let rx: RxConfig = serde_yaml::from_str(
            "queues: [{name: a, id: 0, cpu_core: 0, batch_size: 1}, {name: b, id: 1, cpu_core: 0, batch_size: 1}]\n\
             flow_isolation: true\n\
             flows:\n\
             - {name: f, id: 7, action: {type: queue, id: 0}, match: {udp_dst: 5000, ethernet: {src: \"02:00:00:00:00:0a\"}}}\n\
             - {name: g, id: 8, action: {type: queue, id: 1}, match: {ethernet: {dst: \"02:00:00:00:00:bb\"}}}\n",
        )
        .unwrap();
        let table = FlowTable::new(&rx);
        let (a, b, other) = ([2, 0, 0, 0, 0, 0x0a], [2, 0, 0, 0, 0, 0xbb], [2, 0, 0, 0, 0, 0x77]);
        assert_eq!(table.steer_frame(&frame(a, other, 1)), Steering::Flow { rule: 0, queue: 0 });
        assert_eq!(table.steer_frame(&frame(other, other, 1)), Steering::Unmatched, "the port alone is not enough");
        assert_eq!(table.steer_frame(&frame(other, b, 1)), Steering::Flow { rule: 1, queue: 1 });
        // An ARP frame to b: addresses alone take frames of any kind.
        let mut arp = frame(other, b, 1);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(table.steer_frame(&arp), Steering::Flow { rule: 1, queue: 1 });
        // A socket's datagram has no Ethernet header: no Ethernet rule takes it.
        assert_eq!(table.steer(&key([1; 4], [2; 4], 1, 5000)), Steering::Unmatched);
        // A UDP frame from a to b on port 5000 matches both: the first wins.
        assert!(table.rules[0].overlaps(&table.rules[1]));
        assert_eq!(table.steer_frame(&frame(a, b, 1)), Steering::Flow { rule: 0, queue: 0 });
    }

    #[test]
    fn an_ethernet_only_rule_spreads_by_mac() {
        let rx: RxConfig = serde_yaml::from_str(
            "queues: [{name: a, id: 0, cpu_core: 0, batch_size: 1}, {name: b, id: 1, cpu_core: 0, batch_size: 1}]\n\
             flows: [{name: f, id: 1, action: {type: queue, ids: [0, 1]}, match: {ethernet: {dst: \"02:00:00:00:00:02\"}}}]\n",
        )
        .unwrap();
        let table = FlowTable::new(&rx);
        let mut seen = [0; 2];
        for sender in 0..64u8 {
            let mac = [2, 0, 0, 0, 1, sender];
            let queue_of = |sport| match table.steer_frame(&frame(mac, [2, 0, 0, 0, 0, 2], sport)) {
                Steering::Flow { queue, .. } => queue,
                other => panic!("{other:?}"),
            };
            // The ports change, the MACs do not: one queue per sender.
            assert_eq!(queue_of(1000), queue_of(2000), "sender {sender}");
            seen[queue_of(1000)] += 1;
        }
        assert!(seen[0] > 10 && seen[1] > 10, "{seen:?}");
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
