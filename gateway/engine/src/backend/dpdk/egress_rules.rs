//! An interface's TX flows (`tx.flows`) as egress rte_flow rules, built as
//! plain data like the RX rules: each flow's UDP/IP match becomes the
//! pattern, and its actions the NIC's header transforms on the way out
//! (`vlan_push` as OpenFlow's push/set-VID/set-PCP, `tunnel_encap` as
//! VXLAN_ENCAP, NVGRE_ENCAP, or a raw GRE encap). As on RX, the first
//! matching flow wins.

use std::net::Ipv4Addr;

use daqiri_config::model::{ActionType, Flow, FlowAction, PortMatch, TunnelType};

use super::flow_rules::{self, Action, Item, RuleSpec, VXLAN_PORT};
use crate::flow::UdpIpMatch;

/// 802.1Q, the TPID `vlan_push` uses when the config names none.
const VLAN_TPID: u16 = 0x8100;

/// The egress rules of `flows`, in order.
pub(crate) fn rules(flows: &[Flow]) -> Vec<RuleSpec> {
    let priorities = flow_rules::priorities(flows, |a, b| udp_ip(a).overlaps(&udp_ip(b)));
    flows
        .iter()
        .zip(priorities)
        .map(|(flow, priority)| {
            let m = udp_ip(flow);
            RuleSpec {
                flow: Some(flow.id),
                priority,
                pattern: vec![
                    Item::Eth { src: None, dst: None },
                    Item::Ipv4 {
                        src: m.ipv4_src.map(Ipv4Addr::from),
                        dst: m.ipv4_dst.map(Ipv4Addr::from),
                        total_length: m.ipv4_len,
                    },
                    Item::Udp { src: m.udp_src, dst: m.udp_dst },
                ],
                actions: flow.action_list().iter().flat_map(transform).collect(),
            }
        })
        .collect()
}

fn udp_ip(flow: &Flow) -> UdpIpMatch {
    flow.matches.as_ref().map(UdpIpMatch::of).unwrap_or_default()
}

/// The rte_flow actions of one TX action.
fn transform(action: &FlowAction) -> Vec<Action> {
    match (action.kind, &action.tunnel) {
        (ActionType::VlanPush, _) => vec![
            Action::PushVlan { ethertype: action.ethertype.unwrap_or(VLAN_TPID) },
            Action::SetVlanVid { vid: action.vlan_id.unwrap_or(0) },
            Action::SetVlanPcp { pcp: action.pcp.unwrap_or(0) },
        ],
        (ActionType::TunnelEncap, Some(t)) => {
            let mut definition = vec![
                Item::Eth {
                    src: t.outer_eth_src.as_deref().map(flow_rules::mac),
                    dst: t.outer_eth_dst.as_deref().map(flow_rules::mac),
                },
                Item::Ipv4 {
                    src: flow_rules::ip(&t.outer_ipv4_src),
                    dst: flow_rules::ip(&t.outer_ipv4_dst),
                    total_length: None,
                },
            ];
            vec![match t.kind {
                TunnelType::Vxlan => {
                    definition.push(Item::Udp {
                        src: t.outer_udp_src.map(PortMatch::single),
                        dst: Some(PortMatch::single(t.outer_udp_dst.unwrap_or(VXLAN_PORT))),
                    });
                    definition.push(Item::Vxlan { vni: t.vni });
                    Action::VxlanEncap { definition }
                }
                TunnelType::Nvgre => {
                    definition.push(Item::Nvgre { tni: t.tni, flow_id: t.flow_id });
                    Action::NvgreEncap { definition }
                }
                TunnelType::Gre => Action::RawEncap { header: flow_rules::gre_outer_header(t) },
            }]
        }
        (kind, _) => unreachable!("validated: TX flows transform with vlan_push and tunnel_encap only, not {kind:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(yaml: &str) -> Vec<Flow> {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn port(p: u16) -> Option<PortMatch> {
        Some(PortMatch::single(p))
    }

    #[test]
    fn vlan_push_becomes_push_set_vid_set_pcp_after_the_udp_match() {
        let rules = rules(&flows(
            "- {name: tag, id: 1, actions: [{type: vlan_push, vlan_id: 100, pcp: 5}], match: {udp_dst: 5000, ipv4_len: 1028}}\n\
             - {name: qinq, id: 2, actions: [{type: vlan_push, vlan_id: 7, ethertype: 0x88a8}]}\n",
        ));
        assert_eq!(
            rules[0],
            RuleSpec {
                flow: Some(1),
                priority: 0,
                pattern: vec![
                    Item::Eth { src: None, dst: None },
                    Item::Ipv4 { src: None, dst: None, total_length: Some(1028) },
                    Item::Udp { src: None, dst: port(5000) },
                ],
                actions: vec![
                    Action::PushVlan { ethertype: 0x8100 },
                    Action::SetVlanVid { vid: 100 },
                    Action::SetVlanPcp { pcp: 5 },
                ],
            }
        );
        assert_eq!(rules[1].actions[0], Action::PushVlan { ethertype: 0x88a8 }, "the configured TPID");
        assert_eq!(rules[1].priority, 1, "it matches everything, so it ranks below the flow before it");
    }

    #[test]
    fn ipv4_addresses_become_the_ipv4_items_fields() {
        let rules = rules(&flows(
            "- {name: a, id: 1, actions: [{type: vlan_push, vlan_id: 1}], match: {ipv4_src: 10.0.0.1, ipv4_dst: 10.0.0.2}}\n\
             - {name: b, id: 2, actions: [{type: vlan_push, vlan_id: 2}], match: {ipv4_dst: 10.0.0.3}}\n",
        ));
        let ip = |src: Option<[u8; 4]>, dst: Option<[u8; 4]>| Item::Ipv4 {
            src: src.map(Ipv4Addr::from),
            dst: dst.map(Ipv4Addr::from),
            total_length: None,
        };
        assert_eq!(rules[0].pattern[1], ip(Some([10, 0, 0, 1]), Some([10, 0, 0, 2])));
        assert_eq!(rules[1].pattern[1], ip(None, Some([10, 0, 0, 3])));
        assert_eq!(rules[1].priority, 0, "different destinations never meet in one packet");
    }

    #[test]
    fn tunnels_encap_with_their_outer_headers() {
        let outer = "outer_eth_src: \"02:00:00:00:00:01\", outer_eth_dst: \"02:00:00:00:00:02\", outer_ipv4_src: 10.1.0.1, outer_ipv4_dst: 10.1.0.2";
        let rules = rules(&flows(&format!(
            "- {{name: v, id: 1, actions: [{{type: tunnel_encap, tunnel: {{type: vxlan, vni: 4242, outer_udp_src: 1000, {outer}}}}}], match: {{udp_dst: 1}}}}\n\
             - {{name: n, id: 2, actions: [{{type: tunnel_encap, tunnel: {{type: nvgre, tni: 77, flow_id: 3, {outer}}}}}], match: {{udp_dst: 2}}}}\n\
             - {{name: g, id: 3, actions: [{{type: tunnel_encap, tunnel: {{type: gre, {outer}}}}}], match: {{udp_dst: 3}}}}\n"
        )));
        let eth = Item::Eth { src: Some([2, 0, 0, 0, 0, 1]), dst: Some([2, 0, 0, 0, 0, 2]) };
        let ip = Item::Ipv4 {
            src: Some(Ipv4Addr::new(10, 1, 0, 1)),
            dst: Some(Ipv4Addr::new(10, 1, 0, 2)),
            total_length: None,
        };
        assert_eq!(
            rules[0].actions,
            vec![Action::VxlanEncap {
                definition: vec![
                    eth.clone(),
                    ip.clone(),
                    Item::Udp { src: port(1000), dst: port(4789) },
                    Item::Vxlan { vni: Some(4242) }
                ]
            }]
        );
        assert_eq!(
            rules[1].actions,
            vec![Action::NvgreEncap { definition: vec![eth, ip, Item::Nvgre { tni: Some(77), flow_id: Some(3) }] }]
        );
        let Action::RawEncap { header } = &rules[2].actions[0] else { panic!("{:?}", rules[2].actions) };
        assert_eq!(header.len(), 14 + 20 + 4, "Ethernet, IPv4, GRE");
        assert_eq!(&header[..12], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1], "destination, then source MAC");
        assert_eq!(header[14 + 9], 47, "IPv4 protocol GRE");
        assert_eq!(&header[14 + 12..14 + 20], &[10, 1, 0, 1, 10, 1, 0, 2]);
        assert_eq!(&header[34..], &[0, 0, 0x08, 0x00], "GRE carrying IPv4");
        assert!(rules.iter().all(|r| r.priority == 0), "disjoint matches share the top level");
    }
}
