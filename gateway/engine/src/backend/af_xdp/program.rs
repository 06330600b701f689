//! The steering program (`steer.bpf.c`) on one netdev: loaded and attached
//! with aya, its rule sets written from the port's [`FlowTable`], its socket
//! map filled with the port's AF_XDP sockets. Dropping it detaches it: the
//! attachment is a BPF link, which the kernel also removes when the process
//! dies, so a killed gateway leaves the interface as it found it.

use std::os::fd::AsRawFd;

use aya::maps::{Array, MapData, PerCpuArray, XskMap};
use aya::programs::{Xdp, XdpMode};
use aya::{Ebpf, Pod};

use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;

/// The object build.rs compiled from `steer.bpf.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/steer.bpf.o"));

/// Limits of the program's maps (`MAX_RULES`, `MAX_RSS_QUEUES`, `MAX_SOCKETS` in `steer.bpf.c`).
pub(crate) const MAX_RULES: usize = 256;
pub(crate) const MAX_RSS_QUEUES: usize = 32;
pub(crate) const MAX_SOCKETS: usize = 256;

/// Flow id the program writes for a frame no rule matched.
pub(super) const NO_FLOW: u32 = u32::MAX;

/// `struct rule` of `steer.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Rule {
    src_first: u16,
    src_last: u16,
    dst_first: u16,
    dst_last: u16,
    ipv4_len: u16,
    queue_count: u16,
    flow_id: u32,
    queues: [u16; MAX_RSS_QUEUES],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    /// `MATCH_DST_MAC` | `MATCH_SRC_MAC`.
    mac_fields: u8,
    /// 0: the addresses alone decide, for frames of any kind.
    udp_needed: u8,
    /// `MATCH_SRC_IP` | `MATCH_DST_IP`.
    ip_fields: u8,
    pad: u8,
    /// IPv4 addresses as on the wire.
    saddr: u32,
    daddr: u32,
}

/// `rule.mac_fields` and `rule_set.spreads` bits of `steer.bpf.c`.
const MATCH_DST_MAC: u8 = 1;
const MATCH_SRC_MAC: u8 = 2;
/// `rule.ip_fields` bits of `steer.bpf.c`.
const MATCH_SRC_IP: u8 = 1;
const MATCH_DST_IP: u8 = 2;
const SPREADS_BY_TUPLE: u32 = 1;
const SPREADS_BY_MAC: u32 = 2;

/// `struct rule_set` of `steer.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct RuleSet {
    count: u32,
    isolation: u32,
    tag: u32,
    spreads: u32,
    rules: [Rule; MAX_RULES],
}

// SAFETY: plain `repr(C)` integers and arrays of them, no padding the kernel
// could read uninitialised (every field is aligned in order, and the byte
// fields end on a 2-byte `pad`).
#[allow(unsafe_code)]
unsafe impl Pod for Rule {}
// SAFETY: as for `Rule`.
#[allow(unsafe_code)]
unsafe impl Pod for RuleSet {}

/// `struct steer_meta` of `steer.bpf.c`: what the program writes in front
/// of a frame it redirects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SteerMeta {
    pub(super) flow_id: u32,
    pub(super) queue: u32,
}

impl SteerMeta {
    /// Bytes in front of the frame.
    pub(super) const LEN: usize = 12;

    /// Reads the metadata in `before` (the frame's last 12 bytes of
    /// headroom), `None` unless it carries `tag`: a driver without room for
    /// metadata leaves older bytes there.
    pub(super) fn read(before: &[u8], tag: u32) -> Option<Self> {
        let word = |i: usize| u32::from_ne_bytes(before[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        (before.len() == Self::LEN && word(0) == tag).then(|| Self { flow_id: word(1), queue: word(2) })
    }
}

/// How the program runs on the netdev.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttachMode {
    /// In the driver, before any socket buffer exists.
    Native,
    /// In the kernel's generic path, for drivers without XDP.
    Generic,
}

impl AttachMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
}

/// Frames the program handled, by outcome, summed over CPUs.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Outcomes {
    pub(super) passed_unmatched: u64,
    pub(super) passed_no_socket: u64,
}

/// The program attached to a netdev.
pub(super) struct SteeringProgram {
    rule_sets: Array<MapData, RuleSet>,
    active: Array<MapData, u32>,
    sockets: XskMap<MapData>,
    outcomes: PerCpuArray<MapData, u64>,
    /// Which rule set the program reads.
    current: u32,
    tag: u32,
    mode: AttachMode,
    /// Last: holds the program and its link, dropped after the maps.
    _ebpf: Ebpf,
}

impl std::fmt::Debug for SteeringProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SteeringProgram").field("mode", &self.mode).field("current", &self.current).finish()
    }
}

fn map_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(Status::GenericFailure, format!("XDP program: {what}: {e}"))
}

impl SteeringProgram {
    /// Loads the program with `table` as its rules; frames reach it once
    /// [`attach`](Self::attach)ed, and a socket once [`add_socket`](Self::add_socket)ed.
    pub(super) fn load(table: &FlowTable, tag: u32) -> Result<Self> {
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| {
            Error::new(
                Status::GenericFailure,
                format!("loading the XDP program failed (it needs CAP_BPF and CAP_NET_ADMIN, or root): {e}"),
            )
        })?;
        let take = |ebpf: &mut Ebpf, name: &str| ebpf.take_map(name).ok_or_else(|| map_error(name, "map missing"));
        let rule_sets = Array::try_from(take(&mut ebpf, "rule_sets")?).map_err(|e| map_error("rule_sets", e))?;
        let active = Array::try_from(take(&mut ebpf, "active")?).map_err(|e| map_error("active", e))?;
        let sockets = XskMap::try_from(take(&mut ebpf, "sockets")?).map_err(|e| map_error("sockets", e))?;
        let outcomes = PerCpuArray::try_from(take(&mut ebpf, "outcomes")?).map_err(|e| map_error("outcomes", e))?;
        let mut program =
            Self { rule_sets, active, sockets, outcomes, current: 0, tag, mode: AttachMode::Native, _ebpf: ebpf };
        program.write_rules(0, table)?;
        program.active.set(0, 0, 0).map_err(|e| map_error("active", e))?;
        Ok(program)
    }

    /// Attaches the program to `netdev`: natively where the driver has
    /// XDP, else in generic mode (warned).
    pub(super) fn attach(&mut self, netdev: &str) -> Result<()> {
        self.mode = self.attach_to(netdev)?;
        Ok(())
    }

    fn attach_to(&mut self, netdev: &str) -> Result<AttachMode> {
        let xdp: &mut Xdp = self
            ._ebpf
            .program_mut("daqiri_steer")
            .ok_or_else(|| map_error("daqiri_steer", "program missing"))?
            .try_into()
            .map_err(|e| map_error("daqiri_steer", e))?;
        xdp.load()
            .map_err(|e| Error::new(Status::GenericFailure, format!("the kernel refused the XDP program: {e}")))?;
        let native = match xdp.attach(netdev, XdpMode::Driver) {
            Ok(_) => return Ok(AttachMode::Native),
            Err(e) => e,
        };
        match xdp.attach(netdev, XdpMode::Skb) {
            Ok(_) => {
                tracing::warn!(
                    netdev,
                    "the driver has no native XDP ({native}); the XDP program runs in generic mode, after the kernel built a socket buffer for each frame"
                );
                Ok(AttachMode::Generic)
            }
            Err(generic) => Err(Error::new(
                Status::GenericFailure,
                format!(
                    "cannot attach the XDP program to {netdev}: natively: {native}; generic: {generic} (another XDP program attached there is not replaced)"
                ),
            )),
        }
    }

    pub(super) fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Sends frames arriving on NIC queue `queue` to the socket `fd`.
    pub(super) fn add_socket(&mut self, queue: u32, fd: &impl AsRawFd) -> Result<()> {
        self.sockets.set(queue, fd.as_raw_fd(), 0).map_err(|e| map_error(&format!("socket of queue {queue}"), e))
    }

    /// Makes `table` the program's rules: written to the idle rule set,
    /// which then becomes the active one, so every frame meets either the
    /// old rules or the new, whole.
    pub(super) fn replace_rules(&mut self, table: &FlowTable) -> Result<()> {
        let idle = self.current ^ 1;
        self.write_rules(idle, table)?;
        self.active.set(0, idle, 0).map_err(|e| map_error("active", e))?;
        self.current = idle;
        Ok(())
    }

    fn write_rules(&mut self, index: u32, table: &FlowTable) -> Result<()> {
        let set = rule_set(table, self.tag)?;
        self.rule_sets.set(index, set.as_ref(), 0).map_err(|e| map_error("rule_sets", e))
    }

    /// Frames passed to the kernel so far.
    pub(super) fn outcomes(&self) -> Outcomes {
        let sum = |i: u32| self.outcomes.get(&i, 0).map(|per_cpu| per_cpu.iter().sum()).unwrap_or(0);
        Outcomes { passed_unmatched: sum(0), passed_no_socket: sum(1) }
    }
}

/// The program's form of `table`; a table beyond its maps is refused
/// (checked with the config first, see `support.rs`).
fn rule_set(table: &FlowTable, tag: u32) -> Result<Box<RuleSet>> {
    if table.rules.len() > MAX_RULES {
        return Err(Error::new(
            Status::NoSpaceAvailable,
            format!("{} flows: the XDP program holds at most {MAX_RULES}", table.rules.len()),
        ));
    }
    let mut set = Box::new(RuleSet {
        count: table.rules.len() as u32,
        isolation: u32::from(table.isolation()),
        tag,
        spreads: table
            .rules
            .iter()
            .filter(|r| r.queues().len() > 1)
            .map(|r| if r.is_ethernet_only() { SPREADS_BY_MAC } else { SPREADS_BY_TUPLE })
            .fold(0, |bits, bit| bits | bit),
        rules: [Rule::default(); MAX_RULES],
    });
    for (slot, rule) in set.rules.iter_mut().zip(&table.rules) {
        let m = rule.udp_ip();
        let queues = rule.queues();
        if queues.len() > MAX_RSS_QUEUES {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "flow \"{}\" spreads over {} queues; the XDP program spreads over at most {MAX_RSS_QUEUES}",
                    rule.name,
                    queues.len()
                ),
            ));
        }
        let range = |m: Option<daqiri_config::model::PortMatch>| m.map_or((0, u16::MAX), |m| (m.first, m.last));
        (slot.src_first, slot.src_last) = range(m.udp_src);
        (slot.dst_first, slot.dst_last) = range(m.udp_dst);
        slot.ipv4_len = m.ipv4_len.unwrap_or(0);
        if let Some(address) = m.ipv4_src {
            (slot.saddr, slot.ip_fields) = (u32::from_ne_bytes(address), slot.ip_fields | MATCH_SRC_IP);
        }
        if let Some(address) = m.ipv4_dst {
            (slot.daddr, slot.ip_fields) = (u32::from_ne_bytes(address), slot.ip_fields | MATCH_DST_IP);
        }
        if let Some(ethernet) = rule.ethernet() {
            if let Some(mac) = ethernet.dst {
                (slot.dst_mac, slot.mac_fields) = (mac, slot.mac_fields | MATCH_DST_MAC);
            }
            if let Some(mac) = ethernet.src {
                (slot.src_mac, slot.mac_fields) = (mac, slot.mac_fields | MATCH_SRC_MAC);
            }
        }
        slot.udp_needed = u8::from(!rule.is_ethernet_only());
        slot.flow_id = rule.flow_id;
        slot.queue_count = queues.len() as u16;
        for (q, &position) in slot.queues.iter_mut().zip(queues) {
            *q = position as u16;
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_program() {
        // steer.bpf.c: 6 x u16, u32, 32 x u16, 2 x 6 x u8, 2 x u8, u16; a set of 4 x u32 and 256 rules.
        assert_eq!(std::mem::size_of::<Rule>(), 104);
        assert_eq!(std::mem::size_of::<RuleSet>(), 16 + 256 * 104);
    }

    #[test]
    fn metadata_counts_only_with_its_tag() {
        let mut bytes = Vec::new();
        for word in [0xfeed_u32, 7, 2] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        assert_eq!(SteerMeta::read(&bytes, 0xfeed), Some(SteerMeta { flow_id: 7, queue: 2 }));
        assert_eq!(SteerMeta::read(&bytes, 0xbeef), None, "stale bytes of another tag");
    }
}
