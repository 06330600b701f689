//! rte_flow on a port: isolated mode, and rules built from
//! [`RuleSpec`]s, encoded here into DPDK's item and action structs.

use std::any::Any;
use std::ffi::{CStr, c_void};
use std::ptr::{NonNull, null};

use dpdk_sys as sys;

use super::ethdev::EthPort;
use crate::backend::dpdk::flow_rules::{Action, Item, RssFields, RuleSpec};
use crate::flow::RSS_KEY;

/// Which traffic a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Traffic {
    /// Received packets (RX flows).
    Ingress,
    /// Sent packets (TX flows).
    Egress,
}

/// A rule on the port, until [`EthPort::destroy_flow`] (or the port's close,
/// which removes them all).
#[derive(Debug)]
pub(crate) struct InstalledFlow(NonNull<sys::rte_flow>);

// SAFETY: a handle DPDK's flow API accepts from any thread; used by one at a time.
unsafe impl Send for InstalledFlow {}
// SAFETY: as above; a shared handle is only read (never dereferenced here).
unsafe impl Sync for InstalledFlow {}

impl EthPort {
    /// Puts the port in isolated mode: only traffic a rule matches reaches
    /// its queues, the rest goes where the PMD sends it (the kernel, on
    /// NICs that share the port with it). Must precede configuration.
    pub(crate) fn isolate(&self) -> Result<(), String> {
        let mut error = sys::rte_flow_error::default();
        // SAFETY: the port exists and is not configured yet.
        let rc = unsafe { sys::rte_flow_isolate(self.id(), 1, &mut error) };
        if rc == 0 { Ok(()) } else { Err(flow_error(&error, rc)) }
    }

    /// Programs `rule` for `traffic`; the PMD's message when it cannot.
    pub(crate) fn create_flow(&self, rule: &RuleSpec, traffic: Traffic) -> Result<InstalledFlow, String> {
        let encoded = Encoded::new(rule);
        let mut attr = sys::rte_flow_attr { priority: rule.priority, ..Default::default() };
        match traffic {
            Traffic::Ingress => attr.set_ingress(1),
            Traffic::Egress => attr.set_egress(1),
        }
        let mut error = sys::rte_flow_error::default();
        // SAFETY: the port is started; pattern and actions are END-terminated
        // arrays whose confs `encoded` keeps alive through the call (PMDs
        // copy what they keep).
        let flow = unsafe {
            sys::rte_flow_create(self.id(), &attr, encoded.items.as_ptr(), encoded.actions.as_ptr(), &mut error)
        };
        NonNull::new(flow).map(InstalledFlow).ok_or_else(|| flow_error(&error, -super::errors::errno()))
    }

    /// Removes a rule this port created; nothing once the port is closed.
    pub(crate) fn destroy_flow(&self, flow: InstalledFlow) -> Result<(), String> {
        if self.is_closed() {
            return Ok(());
        }
        let mut error = sys::rte_flow_error::default();
        // SAFETY: `flow` came from rte_flow_create on this open port, and is
        // consumed, so it is destroyed once.
        let rc = unsafe { sys::rte_flow_destroy(self.id(), flow.0.as_ptr(), &mut error) };
        if rc == 0 { Ok(()) } else { Err(flow_error(&error, rc)) }
    }
}

/// The PMD's message for a failed flow call.
fn flow_error(error: &sys::rte_flow_error, rc: i32) -> String {
    let message = if error.message.is_null() {
        "no message".into()
    } else {
        // SAFETY: PMDs set a static NUL-terminated message.
        unsafe { CStr::from_ptr(error.message) }.to_string_lossy().into_owned()
    };
    format!("{message} [{}]", super::errors::errno_text(rc))
}

/// A rule as DPDK's arrays, with the structs their pointers point into.
struct Encoded {
    items: Vec<sys::rte_flow_item>,
    actions: Vec<sys::rte_flow_action>,
    /// Boxed specs, masks and confs: their addresses stay put while `items`
    /// and `actions` point at them.
    _confs: Vec<Box<dyn Any>>,
}

impl Encoded {
    fn new(rule: &RuleSpec) -> Self {
        let mut confs = Confs(Vec::new());
        let items = encode_items(&rule.pattern, &mut confs);
        let mut actions: Vec<sys::rte_flow_action> =
            rule.actions.iter().map(|action| encode_action(action, &mut confs)).collect();
        actions.push(sys::rte_flow_action { type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_END, conf: null() });
        Encoded { items, actions, _confs: confs.0 }
    }
}

struct Confs(Vec<Box<dyn Any>>);

impl Confs {
    fn keep<T: 'static>(&mut self, value: T) -> *const c_void {
        let boxed = Box::new(value);
        let at = (&*boxed as *const T).cast();
        self.0.push(boxed);
        at
    }

    /// A copy of `values`, whose elements stay put (the Vec is never touched again).
    fn keep_slice<T: Clone + 'static>(&mut self, values: &[T]) -> *const T {
        let copy = values.to_vec();
        let at = copy.as_ptr();
        self.0.push(Box::new(copy));
        at
    }
}

/// `items` as an END-terminated array.
fn encode_items(items: &[Item], confs: &mut Confs) -> Vec<sys::rte_flow_item> {
    let mut out: Vec<sys::rte_flow_item> = items.iter().map(|item| encode_item(item, confs)).collect();
    out.push(sys::rte_flow_item { type_: sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_END, ..Default::default() });
    out
}

/// `items` as an END-terminated array that stays put, for an encap's definition.
fn kept_items(items: &[Item], confs: &mut Confs) -> *mut sys::rte_flow_item {
    let encoded = encode_items(items, confs);
    confs.keep_slice(&encoded).cast_mut()
}

/// An item with spec and mask (and `last` for ranges), or a bare item that
/// matches any header of its type.
fn item<T: 'static>(
    confs: &mut Confs,
    type_: sys::rte_flow_item_type,
    fields: Option<(T, Option<T>, T)>,
) -> sys::rte_flow_item {
    let Some((spec, last, mask)) = fields else { return sys::rte_flow_item { type_, ..Default::default() } };
    let last = last.map_or(null(), |l| confs.keep(l));
    sys::rte_flow_item { type_, spec: confs.keep(spec), last, mask: confs.keep(mask) }
}

fn be24(value: u32) -> [u8; 3] {
    let b = value.to_be_bytes();
    [b[1], b[2], b[3]]
}

fn encode_item(it: &Item, confs: &mut Confs) -> sys::rte_flow_item {
    match *it {
        Item::Eth { src, dst } => {
            let fields = (src.is_some() || dst.is_some()).then(|| {
                let (mut spec, mut mask) = (sys::rte_flow_item_eth::default(), sys::rte_flow_item_eth::default());
                // SAFETY: writing the plain-bytes view of a zeroed union.
                unsafe {
                    let (s, m) =
                        (&mut spec.__bindgen_anon_1.__bindgen_anon_1, &mut mask.__bindgen_anon_1.__bindgen_anon_1);
                    if let Some(src) = src {
                        (s.src.addr_bytes, m.src.addr_bytes) = (src, [0xff; 6]);
                    }
                    if let Some(dst) = dst {
                        (s.dst.addr_bytes, m.dst.addr_bytes) = (dst, [0xff; 6]);
                    }
                }
                (spec, None, mask)
            });
            item(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ETH, fields)
        }
        Item::Vlan => item::<sys::rte_flow_item_vlan>(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_VLAN, None),
        Item::Ipv4 { src, dst, total_length } => {
            let fields = (src.is_some() || dst.is_some() || total_length.is_some()).then(|| {
                let (mut spec, mut mask) = (sys::rte_flow_item_ipv4::default(), sys::rte_flow_item_ipv4::default());
                if let Some(src) = src {
                    (spec.hdr.src_addr, mask.hdr.src_addr) = (u32::from(src).to_be(), u32::MAX);
                }
                if let Some(dst) = dst {
                    (spec.hdr.dst_addr, mask.hdr.dst_addr) = (u32::from(dst).to_be(), u32::MAX);
                }
                if let Some(len) = total_length {
                    (spec.hdr.total_length, mask.hdr.total_length) = (len.to_be(), u16::MAX);
                }
                (spec, None, mask)
            });
            item(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_IPV4, fields)
        }
        Item::Udp { src, dst } => {
            let fields = (src.is_some() || dst.is_some()).then(|| {
                let (mut spec, mut mask) = (sys::rte_flow_item_udp::default(), sys::rte_flow_item_udp::default());
                if let Some(p) = src {
                    (spec.hdr.src_port, mask.hdr.src_port) = (p.first.to_be(), u16::MAX);
                }
                if let Some(p) = dst {
                    (spec.hdr.dst_port, mask.hdr.dst_port) = (p.first.to_be(), u16::MAX);
                }
                // A range's upper end; single ports repeat their spec there.
                let ranged = [src, dst].iter().flatten().any(|p| p.first != p.last);
                let last = ranged.then(|| {
                    let mut last = spec;
                    if let Some(p) = src {
                        last.hdr.src_port = p.last.to_be();
                    }
                    if let Some(p) = dst {
                        last.hdr.dst_port = p.last.to_be();
                    }
                    last
                });
                (spec, last, mask)
            });
            item(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_UDP, fields)
        }
        Item::Vxlan { vni } => {
            let fields = vni.map(|vni| {
                let (mut spec, mut mask) = (sys::rte_flow_item_vxlan::default(), sys::rte_flow_item_vxlan::default());
                // Writing a union field is safe; the bytes view of the zeroed header.
                spec.__bindgen_anon_1.__bindgen_anon_1.vni = be24(vni);
                mask.__bindgen_anon_1.__bindgen_anon_1.vni = [0xff; 3];
                (spec, None, mask)
            });
            item(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_VXLAN, fields)
        }
        Item::Gre { protocol } => {
            let fields = protocol.map(|protocol| {
                let spec = sys::rte_flow_item_gre { protocol: protocol.to_be(), ..Default::default() };
                (spec, None, sys::rte_flow_item_gre { protocol: u16::MAX, ..Default::default() })
            });
            item(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_GRE, fields)
        }
        Item::Nvgre { tni, flow_id } => {
            let fields = (tni.is_some() || flow_id.is_some()).then(|| {
                let (mut spec, mut mask) = (sys::rte_flow_item_nvgre::default(), sys::rte_flow_item_nvgre::default());
                if let Some(tni) = tni {
                    (spec.tni, mask.tni) = (be24(tni), [0xff; 3]);
                }
                if let Some(id) = flow_id {
                    (spec.flow_id, mask.flow_id) = (id, 0xff);
                }
                (spec, None, mask)
            });
            item(confs, sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_NVGRE, fields)
        }
    }
}

fn encode_action(action: &Action, confs: &mut Confs) -> sys::rte_flow_action {
    let bare = |type_| sys::rte_flow_action { type_, conf: null() };
    match action {
        Action::PopVlan => bare(sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_OF_POP_VLAN),
        Action::VxlanDecap => bare(sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_VXLAN_DECAP),
        Action::NvgreDecap => bare(sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_NVGRE_DECAP),
        Action::RawDecap { header } => {
            let data = confs.keep_slice(header).cast_mut();
            let conf = sys::rte_flow_action_raw_decap { data, size: header.len() };
            sys::rte_flow_action {
                type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_RAW_DECAP,
                conf: confs.keep(conf),
            }
        }
        Action::PushVlan { ethertype } => sys::rte_flow_action {
            type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_OF_PUSH_VLAN,
            conf: confs.keep(sys::rte_flow_action_of_push_vlan { ethertype: ethertype.to_be() }),
        },
        Action::SetVlanVid { vid } => sys::rte_flow_action {
            type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_VID,
            conf: confs.keep(sys::rte_flow_action_of_set_vlan_vid { vlan_vid: vid.to_be() }),
        },
        Action::SetVlanPcp { pcp } => sys::rte_flow_action {
            type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_PCP,
            conf: confs.keep(sys::rte_flow_action_of_set_vlan_pcp { vlan_pcp: *pcp }),
        },
        Action::VxlanEncap { definition } => {
            let definition = kept_items(definition, confs);
            sys::rte_flow_action {
                type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_VXLAN_ENCAP,
                conf: confs.keep(sys::rte_flow_action_vxlan_encap { definition }),
            }
        }
        Action::NvgreEncap { definition } => {
            let definition = kept_items(definition, confs);
            sys::rte_flow_action {
                type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_NVGRE_ENCAP,
                conf: confs.keep(sys::rte_flow_action_nvgre_encap { definition }),
            }
        }
        Action::RawEncap { header } => {
            let data = confs.keep_slice(header).cast_mut();
            let conf = sys::rte_flow_action_raw_encap { data, preserve: std::ptr::null_mut(), size: header.len() };
            sys::rte_flow_action {
                type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_RAW_ENCAP,
                conf: confs.keep(conf),
            }
        }
        Action::Mark { id } => sys::rte_flow_action {
            type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_MARK,
            conf: confs.keep(sys::rte_flow_action_mark { id: *id }),
        },
        Action::Queue { index } => sys::rte_flow_action {
            type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_QUEUE,
            conf: confs.keep(sys::rte_flow_action_queue { index: *index }),
        },
        Action::Rss { queues, over } => {
            let queue = confs.keep_slice(queues);
            let conf = sys::rte_flow_action_rss {
                func: sys::rte_eth_hash_function_RTE_ETH_HASH_FUNCTION_TOEPLITZ,
                level: 0,
                types: rss_types(*over),
                key_len: RSS_KEY.len() as u32,
                key: RSS_KEY.as_ptr(),
                queue_num: queues.len() as u32,
                queue,
            };
            sys::rte_flow_action { type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_RSS, conf: confs.keep(conf) }
        }
    }
}

/// The `RTE_ETH_RSS_*` bits of what RSS hashes.
fn rss_types(over: RssFields) -> u64 {
    match over {
        // SAFETY: returns a constant.
        RssFields::Ipv4Udp => unsafe { sys::daqiri_rss_types_ipv4_udp() },
        // SAFETY: returns a constant.
        RssFields::Ethernet => unsafe { sys::daqiri_rss_types_eth() },
    }
}
