//! Flow rules: actions, matches, flow classes, flex items.

use std::collections::HashSet;

use crate::diagnostic::{Report, YamlPath};
use crate::endpoint::Transport;
use crate::model::{ActionType, EthernetMatch, Flow, FlowAction, FlowClass, FlowMatch, Tunnel, TunnelType, parse_mac};

use super::context::InterfaceCtx;
use super::lists::{duplicates, valid_list};

pub(super) fn check_rx_flows(ctx: &InterfaceCtx<'_>, report: &mut Report) {
    let Some(rx) = &ctx.iface.rx else { return };
    let rx_path = ctx.path.key("rx");
    let list = rx_path.key("flows");
    duplicates(rx.flows.iter().map(|f| &f.name), &list, "name", "flow name", report);
    duplicates(rx.flows.iter().map(|f| &f.id), &list, "id", "flow id", report);
    check_flex_items(ctx, &rx_path, report);
    if ctx.transport() == Some(Transport::Tcp) && !rx.flows.is_empty() {
        report.error(
            &list,
            "TCP streams carry no datagrams to match; remove flows (the byte stream goes to the first RX queue)",
        );
    }
    if rx.flow_isolation && rx.flows.is_empty() {
        report.warn(
            &rx_path.key("flow_isolation"),
            "flow isolation with no flows: no packet reaches a queue until a dynamic flow is added",
        );
    }
    let queue_ids: Vec<u16> = rx.queues.iter().map(|q| q.id).collect();
    let flex_ids: HashSet<u32> = rx.flex_items.iter().map(|f| f.id).collect();
    let mut interface_class: Option<(FlowClass, usize)> = None;
    for (i, flow) in rx.flows.iter().enumerate() {
        let path = list.index(i);
        let actions = action_list(flow, &path, true, report);
        let transforms = actions.iter().filter(|(_, a)| a.kind != ActionType::Queue).count();
        for (action_path, action) in &actions {
            check_action(action, action_path, true, &queue_ids, report);
        }
        match actions.last() {
            Some((_, last)) if last.kind == ActionType::Queue => {}
            Some((p, _)) => report.error(p, "RX action lists must end with type: queue"),
            None => {}
        }
        if actions.iter().filter(|(_, a)| a.kind == ActionType::Queue).count() > 1 {
            report.error(&path.key("actions"), "only one queue action is allowed, the last one");
        }
        let Some(m) = &flow.matches else { continue };
        let match_path = path.key("match");
        let Some(class) = m.class() else {
            report
                .error(&match_path, "UDP/IP, flex-item and eCPRI keys cannot be combined in one match; pick one class");
            continue;
        };
        match interface_class {
            None => interface_class = Some((class, i)),
            Some((first, at)) if first != class => report.error(
                &match_path,
                format!(
                    "this is a {} flow but {} is {}; one RX interface uses exactly one flow class",
                    class.as_str(),
                    list.index(at),
                    first.as_str()
                ),
            ),
            Some(_) => {}
        }
        check_match(m, class, &match_path, &flex_ids, report);
        if let Some(ethernet) = &m.ethernet {
            check_ethernet(ethernet, &match_path.key("ethernet"), report);
            if actions.iter().any(|(_, a)| a.kind == ActionType::TunnelDecap) {
                report.error(
                    &match_path.key("ethernet"),
                    "with tunnel_decap, the wire's Ethernet addresses are the tunnel's outer_eth_src and outer_eth_dst; give them there",
                );
            }
        }
        if class == FlowClass::Flex && transforms > 0 {
            report.error(&path.key("actions"), "flex-item flows cannot use VLAN or tunnel transforms");
        }
        if class == FlowClass::Ecpri && flow.queue_ids().len() > 1 {
            report.error(&path, "eCPRI flows cannot use multi-queue RSS (no UDP/IP tuple to hash); give one queue id");
        }
        if class != FlowClass::UdpIp && !ctx.is_raw() {
            report.error(
                &match_path,
                format!(
                    "{} matches need a raw stream; socket streams match UDP ports, IPv4 addresses and ipv4_len",
                    class.as_str()
                ),
            );
        }
    }
}

pub(super) fn check_tx_flows(ctx: &InterfaceCtx<'_>, report: &mut Report) {
    let Some(tx) = &ctx.iface.tx else { return };
    let list = ctx.path.key("tx").key("flows");
    duplicates(tx.flows.iter().map(|f| &f.name), &list, "name", "flow name", report);
    duplicates(tx.flows.iter().map(|f| &f.id), &list, "id", "flow id", report);
    if !tx.flows.is_empty() && !ctx.is_raw() {
        report.error(&list, "TX flows are NIC transforms and exist only for raw streams");
    }
    for (i, flow) in tx.flows.iter().enumerate() {
        let path = list.index(i);
        let actions = action_list(flow, &path, false, report);
        for (action_path, action) in &actions {
            check_action(action, action_path, false, &[], report);
        }
        if let Some(m) = &flow.matches
            && (m.has_flex() || m.ecpri.is_some())
        {
            report.error(
                &path.key("match"),
                "TX flows match only UDP/IP keys (udp_src, udp_dst, ipv4_len, ipv4_src, ipv4_dst)",
            );
        }
    }
}

fn action_list<'f>(
    flow: &'f Flow,
    path: &YamlPath,
    is_rx: bool,
    report: &mut Report,
) -> Vec<(YamlPath, &'f FlowAction)> {
    match (&flow.action, &flow.actions) {
        (Some(_), Some(_)) => {
            report.error(&path.key("action"), "give either action or actions, not both");
            Vec::new()
        }
        (Some(a), None) => vec![(path.key("action"), a)],
        (None, Some(list)) if list.is_empty() => {
            report.error(&path.key("actions"), "the action list is empty");
            Vec::new()
        }
        (None, Some(list)) => list.iter().enumerate().map(|(i, a)| (path.key("actions").index(i), a)).collect(),
        (None, None) => {
            let what = if is_rx {
                "a queue action such as action: {type: queue, id: 0}"
            } else {
                "actions (vlan_push or tunnel_encap)"
            };
            report.error(path, format!("flow \"{}\" has no action; add {what}", flow.name));
            Vec::new()
        }
    }
}

fn check_action(action: &FlowAction, path: &YamlPath, is_rx: bool, queue_ids: &[u16], report: &mut Report) {
    let allowed: &[ActionType] = if is_rx {
        &[ActionType::Queue, ActionType::VlanPop, ActionType::TunnelDecap]
    } else {
        &[ActionType::VlanPush, ActionType::TunnelEncap]
    };
    if !allowed.contains(&action.kind) {
        let side = if is_rx { "RX" } else { "TX" };
        report.error(
            &path.key("type"),
            format!(
                "{} is not an {side} flow action; {}",
                action.kind.as_str(),
                valid_list(allowed.iter().map(|a| a.as_str()))
            ),
        );
        return;
    }
    let stray = |key: &str, present: bool, report: &mut Report| {
        if present {
            report.error(&path.key(key), format!("{key} does not belong to a {} action", action.kind.as_str()));
        }
    };
    let is = |kind: ActionType| action.kind == kind;
    stray("id", action.id.is_some() && !is(ActionType::Queue), report);
    stray("ids", action.ids.is_some() && !is(ActionType::Queue), report);
    for (key, present) in [
        ("vlan_id", action.vlan_id.is_some()),
        ("pcp", action.pcp.is_some()),
        ("dei", action.dei.is_some()),
        ("ethertype", action.ethertype.is_some()),
    ] {
        stray(key, present && !is(ActionType::VlanPush), report);
    }
    stray("tunnel", action.tunnel.is_some() && !is(ActionType::TunnelDecap) && !is(ActionType::TunnelEncap), report);
    match action.kind {
        ActionType::Queue => check_queue_action(action, path, queue_ids, report),
        ActionType::VlanPush => {
            match action.vlan_id {
                None => report.error(&path.key("vlan_id"), "vlan_push needs vlan_id (0..4095)"),
                Some(v) if v > 4095 => {
                    report.error(&path.key("vlan_id"), format!("{v} is out of range; valid: 0..4095"))
                }
                Some(_) => {}
            }
            if action.pcp.is_some_and(|p| p > 7) {
                report.error(&path.key("pcp"), "out of range; valid: 0..7");
            }
            if action.dei.is_some_and(|d| d > 1) {
                report.error(&path.key("dei"), "out of range; valid: 0 or 1");
            }
        }
        ActionType::TunnelDecap | ActionType::TunnelEncap => match &action.tunnel {
            None => report.error(&path.key("tunnel"), "tunnel actions need tunnel: {type: vxlan | gre | nvgre, ...}"),
            Some(t) => check_tunnel(t, &path.key("tunnel"), action.kind == ActionType::TunnelEncap, report),
        },
        ActionType::VlanPop => {}
    }
}

fn check_queue_action(action: &FlowAction, path: &YamlPath, queue_ids: &[u16], report: &mut Report) {
    let targets: Vec<(YamlPath, u16)> = match (&action.id, &action.ids) {
        (Some(_), Some(_)) => {
            report.error(
                &path.key("ids"),
                "id and ids are mutually exclusive; use id for one queue, ids for RSS over several",
            );
            return;
        }
        (None, None) => {
            report.error(
                &path.key("id"),
                format!("queue actions need id (one queue) or ids (RSS); {}", valid_list(queue_ids)),
            );
            return;
        }
        (Some(id), None) => vec![(path.key("id"), *id)],
        (None, Some(ids)) => {
            if ids.is_empty() {
                report.error(&path.key("ids"), format!("ids must list at least one queue; {}", valid_list(queue_ids)));
            }
            duplicates(ids, &path.key("ids"), "", "queue id", report);
            ids.iter().enumerate().map(|(i, id)| (path.key("ids").index(i), *id)).collect()
        }
    };
    for (p, id) in targets {
        if !queue_ids.contains(&id) {
            report.error(
                &p,
                format!("queue {id} does not exist on this interface's rx.queues; {}", valid_list(queue_ids)),
            );
        }
    }
}

fn check_tunnel(t: &Tunnel, path: &YamlPath, encap: bool, report: &mut Report) {
    if encap {
        for (key, value) in [
            ("outer_eth_src", &t.outer_eth_src),
            ("outer_eth_dst", &t.outer_eth_dst),
            ("outer_ipv4_src", &t.outer_ipv4_src),
            ("outer_ipv4_dst", &t.outer_ipv4_dst),
        ] {
            if value.is_none() {
                report.error(&path.key(key), format!("tunnel_encap needs {key}"));
            }
        }
    }
    for (key, value) in [("outer_eth_src", &t.outer_eth_src), ("outer_eth_dst", &t.outer_eth_dst)] {
        if let Some(mac) = value
            && !is_mac(mac)
        {
            report.error(&path.key(key), format!("\"{mac}\" is not a MAC address such as 02:00:00:00:00:01"));
        }
    }
    for (key, value) in [("outer_ipv4_src", &t.outer_ipv4_src), ("outer_ipv4_dst", &t.outer_ipv4_dst)] {
        if let Some(ip) = value
            && ip.parse::<std::net::Ipv4Addr>().is_err()
        {
            report.error(
                &path.key(key),
                format!("\"{ip}\" is not an IPv4 address (IPv6 outer headers are not supported in v1)"),
            );
        }
    }
    let only = |key: &str, present: bool, kind: TunnelType, report: &mut Report| {
        if present && t.kind != kind {
            report.error(&path.key(key), format!("{key} belongs to {kind:?} tunnels, not {:?}", t.kind).to_lowercase());
        }
    };
    only("vni", t.vni.is_some(), TunnelType::Vxlan, report);
    only("outer_udp_src", t.outer_udp_src.is_some(), TunnelType::Vxlan, report);
    only("outer_udp_dst", t.outer_udp_dst.is_some(), TunnelType::Vxlan, report);
    only("gre_protocol", t.gre_protocol.is_some(), TunnelType::Gre, report);
    only("tni", t.tni.is_some(), TunnelType::Nvgre, report);
    only("flow_id", t.flow_id.is_some(), TunnelType::Nvgre, report);
    let id_24 = |key: &str, value: Option<u32>, report: &mut Report| match value {
        None => report.error(&path.key(key), format!("{:?} tunnels need {key} (24 bits)", t.kind).to_lowercase()),
        Some(v) if v >= 1 << 24 => {
            report.error(&path.key(key), format!("{v} does not fit 24 bits; valid: 0..16777215"))
        }
        Some(_) => {}
    };
    match t.kind {
        TunnelType::Vxlan => id_24("vni", t.vni, report),
        TunnelType::Nvgre => id_24("tni", t.tni, report),
        TunnelType::Gre => {}
    }
}

fn check_match(m: &FlowMatch, class: FlowClass, path: &YamlPath, flex_ids: &HashSet<u32>, report: &mut Report) {
    match class {
        FlowClass::UdpIp => {
            if m.ipv4_len.is_some_and(|l| l < 28) {
                report
                    .error(&path.key("ipv4_len"), "an IPv4 packet carrying UDP is at least 28 bytes (20 IPv4 + 8 UDP)");
            }
        }
        FlowClass::Flex => match m.flex_item_id {
            None => report.error(
                &path.key("flex_item_id"),
                "val and mask need flex_item_id, the rx.flex_items entry they apply to",
            ),
            Some(id) => {
                if !flex_ids.contains(&id) {
                    report.error(
                        &path.key("flex_item_id"),
                        format!("flex item {id} is not defined in rx.flex_items; {}", valid_list(sorted(flex_ids))),
                    );
                }
                if m.val.is_none() {
                    report.error(&path.key("val"), "flex matches need val, the 32-bit value to match");
                }
            }
        },
        FlowClass::Ecpri => {
            let ecpri = m.ecpri.as_ref().expect("eCPRI class implies the key");
            if ecpri.pc_id.is_some() && ecpri.rtc_id.is_some() {
                report.error(
                    &path.key("ecpri").key("rtc_id"),
                    "pc_id and rtc_id are aliases of one field; give only one",
                );
            }
            if (ecpri.pc_id.is_some() || ecpri.rtc_id.is_some()) && ecpri.msg_type.is_none() {
                report.error(
                    &path.key("ecpri").key("msg_type"),
                    "matching pc_id/rtc_id needs msg_type (0/1 for pc_id, 2 for rtc_id)",
                );
            }
        }
    }
}

fn check_ethernet(ethernet: &EthernetMatch, path: &YamlPath, report: &mut Report) {
    if ethernet.src.is_none() && ethernet.dst.is_none() {
        report.error(path, "give src, dst or both; an ethernet match without an address narrows nothing");
    }
    for (key, value) in [("src", &ethernet.src), ("dst", &ethernet.dst)] {
        if let Some(mac) = value
            && !is_mac(mac)
        {
            report.error(&path.key(key), format!("\"{mac}\" is not a MAC address such as aa:bb:cc:dd:ee:ff"));
        }
    }
}

fn check_flex_items(ctx: &InterfaceCtx<'_>, rx_path: &YamlPath, report: &mut Report) {
    let Some(rx) = &ctx.iface.rx else { return };
    let list = rx_path.key("flex_items");
    duplicates(rx.flex_items.iter().map(|f| &f.id), &list, "id", "flex item id", report);
    duplicates(rx.flex_items.iter().map(|f| &f.name), &list, "name", "flex item name", report);
    for (i, item) in rx.flex_items.iter().enumerate() {
        if item.offset % 4 != 0 || item.offset >= 28 {
            report.error(
                &list.index(i).key("offset"),
                format!("{} is not valid; the offset must be a multiple of 4 below 28 (0, 4, ..., 24)", item.offset),
            );
        }
    }
    if !rx.flex_items.is_empty() && !ctx.is_raw() {
        report.error(&list, "flex items program the NIC parser and exist only for raw streams");
    }
}

fn sorted(ids: &HashSet<u32>) -> Vec<u32> {
    let mut v: Vec<u32> = ids.iter().copied().collect();
    v.sort_unstable();
    v
}

fn is_mac(text: &str) -> bool {
    parse_mac(text).is_some()
}
