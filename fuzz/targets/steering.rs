//! The receive path's frame parser and flow steering: any bytes a wire can
//! carry get a queue or a drop, never a panic, and the decision is the one
//! the config spells out. Checked against a reference written here from
//! the rules (first match wins; RSS spreads over the rule's queues;
//! Ethernet addresses qualify a UDP match, or alone take any frame) and
//! against a strict reader of plain Ethernet[/802.1Q]/IPv4/UDP frames,
//! every one of which must be steered by its ports and length.

use daqiri::fuzzing::{SoftwareSteering, Steering};
use daqiri::headers::FlowKey;
use daqiri_config::Document;
use daqiri_config::model::{Flow, RxConfig};

const CONFIG: &str = "\
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - { name: m, kind: host, num_bufs: 64, buf_size: 2048 }
    interfaces:
    - name: lo
      address: loopback
      rx:
        flow_isolation: ISOLATION
        queues:
        - { name: q0, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }
        - { name: q1, id: 1, cpu_core: 0, batch_size: 8, memory_regions: [m] }
        - { name: q2, id: 7, cpu_core: 0, batch_size: 8, memory_regions: [m] }
        - { name: q3, id: 3, cpu_core: 0, batch_size: 8, memory_regions: [m] }
        flows:
        - { name: one_port, id: 10, action: { type: queue, id: 1 }, match: { udp_dst: 5000 } }
        - { name: rss, id: 11, action: { type: queue, ids: [1, 7, 3] }, match: { udp_src: 1000-1999, udp_dst: 6000-6100 } }
        - { name: by_length, id: 12, action: { type: queue, id: 7 }, match: { ipv4_len: 128 } }
        - { name: both, id: 13, action: { type: queue, id: 3 }, match: { udp_dst: 4000-4999, ipv4_len: 64 } }
        - { name: late, id: 14, action: { type: queue, id: 0 }, match: { udp_dst: 5000-5010 } }
        - { name: mac_port, id: 15, action: { type: queue, id: 0 }, match: { udp_dst: 7000, ethernet: { src: \"02:00:00:00:00:01\" } } }
        - { name: mac_only, id: 16, action: { type: queue, ids: [0, 1] }, match: { ethernet: { dst: \"02:00:00:00:00:02\" } } }
";

fn rx(isolation: bool) -> RxConfig {
    let yaml = CONFIG.replace("ISOLATION", if isolation { "true" } else { "false" });
    let valid = Document::parse(&yaml).and_then(|doc| doc.validate()).expect("the target's config is valid");
    valid.config().interfaces[0].rx.clone().expect("it has rx")
}

/// Ports and length of a plain Ethernet[/802.1Q]/IPv4/UDP frame, read the
/// strict way: whole headers, no fragment, lengths that fit the frame.
fn plain_udp(frame: &[u8]) -> Option<FlowKey> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
    let ip = match be16(12)? {
        0x0800 => 14,
        0x8100 if be16(16)? == 0x0800 => 18,
        _ => return None,
    };
    let (version, header_len) = (frame.get(ip)? >> 4, usize::from(frame.get(ip)? & 0x0f) * 4);
    let total = be16(ip + 2)?;
    let fragment = be16(ip + 6)? & 0x3fff;
    if version != 4 || header_len < 20 || *frame.get(ip + 9)? != 17 || fragment != 0 {
        return None;
    }
    let udp = ip + header_len;
    let udp_len = usize::from(be16(udp + 4)?);
    if usize::from(total) < header_len + 8 || ip + usize::from(total) > frame.len() {
        return None;
    }
    if udp_len < 8 || udp_len > usize::from(total) - header_len {
        return None;
    }
    let ipv4 = |at: usize| frame[ip + at..ip + at + 4].try_into().ok();
    Some(FlowKey {
        src_ip: ipv4(12)?,
        dst_ip: ipv4(16)?,
        src_port: be16(udp)?,
        dst_port: be16(udp + 2)?,
        ipv4_len: total,
    })
}

/// Whether `flow` takes `frame`, whose UDP/IP fields are `key` (none when
/// it is not plain IPv4/UDP).
fn matches(flow: &Flow, frame: &[u8], key: Option<&FlowKey>) -> bool {
    let m = flow.matches.clone().unwrap_or_default();
    if let Some(ethernet) = &m.ethernet {
        if frame.len() < 14 {
            return false;
        }
        let (dst, src) = (&frame[..6], &frame[6..12]);
        if ethernet.dst_mac().is_some_and(|d| d != dst) || ethernet.src_mac().is_some_and(|s| s != src) {
            return false;
        }
        if m.is_ethernet_only() {
            return true;
        }
    }
    key.is_some_and(|key| {
        m.udp_src.is_none_or(|p| p.contains(key.src_port))
            && m.udp_dst.is_none_or(|p| p.contains(key.dst_port))
            && m.ipv4_len.is_none_or(|l| l == key.ipv4_len)
    })
}

/// Checks one table's decision for `frame` against the rules.
fn check(rx: &RxConfig, table: &SoftwareSteering, frame: &[u8], key: Option<FlowKey>) {
    let steered = table.steer_frame(frame);
    assert_eq!(table.steer_frame(frame), steered, "steering is a function of the frame");
    let unmatched = if rx.flow_isolation { Steering::Unmatched } else { Steering::Default { queue: 0 } };
    match rx.flows.iter().position(|flow| matches(flow, frame, key.as_ref())) {
        None => assert_eq!(steered, unmatched, "{key:?} matches no rule"),
        Some(rule) => {
            let Steering::Flow { rule: got, queue } = steered else {
                panic!("{key:?} matches rule {rule} but was steered {steered:?}")
            };
            assert_eq!(got, rule, "{key:?}: the first matching rule wins");
            let ids = rx.flows[rule].queue_ids();
            assert!(ids.contains(&rx.queues[queue].id), "{key:?} went to queue {queue}, outside the rule's {ids:?}");
        }
    }
}

fn main() {
    let tables: Vec<(RxConfig, SoftwareSteering)> = [false, true]
        .into_iter()
        .map(|isolation| {
            let rx = rx(isolation);
            let table = SoftwareSteering::new(&rx);
            (rx, table)
        })
        .collect();
    daqiri_gateway::fuzzing::log_panics();
    afl::fuzz!(|frame: &[u8]| {
        let key = FlowKey::from_frame(frame);
        if let Some(plain) = plain_udp(frame) {
            assert_eq!(key, Some(plain), "a plain IPv4/UDP frame is read for its ports and length");
        }
        for (rx, table) in &tables {
            check(rx, table, frame, key);
        }
    });
}
