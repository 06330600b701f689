//! Flows: match rules with actions (steer to a queue, VLAN and tunnel transforms).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PortMatch;

/// One entry of `rx.flows` or `tx.flows`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Flow {
    /// Flow name.
    pub name: String,
    /// Flow id, reported per packet.
    pub id: u32,
    /// Legacy single action (`{type: queue, id: N}` or `{type: queue, ids: [..]}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<FlowAction>,
    /// Ordered action list; RX lists end with `type: queue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<FlowAction>>,
    /// Match criteria; absent = match everything.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<FlowMatch>,
}

impl Flow {
    /// The actions in order, whether written as `action` or `actions`.
    pub fn action_list(&self) -> &[FlowAction] {
        match (&self.actions, &self.action) {
            (Some(list), _) => list,
            (None, Some(single)) => std::slice::from_ref(single),
            (None, None) => &[],
        }
    }

    /// The queue ids the flow steers to (last `queue` action).
    pub fn queue_ids(&self) -> Vec<u16> {
        self.action_list().iter().rfind(|a| a.kind == ActionType::Queue).map(FlowAction::queue_ids).unwrap_or_default()
    }
}

/// One flow action. Fields that do not belong to `type` are rejected by validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowAction {
    /// Action type.
    #[serde(rename = "type")]
    pub kind: ActionType,
    /// `queue`: one target queue id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u16>,
    /// `queue`: target queue ids; two or more = Toeplitz RSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<u16>>,
    /// `vlan_push`: VLAN id 0..4095.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_id: Option<u16>,
    /// `vlan_push`: priority 0..7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<u8>,
    /// `vlan_push`: drop eligible indicator 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dei: Option<u8>,
    /// `vlan_push`: TPID, default 0x8100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethertype: Option<u16>,
    /// `tunnel_decap` / `tunnel_encap`: the tunnel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<Tunnel>,
}

impl FlowAction {
    /// Target queues of a `queue` action (`id` or `ids`).
    pub fn queue_ids(&self) -> Vec<u16> {
        match (&self.id, &self.ids) {
            (Some(id), _) => vec![*id],
            (None, Some(ids)) => ids.clone(),
            (None, None) => Vec::new(),
        }
    }
}

/// `type` of a flow action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ActionType {
    Queue,
    VlanPop,
    VlanPush,
    TunnelDecap,
    TunnelEncap,
}

impl ActionType {
    /// The YAML spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ActionType::Queue => "queue",
            ActionType::VlanPop => "vlan_pop",
            ActionType::VlanPush => "vlan_push",
            ActionType::TunnelDecap => "tunnel_decap",
            ActionType::TunnelEncap => "tunnel_encap",
        }
    }
}

/// `tunnel` of a decap/encap action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tunnel {
    /// Tunnel protocol.
    #[serde(rename = "type")]
    pub kind: TunnelType,
    /// Outer Ethernet source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_eth_src: Option<String>,
    /// Outer Ethernet destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_eth_dst: Option<String>,
    /// Outer IPv4 source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_ipv4_src: Option<String>,
    /// Outer IPv4 destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_ipv4_dst: Option<String>,
    /// VXLAN network identifier (24 bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vni: Option<u32>,
    /// VXLAN outer UDP source port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_udp_src: Option<u16>,
    /// VXLAN outer UDP destination port (default 4789).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_udp_dst: Option<u16>,
    /// GRE protocol (default 0x0800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gre_protocol: Option<u16>,
    /// NVGRE tenant network identifier (24 bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tni: Option<u32>,
    /// NVGRE flow id (8 bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<u8>,
}

/// `tunnel.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum TunnelType {
    Vxlan,
    Gre,
    Nvgre,
}

/// `match` of a flow. One interface uses one class: UDP/IP, flex item, or eCPRI.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowMatch {
    /// UDP source port or range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_src: Option<PortMatch>,
    /// UDP destination port or range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_dst: Option<PortMatch>,
    /// IPv4 total length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_len: Option<u16>,
    /// IPv4 source address (dotted, `10.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_src: Option<std::net::Ipv4Addr>,
    /// IPv4 destination address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_dst: Option<std::net::Ipv4Addr>,
    /// Flex item id (from `rx.flex_items`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex_item_id: Option<u32>,
    /// Flex match value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val: Option<u32>,
    /// Flex match mask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    /// eCPRI-over-Ethernet match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecpri: Option<Ecpri>,
    /// Ethernet addresses: alone (then any frame with them matches), or
    /// qualifying the UDP/IP keys beside them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethernet: Option<EthernetMatch>,
}

/// `match.ethernet`: MAC addresses as DAQIRI writes them (`aa:bb:cc:dd:ee:ff`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EthernetMatch {
    /// Source address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
}

impl EthernetMatch {
    /// The source address, when given and valid.
    pub fn src_mac(&self) -> Option<[u8; 6]> {
        self.src.as_deref().and_then(parse_mac)
    }

    /// The destination address, when given and valid.
    pub fn dst_mac(&self) -> Option<[u8; 6]> {
        self.dst.as_deref().and_then(parse_mac)
    }
}

/// A MAC address written as six colon-separated hex pairs.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut out {
        let part = parts.next().filter(|p| p.len() == 2)?;
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// The flow class a match belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowClass {
    /// UDP ports and IPv4 length.
    UdpIp,
    /// Flex parser item.
    Flex,
    /// eCPRI header fields.
    Ecpri,
}

impl FlowClass {
    /// Name used in messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            FlowClass::UdpIp => "UDP/IP",
            FlowClass::Flex => "flex-item",
            FlowClass::Ecpri => "eCPRI",
        }
    }
}

impl FlowMatch {
    /// Whether any UDP/IP key is present.
    pub fn has_udp_ip(&self) -> bool {
        self.udp_src.is_some()
            || self.udp_dst.is_some()
            || self.ipv4_len.is_some()
            || self.ipv4_src.is_some()
            || self.ipv4_dst.is_some()
    }

    /// Whether any flex key is present.
    pub fn has_flex(&self) -> bool {
        self.flex_item_id.is_some() || self.val.is_some() || self.mask.is_some()
    }

    /// Whether the match is Ethernet addresses alone: it takes any frame
    /// with them, and spreads over several queues by MAC.
    pub fn is_ethernet_only(&self) -> bool {
        self.ethernet.is_some() && !self.has_udp_ip() && !self.has_flex() && self.ecpri.is_none()
    }

    /// The class of this match, UDP/IP when empty or Ethernet addresses
    /// alone; `None` when classes are mixed. Ethernet addresses qualify any
    /// class (upstream's #261: a flex item or eCPRI on given MACs).
    pub fn class(&self) -> Option<FlowClass> {
        match (self.has_udp_ip(), self.has_flex(), self.ecpri.is_some()) {
            (_, false, false) => Some(FlowClass::UdpIp),
            (false, true, false) => Some(FlowClass::Flex),
            (false, false, true) => Some(FlowClass::Ecpri),
            _ => None,
        }
    }
}

/// `match.ecpri`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ecpri {
    /// Common-header message type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_type: Option<u8>,
    /// Physical channel id (message types 0/1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pc_id: Option<u16>,
    /// Real-time control id (message type 2); alias of `pc_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtc_id: Option<u16>,
}

/// One entry of `rx.flex_items`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlexItem {
    /// Name.
    pub name: String,
    /// Id, scoped per interface.
    pub id: u32,
    /// Bytes after the UDP header; a multiple of 4 below 28.
    pub offset: u32,
    /// UDP destination port that activates the item.
    pub udp_dst_port: u16,
}
