//! Every key of DAQIRI's config language, upstream's and ours, with what
//! this project does with it: the table docs/configs.md prints. A test
//! holds it to the model (every key the model reads has a row, every row
//! names a key the model reads or says why it does not) and to the docs
//! (the section between its markers is this table, rendered).
//!
//! What a particular build or host lacks is decided per config, by path, in
//! the engine's `support` and `preflight` modules; this table says it once,
//! for the project, in words.

/// What the project does with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStatus {
    /// Read and acted on wherever the key applies.
    Honoured,
    /// Read and acted on by some backends or builds (said in the note);
    /// refused by path with `NOT_SUPPORTED` elsewhere.
    Partly,
    /// Judged as upstream judges it, then refused by path with
    /// `NOT_SUPPORTED`: it needs hardware or a driver this project lacks.
    Refused,
    /// Ours, not upstream's.
    Extension,
    /// Upstream has it and this model does not: refused as an unknown key.
    NotYet,
    /// Never part of upstream's language: refused as an unknown key.
    NotUpstream,
}

impl KeyStatus {
    /// How the table shows it.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyStatus::Honoured => "honoured",
            KeyStatus::Partly => "partly",
            KeyStatus::Refused => "refused (NOT_SUPPORTED)",
            KeyStatus::Extension => "our extension",
            KeyStatus::NotYet => "not yet (unknown key)",
            KeyStatus::NotUpstream => "not upstream's (unknown key)",
        }
    }

    /// Whether the model reads the key.
    pub const fn in_model(self) -> bool {
        !matches!(self, KeyStatus::NotYet | KeyStatus::NotUpstream)
    }
}

/// One row: a key (its path under `daqiri.cfg`, `[]` for any item; a row
/// covers the keys under it unless they have rows of their own), what we
/// do, and why or where.
#[derive(Debug, Clone, Copy)]
pub struct KeyRow {
    /// Path under `daqiri.cfg`.
    pub key: &'static str,
    /// What the project does with it.
    pub status: KeyStatus,
    /// Where, why, or what instead.
    pub note: &'static str,
}

const fn row(key: &'static str, status: KeyStatus, note: &'static str) -> KeyRow {
    KeyRow { key, status, note }
}

use KeyStatus::{Extension, Honoured, NotUpstream, Partly, Refused};

/// The keys, in the order DAQIRI's reference gives them.
pub const KEYS: &[KeyRow] = &[
    row("version", Honoured, "1, the only version"),
    row("log_level", Honoured, "follows the running config across reloads; `RUST_LOG` overrides it"),
    row("debug", Honoured, "follows the running config across reloads"),
    row("master_core", Honoured, "the status loop, the admin API's threads and `run`'s application loop"),
    row("stream_type", Honoured, "`raw` or `socket`"),
    row(
        "engine",
        Partly,
        "`socket`, `dpdk` (raw default), `ibverbs` for RoCE; ibverbs raw streams are refused (no mlx5 driver here); `af_xdp` is our extension",
    ),
    row("loopback", Partly, "`sw`; `hw` (mlx5 internal loopback) judged as upstream judges it, then refused"),
    row("rx_meta_buffers", Honoured, "burst metadata entries per RX queue"),
    row("tx_meta_buffers", Honoured, "burst metadata entries per TX queue"),
    row("memory_regions[].name", Honoured, ""),
    row(
        "memory_regions[].kind",
        Partly,
        "`host`, `huge` (strict: no fallback); `device` and `host_pinned` in CUDA builds",
    ),
    row("memory_regions[].affinity", Honoured, "NUMA node (`mbind`), or the GPU of a `device` region"),
    row("memory_regions[].access", Partly, "`local`; `rdma_read` / `rdma_write` through a RoCE queue's registration"),
    row("memory_regions[].num_bufs", Honoured, "raised for DPDK queues as upstream raises it (see above)"),
    row("memory_regions[].buf_size", Honoured, ""),
    row("interfaces[].name", Honoured, ""),
    row(
        "interfaces[].address",
        Honoured,
        "PCIe address or DPDK vdev (dpdk), netdev (af_xdp), IP (sockets, RoCE); `k8s-resource:` is our extension",
    ),
    row(
        "interfaces[].socket_config",
        Honoured,
        "`mode`, `local_addr` / `remote_addr` URLs and the legacy IP and port keys",
    ),
    row(
        "interfaces[].socket_config.max_payload_size",
        Honoured,
        "TCP message size; on UDP and RoCE refused above the landing buffer",
    ),
    row("interfaces[].roce_config.transport_mode", Honoured, "RC over soft-RoCE and ConnectX"),
    row("interfaces[].roce_config.ingest", Extension, "an instrument's ring its sender writes into (RDMA write)"),
    row("interfaces[].rx.flow_isolation", Honoured, ""),
    row(
        "interfaces[].rx.hardware_timestamps",
        Partly,
        "DPDK NICs with a clock, as PTP-epoch nanoseconds; refused on other backends",
    ),
    row(
        "interfaces[].rx.dynamic_flow_capacity",
        Honoured,
        "bounds the flows added at runtime (`add_rx_flow_async`); 0, as in DAQIRI, still takes them, up to 1024",
    ),
    row("interfaces[].rx.flex_items", Refused, "flex items program a NIC's parser"),
    row(
        "interfaces[].rx.queues[]",
        Honoured,
        "`name`, `id`, `cpu_core` (-1: an unpinned thread, socket queues only), `batch_size`, `timeout_us`, `memory_regions` (two: header-data split on DPDK and the software loopback)",
    ),
    row("interfaces[].rx.queues[].offloads", Honoured, "a TX setting: an error on an RX queue"),
    row("interfaces[].rx.queues[].pacing_mbps", Honoured, "a TX setting: an error on an RX queue"),
    row("interfaces[].rx.queues[].busy_poll_us", Extension, "AF_XDP busy polling"),
    row("interfaces[].rx.queues[].poll_mode", Partly, "`direct` on UDP socket RX queues; `worker` everywhere"),
    row("interfaces[].rx.flows[].name", Honoured, ""),
    row("interfaces[].rx.flows[].id", Honoured, "reported per packet"),
    row(
        "interfaces[].rx.flows[].action",
        Partly,
        "`queue` (one id, or RSS over `ids`) everywhere; `vlan_pop`, `tunnel_decap` through DPDK's rte_flow only (`actions` likewise)",
    ),
    row("interfaces[].rx.flows[].actions", Partly, "as `action`, in order"),
    row("interfaces[].rx.flows[].match.udp_src", Honoured, "a port, or a `\"first-last\"` range (our extension)"),
    row("interfaces[].rx.flows[].match.udp_dst", Honoured, "as `udp_src`"),
    row("interfaces[].rx.flows[].match.ipv4_len", Honoured, ""),
    row(
        "interfaces[].rx.flows[].match.ipv4_src",
        Honoured,
        "dotted IPv4 (upstream's GigE Vision example): software steering, rte_flow, the XDP program, the sockets' reuseport program",
    ),
    row(
        "interfaces[].rx.flows[].match.ipv4_dst",
        Partly,
        "as `ipv4_src`; on a socket only where `local_addr` names one address (else refused: a wildcard socket is not told the destination)",
    ),
    row(
        "interfaces[].rx.flows[].match.ethernet",
        Partly,
        "raw interfaces (software steering, rte_flow, the XDP program), alone or qualifying UDP/IP keys (flex and eCPRI too, as upstream allows, which are refused); refused on sockets",
    ),
    row(
        "interfaces[].rx.flows[].match.flex_item_id",
        Refused,
        "flex matches need a NIC's flow engine (`val`, `mask` likewise)",
    ),
    row("interfaces[].rx.flows[].match.val", Refused, "see `flex_item_id`"),
    row("interfaces[].rx.flows[].match.mask", Refused, "see `flex_item_id`"),
    row("interfaces[].rx.flows[].match.ecpri", Refused, "eCPRI matches need a NIC's flow engine"),
    row("interfaces[].rx.reorder_configs[]", Honoured, "CPU plans everywhere, GPU plans in CUDA builds"),
    row("interfaces[].rx.reorder_configs[].reorder_type", Partly, "`cpu`; `gpu` in CUDA builds"),
    row(
        "interfaces[].rx.reorder_configs[].reorder_engine",
        Partly,
        "`sw`; `hw` (the NIC's reorder) judged as upstream judges it, then refused",
    ),
    row(
        "interfaces[].rx.reorder_configs[].missing_action",
        Honoured,
        "`passthrough` (zero-filled, `REORDER_TIMEOUT`) or `drop`",
    ),
    row(
        "interfaces[].rx.reorder_configs[].cyclic_sequence",
        Honoured,
        "upstream's meaning: the acknowledgement `hw` needs; software plans always wrap",
    ),
    row(
        "interfaces[].rx.reorder_configs[].packet_size",
        Honoured,
        "upstream's meaning: required for `hw`, unused by `sw`",
    ),
    row("interfaces[].rx.hardware_timestamp_format", NotUpstream, "proposed upstream (PR #262), never merged"),
    row("interfaces[].tx.queues[]", Honoured, "as RX queues"),
    row(
        "interfaces[].tx.queues[].offloads",
        Honoured,
        "`tx_eth_src` on raw streams (the NIC, or the software loopback's port MAC); an error on sockets",
    ),
    row("interfaces[].tx.queues[].pacing_mbps", Honoured, "every backend: the NIC's rate limit or the sender's pacing"),
    row("interfaces[].tx.queues[].busy_poll_us", Extension, "an RX setting: an error on a TX queue"),
    row("interfaces[].tx.queues[].poll_mode", Partly, "`worker`; `direct` is for RX queues"),
    row(
        "interfaces[].tx.flows",
        Partly,
        "`vlan_push`, `tunnel_encap` as DPDK egress rte_flow rules; refused on other backends",
    ),
    row("interfaces[].tx.accurate_send", Refused, "time-scheduled send needs a ConnectX-7 class NIC"),
];

/// The row that covers `key` (a path under `daqiri.cfg`, items as `[]`):
/// its own, or the nearest above it.
pub fn row_of(key: &str) -> Option<&'static KeyRow> {
    let mut at = key;
    loop {
        if let Some(row) = KEYS.iter().find(|r| r.key == at) {
            return Some(row);
        }
        at = &at[..at.rfind(['.', '['])?];
    }
}

/// The table as markdown, as docs/configs.md carries it.
pub fn markdown() -> String {
    let mut out = String::from("| key (under `daqiri.cfg`) | here | where, why |\n|---|---|---|\n");
    for row in KEYS {
        out += &format!("| `{}` | {} | {} |\n", row.key, row.status.as_str(), row.note.replace('|', "\\|"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- keys: begin; generated from gateway/config/src/key_table.rs (DAQIRI_WRITE_DOCS=1 cargo test -p daqiri-config key_table rewrites it) -->\n";
    const END: &str = "<!-- keys: end -->";

    /// The model's keys under `daqiri.cfg` that hold no keys of their own.
    fn model_leaves() -> Vec<String> {
        let all = crate::schema_at::all_paths();
        let under_cfg: Vec<String> =
            all.iter().filter_map(|p| p.strip_prefix("daqiri.cfg.")).map(str::to_owned).collect();
        under_cfg
            .iter()
            .filter(|p| {
                !under_cfg
                    .iter()
                    .any(|q| q.len() > p.len() && q.starts_with(p.as_str()) && q[p.len()..].starts_with(['.', '[']))
            })
            .cloned()
            .collect()
    }

    #[test]
    fn every_key_the_model_reads_has_a_row() {
        let leaves = model_leaves();
        assert!(leaves.len() > 100, "{leaves:?}");
        let missing: Vec<&String> = leaves.iter().filter(|k| row_of(k).is_none()).collect();
        assert!(missing.is_empty(), "keys with no row in KEYS: {missing:?}");
    }

    #[test]
    fn every_row_names_a_key_the_model_reads_or_says_why_not() {
        let all: Vec<String> = crate::schema_at::all_paths()
            .iter()
            .filter_map(|p| p.strip_prefix("daqiri.cfg."))
            .map(str::to_owned)
            .collect();
        for row in KEYS {
            let in_model = all.iter().any(|p| {
                p == row.key
                    || (p.starts_with(row.key) && p[row.key.len()..].starts_with(['.', '[']))
                    || format!("{p}[]") == row.key
            });
            assert_eq!(in_model, row.status.in_model(), "{}: {:?}", row.key, row.status);
        }
    }

    #[test]
    fn docs_configs_md_carries_the_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configs.md");
        let docs = std::fs::read_to_string(&path).unwrap();
        let start = docs.find(BEGIN).expect("docs/configs.md has the table's begin marker") + BEGIN.len();
        let end = docs[start..].find(END).expect("and its end marker") + start;
        let table = markdown();
        if std::env::var_os("DAQIRI_WRITE_DOCS").is_some() {
            std::fs::write(&path, format!("{}{table}{}", &docs[..start], &docs[end..])).unwrap();
            return;
        }
        assert_eq!(
            docs[start..end],
            table,
            "docs/configs.md's key table is stale: DAQIRI_WRITE_DOCS=1 cargo test -p daqiri-config key_table"
        );
    }
}
