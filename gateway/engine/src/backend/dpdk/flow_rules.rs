//! An interface's RX flow table as rte_flow rules, built as plain data: the
//! [`rte`](super::rte) layer only encodes them, so the translation of every
//! flow and action is tested here, including what no PMD on a test machine
//! runs (tunnel decap, MARK).
//!
//! Rules keep software steering's meaning: the first matching flow wins
//! (a rule gets a lower priority than every earlier rule it overlaps, and
//! rules that cannot meet share priority 0, which NICs with few levels
//! need), and with isolation off a last catch-all rule sends the rest to
//! the first queue.

use std::net::Ipv4Addr;

use daqiri_config::model::{ActionType, FlowAction, PortMatch, Tunnel, TunnelType};

use crate::flow::{FlowRule, FlowTable};

/// VXLAN's IANA UDP port, the outer destination when the config names none.
pub(super) const VXLAN_PORT: u16 = 4789;
/// GRE's protocol type for IPv4, the default `gre_protocol`.
pub(super) const GRE_IPV4: u16 = 0x0800;
/// GRE's protocol type for Ethernet frames (NVGRE and Ethernet-over-GRE).
const GRE_ETHERNET: u16 = 0x6558;

/// One rte_flow rule (group 0): ingress for RX flows, egress for TX flows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleSpec {
    /// The flow it programs; `None` for the catch-all rule.
    pub flow: Option<u32>,
    /// rte_flow priority: lower wins.
    pub priority: u32,
    pub pattern: Vec<Item>,
    pub actions: Vec<Action>,
}

/// A pattern item; `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    Eth {
        src: Option<[u8; 6]>,
        dst: Option<[u8; 6]>,
    },
    Vlan,
    Ipv4 {
        src: Option<Ipv4Addr>,
        dst: Option<Ipv4Addr>,
        total_length: Option<u16>,
    },
    /// Port ranges become rte_flow `spec`..`last` ranges.
    Udp {
        src: Option<PortMatch>,
        dst: Option<PortMatch>,
    },
    Vxlan {
        vni: Option<u32>,
    },
    Gre {
        protocol: Option<u16>,
    },
    Nvgre {
        tni: Option<u32>,
        flow_id: Option<u8>,
    },
}

/// An action, in the order the rule applies them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// OF_POP_VLAN: strip the outer VLAN tag.
    PopVlan,
    VxlanDecap,
    NvgreDecap,
    /// RAW_DECAP of these outer headers (GRE has no dedicated decap action).
    RawDecap {
        header: Vec<u8>,
    },
    /// OF_PUSH_VLAN with this TPID, then OF_SET_VLAN_VID and OF_SET_VLAN_PCP.
    PushVlan {
        ethertype: u16,
    },
    SetVlanVid {
        vid: u16,
    },
    SetVlanPcp {
        pcp: u8,
    },
    /// VXLAN_ENCAP / NVGRE_ENCAP with these outer headers (every field given).
    VxlanEncap {
        definition: Vec<Item>,
    },
    NvgreEncap {
        definition: Vec<Item>,
    },
    /// RAW_ENCAP of these outer headers (GRE has no dedicated encap action).
    RawEncap {
        header: Vec<u8>,
    },
    /// MARK: the packet carries its flow id to the receiver.
    Mark {
        id: u32,
    },
    Queue {
        index: u16,
    },
    /// Toeplitz RSS with software steering's key, over these queues.
    Rss {
        queues: Vec<u16>,
        over: RssFields,
    },
}

/// The header fields RSS hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RssFields {
    /// IPv4 addresses and UDP ports.
    Ipv4Udp,
    /// Ethernet addresses: a rule that matches them alone.
    Ethernet,
}

/// Whether rules carry a MARK of their flow id. PMDs without MARK get
/// rules without it, and the receiver finds the flow id by matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marking {
    On,
    Off,
}

/// Whether `table` needs the NIC's flow engine at all on a port with
/// `rx_queues` queues: steering flows to one of several queues, or a header
/// transform. Otherwise software steering does the same job. Several
/// queues with no flows need none: each receives what the device's own
/// distribution (RSS, a socket fanout) puts on it, as on a NIC without rules.
pub(crate) fn needs_flow_engine(table: &FlowTable, rx_queues: usize) -> bool {
    (rx_queues > 1 && !table.rules.is_empty()) || table.rules.iter().any(|r| !r.transforms().is_empty())
}

/// The rules that program `table` on a port with `rx_queues` queues
/// (queue positions in the config are DPDK queue indices), `isolated` if
/// the port is in isolated mode (where unmatched packets need a rule too).
pub(crate) fn rules(table: &FlowTable, rx_queues: usize, isolated: bool, marking: Marking) -> Vec<RuleSpec> {
    let priorities = priorities(&table.rules, FlowRule::overlaps);
    let mut out: Vec<RuleSpec> = table
        .rules
        .iter()
        .zip(&priorities)
        .map(|(rule, &priority)| RuleSpec {
            flow: Some(rule.flow_id),
            priority,
            pattern: pattern(rule),
            actions: actions(rule, marking),
        })
        .collect();
    // Unmatched packets go to the first queue, as in software steering.
    if !table.isolation() && ((rx_queues > 1 && !table.rules.is_empty()) || isolated) {
        out.push(RuleSpec {
            flow: None,
            priority: priorities.iter().max().map_or(0, |p| p + 1),
            pattern: vec![Item::Eth { src: None, dst: None }],
            actions: vec![Action::Queue { index: 0 }],
        });
    }
    out
}

/// Each rule's priority: one below the lowest of the earlier rules it
/// overlaps, 0 when it overlaps none.
pub(super) fn priorities<T>(rules: &[T], overlaps: impl Fn(&T, &T) -> bool) -> Vec<u32> {
    let mut levels: Vec<u32> = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let level =
            rules[..i].iter().zip(&levels).filter(|(earlier, _)| overlaps(earlier, rule)).map(|(_, &l)| l + 1).max();
        levels.push(level.unwrap_or(0));
    }
    levels
}

fn pattern(rule: &FlowRule) -> Vec<Item> {
    let m = rule.udp_ip();
    let inner_ip = Item::Ipv4 {
        src: m.ipv4_src.map(Ipv4Addr::from),
        dst: m.ipv4_dst.map(Ipv4Addr::from),
        total_length: m.ipv4_len,
    };
    let inner_udp = Item::Udp { src: m.udp_src, dst: m.udp_dst };
    let transforms = rule.transforms();
    let tunnel = transforms.iter().position(|a| a.kind == ActionType::TunnelDecap);
    // A vlan_pop before the decap (or without one) pops the outer tag.
    let outer_vlan =
        transforms.iter().position(|a| a.kind == ActionType::VlanPop).is_some_and(|v| tunnel.is_none_or(|t| v < t));
    let inner_vlan =
        tunnel.is_some() && transforms.iter().skip(tunnel.unwrap_or(0)).any(|a| a.kind == ActionType::VlanPop);
    let Some(t) = tunnel.and_then(|i| transforms[i].tunnel.as_ref()) else {
        let wire = rule.ethernet();
        let mut items = vec![Item::Eth { src: wire.and_then(|m| m.src), dst: wire.and_then(|m| m.dst) }];
        if outer_vlan {
            items.push(Item::Vlan);
        }
        // Addresses alone take frames of any kind.
        if !rule.is_ethernet_only() {
            items.extend([inner_ip, inner_udp]);
        }
        return items;
    };
    let mut items =
        vec![Item::Eth { src: t.outer_eth_src.as_deref().map(mac), dst: t.outer_eth_dst.as_deref().map(mac) }];
    if outer_vlan {
        items.push(Item::Vlan);
    }
    items.push(Item::Ipv4 { src: ip(&t.outer_ipv4_src), dst: ip(&t.outer_ipv4_dst), total_length: None });
    let inner_eth = match t.kind {
        TunnelType::Vxlan => {
            items.push(Item::Udp {
                src: t.outer_udp_src.map(PortMatch::single),
                dst: Some(PortMatch::single(t.outer_udp_dst.unwrap_or(VXLAN_PORT))),
            });
            items.push(Item::Vxlan { vni: t.vni });
            true
        }
        TunnelType::Nvgre => {
            items.push(Item::Nvgre { tni: t.tni, flow_id: None });
            true
        }
        TunnelType::Gre => {
            let protocol = t.gre_protocol.unwrap_or(GRE_IPV4);
            items.push(Item::Gre { protocol: Some(protocol) });
            protocol == GRE_ETHERNET
        }
    };
    if inner_eth {
        items.push(Item::Eth { src: None, dst: None });
        if inner_vlan {
            items.push(Item::Vlan);
        }
    }
    items.extend([inner_ip, inner_udp]);
    items
}

fn actions(rule: &FlowRule, marking: Marking) -> Vec<Action> {
    let mut out: Vec<Action> = rule.transforms().iter().map(transform).collect();
    if marking == Marking::On {
        out.push(Action::Mark { id: rule.flow_id });
    }
    let queues: Vec<u16> = rule.queues().iter().map(|&q| q as u16).collect();
    out.push(match queues.as_slice() {
        [one] => Action::Queue { index: *one },
        _ => {
            Action::Rss { queues, over: if rule.is_ethernet_only() { RssFields::Ethernet } else { RssFields::Ipv4Udp } }
        }
    });
    out
}

fn transform(action: &FlowAction) -> Action {
    match (action.kind, &action.tunnel) {
        (ActionType::VlanPop, _) => Action::PopVlan,
        (ActionType::TunnelDecap, Some(t)) => match t.kind {
            TunnelType::Vxlan => Action::VxlanDecap,
            TunnelType::Nvgre => Action::NvgreDecap,
            TunnelType::Gre => Action::RawDecap { header: gre_outer_header(t) },
        },
        (kind, _) => unreachable!("validated: RX flows transform with vlan_pop and tunnel_decap only, not {kind:?}"),
    }
}

/// The outer Ethernet, IPv4 and GRE headers a GRE decap removes or an
/// encap adds, as RAW_DECAP / RAW_ENCAP take them (the NIC fills in the
/// outer lengths and checksum).
pub(super) fn gre_outer_header(t: &Tunnel) -> Vec<u8> {
    let ipv4 = etherparse::Ipv4Header::new(
        0,
        64,
        etherparse::IpNumber::GRE,
        ip(&t.outer_ipv4_src).unwrap_or(Ipv4Addr::UNSPECIFIED).octets(),
        ip(&t.outer_ipv4_dst).unwrap_or(Ipv4Addr::UNSPECIFIED).octets(),
    )
    .expect("a zero payload length fits");
    let eth = etherparse::Ethernet2Header {
        source: t.outer_eth_src.as_deref().map_or([0; 6], mac),
        destination: t.outer_eth_dst.as_deref().map_or([0; 6], mac),
        ether_type: etherparse::EtherType::IPV4,
    };
    let mut header = Vec::with_capacity(38);
    header.extend_from_slice(&eth.to_bytes());
    header.extend_from_slice(&ipv4.to_bytes());
    header.extend_from_slice(&[0, 0]); // no checksum, key or sequence; version 0
    header.extend_from_slice(&t.gre_protocol.unwrap_or(GRE_IPV4).to_be_bytes());
    header
}

pub(super) fn ip(text: &Option<String>) -> Option<Ipv4Addr> {
    text.as_deref().map(|t| t.parse().expect("validated IPv4 address"))
}

pub(super) fn mac(text: &str) -> [u8; 6] {
    let mut out = [0u8; 6];
    for (byte, part) in out.iter_mut().zip(text.split(':')) {
        *byte = u8::from_str_radix(part, 16).expect("validated MAC address");
    }
    out
}

#[cfg(test)]
mod tests {
    use daqiri_config::model::RxConfig;

    use super::*;

    fn table(yaml: &str) -> FlowTable {
        let rx: RxConfig = serde_yaml::from_str(yaml).unwrap();
        FlowTable::new(&rx)
    }

    const TWO_QUEUES: &str =
        "queues: [{name: a, id: 0, cpu_core: 0, batch_size: 1}, {name: b, id: 3, cpu_core: 0, batch_size: 1}]\n";

    fn udp(src: Option<(u16, u16)>, dst: Option<(u16, u16)>) -> Item {
        let range = |(first, last)| PortMatch { first, last };
        Item::Udp { src: src.map(range), dst: dst.map(range) }
    }

    const ANY_ETH: Item = Item::Eth { src: None, dst: None };
    const ANY_IP: Item = Item::Ipv4 { src: None, dst: None, total_length: None };

    #[test]
    fn udp_ports_ranges_and_ipv4_length_become_one_pattern_with_mark_and_queue() {
        let t = table(&format!(
            "{TWO_QUEUES}flow_isolation: true\nflows:\n\
             - {{name: f, id: 7, action: {{type: queue, id: 3}}, match: {{udp_src: 4000, udp_dst: \"5000-5009\", ipv4_len: 1028}}}}\n"
        ));
        let rules = rules(&t, 2, false, Marking::On);
        assert_eq!(
            rules,
            vec![RuleSpec {
                flow: Some(7),
                priority: 0,
                pattern: vec![
                    ANY_ETH,
                    Item::Ipv4 { src: None, dst: None, total_length: Some(1028) },
                    udp(Some((4000, 4000)), Some((5000, 5009))),
                ],
                actions: vec![Action::Mark { id: 7 }, Action::Queue { index: 1 }],
            }],
            "queue id 3 is DPDK queue 1; isolation adds no catch-all"
        );
    }

    #[test]
    fn ethernet_addresses_lead_the_pattern_and_alone_spread_by_mac() {
        let t = table(&format!(
            "{TWO_QUEUES}flow_isolation: true\nflows:\n\
             - {{name: f, id: 1, action: {{type: queue, id: 0}}, match: {{udp_dst: 9, ethernet: {{src: \"02:00:00:00:00:0a\"}}}}}}\n\
             - {{name: g, id: 2, action: {{type: queue, ids: [0, 3]}}, match: {{ethernet: {{dst: \"02:00:00:00:00:0b\"}}}}}}\n\
             - {{name: h, id: 3, action: {{type: queue, id: 3}}, match: {{ethernet: {{dst: \"02:00:00:00:00:0c\"}}}}}}\n"
        ));
        let rules = rules(&t, 2, false, Marking::Off);
        let src = Item::Eth { src: Some([2, 0, 0, 0, 0, 0x0a]), dst: None };
        assert_eq!(rules[0].pattern, vec![src, ANY_IP, udp(None, Some((9, 9)))]);
        let to_b = Item::Eth { src: None, dst: Some([2, 0, 0, 0, 0, 0x0b]) };
        assert_eq!((rules[1].pattern.clone(), rules[1].priority), (vec![to_b], 1), "a frame from a to b matches both");
        assert_eq!(rules[1].actions, vec![Action::Rss { queues: vec![0, 1], over: RssFields::Ethernet }]);
        assert_eq!(rules[2].priority, 1, "to c meets the first rule, not the second");
    }

    #[test]
    fn without_mark_and_isolation_rules_end_with_a_catch_all_to_the_first_queue() {
        let t = table(&format!(
            "{TWO_QUEUES}flows:\n\
             - {{name: f, id: 1, action: {{type: queue, ids: [0, 3]}}}}\n\
             - {{name: g, id: 2, action: {{type: queue, id: 0}}, match: {{udp_dst: 9}}}}\n"
        ));
        let rules = rules(&t, 2, false, Marking::Off);
        assert_eq!(rules[0].actions, vec![Action::Rss { queues: vec![0, 1], over: RssFields::Ipv4Udp }]);
        assert_eq!(rules[0].pattern, vec![ANY_ETH, ANY_IP, udp(None, None)]);
        assert_eq!((rules[1].priority, rules[1].actions.clone()), (1, vec![Action::Queue { index: 0 }]));
        assert_eq!(
            rules[2],
            RuleSpec { flow: None, priority: 2, pattern: vec![ANY_ETH], actions: vec![Action::Queue { index: 0 }] }
        );
        let one_queue = |isolated| super::rules(&t, 1, isolated, Marking::Off).len();
        assert_eq!(
            (one_queue(false), one_queue(true)),
            (2, 3),
            "an isolated port needs the catch-all even with one queue"
        );
    }

    #[test]
    fn priorities_keep_first_match_wins_and_disjoint_rules_share_level_zero() {
        let t = table(&format!(
            "{TWO_QUEUES}flow_isolation: true\nflows:\n\
             - {{name: a, id: 1, action: {{type: queue, id: 0}}, match: {{udp_dst: \"5000-5009\"}}}}\n\
             - {{name: b, id: 2, action: {{type: queue, id: 3}}, match: {{udp_dst: 6000}}}}\n\
             - {{name: c, id: 3, action: {{type: queue, id: 3}}, match: {{udp_dst: 5005}}}}\n\
             - {{name: d, id: 4, action: {{type: queue, id: 0}}, match: {{udp_src: 1}}}}\n\
             - {{name: e, id: 5, action: {{type: queue, id: 0}}, match: {{ipv4_len: 100, udp_dst: 6000}}}}\n"
        ));
        let levels: Vec<u32> = rules(&t, 2, false, Marking::Off).iter().map(|r| r.priority).collect();
        // c lies inside a; d (any destination) overlaps a, b and c; e overlaps b and d.
        assert_eq!(levels, vec![0, 0, 1, 2, 3]);
    }

    #[test]
    fn vlan_pop_matches_the_tag_and_pops_it_before_marking() {
        let t = table(&format!(
            "{TWO_QUEUES}flows:\n\
             - {{name: v, id: 9, actions: [{{type: vlan_pop}}, {{type: queue, id: 3}}], match: {{udp_dst: 7}}}}\n"
        ));
        let rule = &rules(&t, 1, false, Marking::On)[0];
        assert_eq!(rule.pattern, vec![ANY_ETH, Item::Vlan, ANY_IP, udp(None, Some((7, 7)))]);
        assert_eq!(rule.actions, vec![Action::PopVlan, Action::Mark { id: 9 }, Action::Queue { index: 1 }]);
    }

    #[test]
    fn vxlan_decap_matches_outer_headers_then_the_inner_flow() {
        let t = table(&format!(
            "{TWO_QUEUES}flows:\n\
             - {{name: x, id: 4, match: {{udp_dst: 5000}}, actions: [\
                 {{type: tunnel_decap, tunnel: {{type: vxlan, outer_eth_dst: \"02:00:00:00:00:0a\", \
                   outer_ipv4_src: 10.0.0.1, outer_ipv4_dst: 10.0.0.2, vni: 42}}}}, {{type: queue, id: 0}}]}}\n"
        ));
        let rule = &rules(&t, 2, false, Marking::On)[0];
        assert_eq!(
            rule.pattern,
            vec![
                Item::Eth { src: None, dst: Some([2, 0, 0, 0, 0, 0x0a]) },
                Item::Ipv4 {
                    src: Some(Ipv4Addr::new(10, 0, 0, 1)),
                    dst: Some(Ipv4Addr::new(10, 0, 0, 2)),
                    total_length: None
                },
                udp(None, Some((4789, 4789))),
                Item::Vxlan { vni: Some(42) },
                ANY_ETH,
                ANY_IP,
                udp(None, Some((5000, 5000))),
            ]
        );
        assert_eq!(rule.actions, vec![Action::VxlanDecap, Action::Mark { id: 4 }, Action::Queue { index: 0 }]);
    }

    #[test]
    fn nvgre_and_gre_decap_match_their_headers_and_gre_strips_raw_outer_bytes() {
        let t = table(&format!(
            "{TWO_QUEUES}flows:\n\
             - {{name: n, id: 1, actions: [{{type: tunnel_decap, tunnel: {{type: nvgre, tni: 77}}}}, {{type: queue, id: 0}}]}}\n\
             - {{name: g, id: 2, actions: [{{type: tunnel_decap, tunnel: {{type: gre, outer_ipv4_dst: 10.1.1.1}}}}, {{type: queue, id: 3}}], match: {{udp_dst: 1}}}}\n"
        ));
        let rules = rules(&t, 2, false, Marking::Off);
        assert_eq!(
            rules[0].pattern,
            vec![ANY_ETH, ANY_IP, Item::Nvgre { tni: Some(77), flow_id: None }, ANY_ETH, ANY_IP, udp(None, None)]
        );
        assert_eq!(rules[0].actions, vec![Action::NvgreDecap, Action::Queue { index: 0 }]);
        assert_eq!(
            rules[1].pattern,
            vec![
                ANY_ETH,
                Item::Ipv4 { src: None, dst: Some(Ipv4Addr::new(10, 1, 1, 1)), total_length: None },
                Item::Gre { protocol: Some(0x0800) },
                ANY_IP,
                udp(None, Some((1, 1))),
            ],
            "GRE over IPv4 carries no inner Ethernet"
        );
        let Action::RawDecap { header } = &rules[1].actions[0] else { panic!("{:?}", rules[1].actions) };
        assert_eq!(header.len(), 14 + 20 + 4, "outer Ethernet, IPv4 and base GRE header");
        assert_eq!(&header[12..14], &[0x08, 0x00]);
        assert_eq!(header[14 + 9], 47, "IP protocol GRE");
        assert_eq!(&header[14 + 16..14 + 20], &[10, 1, 1, 1]);
        assert_eq!(&header[36..38], &[0x08, 0x00], "GRE protocol IPv4");
    }

    #[test]
    fn only_several_queues_or_transforms_need_the_flow_engine() {
        let plain = table(&format!("{TWO_QUEUES}flows: [{{name: f, id: 1, action: {{type: queue, id: 0}}}}]\n"));
        assert!(!needs_flow_engine(&plain, 1));
        assert!(needs_flow_engine(&plain, 2));
        let popping = table(&format!(
            "{TWO_QUEUES}flows: [{{name: f, id: 1, actions: [{{type: vlan_pop}}, {{type: queue, id: 0}}]}}]\n"
        ));
        assert!(needs_flow_engine(&popping, 1));
    }
}
