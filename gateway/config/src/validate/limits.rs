//! Upper bounds on every size and time field. They are far beyond what any
//! instrument needs and far below what would overflow an allocation or a
//! clock: a value past one is a typo, and left through it would abort the
//! gateway on its first allocation instead of being refused here.
//!
//! Whether this host has the memory a valid config asks for is the engine's
//! preflight (`daqiri::preflight::memory_needed`).

use std::fmt::Display;

use crate::diagnostic::{Report, YamlPath};
use crate::model::{EngineConfig, Queue};

/// Packets per burst (`batch_size`).
pub const MAX_BATCH_SIZE: u32 = 1 << 16;
/// Buffers in one region (`num_bufs`).
pub const MAX_NUM_BUFS: u32 = 1 << 26;
/// Bytes per buffer (`buf_size`): a reorder region's buffer holds a whole batch.
pub const MAX_BUF_SIZE: u64 = 1 << 30;
/// Bytes of every region together (`num_bufs` x `buf_size`, summed).
pub const MAX_REGION_BYTES: u64 = 1 << 40;
/// Burst metadata entries (`rx_meta_buffers`, `tx_meta_buffers`).
pub const MAX_META_BUFFERS: u32 = 1 << 16;
/// Partial-batch timeout (`timeout_us`): one minute.
pub const MAX_TIMEOUT_US: u64 = 60_000_000;
/// TX pacing (`pacing_mbps`): 10 Tb/s.
pub const MAX_PACING_MBPS: u64 = 10_000_000;
/// Busy polling per poll (`busy_poll_us`): one second.
pub const MAX_BUSY_POLL_US: u32 = 1_000_000;
/// Largest message (`max_payload_size`): 64 MiB.
pub const MAX_PAYLOAD_SIZE: u32 = 1 << 26;
/// Dynamic flow template entries (`dynamic_flow_capacity`).
pub const MAX_DYNAMIC_FLOWS: u32 = 1 << 20;
/// Packets per reorder batch (`packets_per_batch`).
pub const MAX_PACKETS_PER_BATCH: u32 = 1 << 20;
/// Bytes of a name (regions, interfaces, queues, flows, plans): names are
/// metric labels, repeated in every scrape.
pub const MAX_NAME_BYTES: usize = 256;

pub(super) fn check_limits(config: &EngineConfig, report: &mut Report) {
    let cfg = YamlPath::cfg();
    for (key, value) in [("rx_meta_buffers", config.rx_meta_buffers), ("tx_meta_buffers", config.tx_meta_buffers)] {
        at_most(report, &cfg.key(key), value, MAX_META_BUFFERS);
    }
    let regions = cfg.key("memory_regions");
    for (path, name) in names(config) {
        if name.trim().is_empty() {
            report.error(&path, "an empty name; a name identifies it in the API, the status and the metrics");
        } else if name.len() > MAX_NAME_BYTES {
            report.error(&path, format!("a name of {} bytes; at most {MAX_NAME_BYTES}", name.len()));
        }
    }
    let mut total: u64 = 0;
    for (i, region) in config.memory_regions.iter().enumerate() {
        at_most(report, &regions.index(i).key("num_bufs"), Some(region.num_bufs), MAX_NUM_BUFS);
        at_most(report, &regions.index(i).key("buf_size"), Some(region.buf_size), MAX_BUF_SIZE);
        total = total.saturating_add(region.total_bytes());
    }
    if total > MAX_REGION_BYTES {
        report.error(
            &regions,
            format!(
                "the regions add up to {} ({total} bytes); at most {} ({MAX_REGION_BYTES} bytes) in all",
                human_bytes(total),
                human_bytes(MAX_REGION_BYTES)
            ),
        );
    }
    for (i, iface) in config.interfaces.iter().enumerate() {
        let path = cfg.key("interfaces").index(i);
        if let Some(socket) = &iface.socket_config {
            at_most(
                report,
                &path.key("socket_config").key("max_payload_size"),
                socket.max_payload_size,
                MAX_PAYLOAD_SIZE,
            );
        }
        if let Some(rx) = &iface.rx {
            let rx_path = path.key("rx");
            at_most(report, &rx_path.key("dynamic_flow_capacity"), Some(rx.dynamic_flow_capacity), MAX_DYNAMIC_FLOWS);
            check_queues(&rx.queues, &rx_path.key("queues"), report);
            for (j, plan) in rx.reorder_configs.iter().enumerate() {
                if let Some(m) = &plan.method.seq_packets_per_batch {
                    let at = rx_path.key("reorder_configs").index(j).key("method").key("seq_packets_per_batch");
                    at_most(report, &at.key("packets_per_batch"), Some(m.packets_per_batch), MAX_PACKETS_PER_BATCH);
                }
            }
        }
        if let Some(tx) = &iface.tx {
            check_queues(&tx.queues, &path.key("tx").key("queues"), report);
        }
    }
}

/// Every name in the config, with its path.
fn names(config: &EngineConfig) -> Vec<(YamlPath, &str)> {
    fn list<'a>(out: &mut Vec<(YamlPath, &'a str)>, path: YamlPath, names: impl Iterator<Item = &'a str>) {
        out.extend(names.enumerate().map(|(i, name)| (path.index(i).key("name"), name)));
    }
    let cfg = YamlPath::cfg();
    let mut out = Vec::new();
    list(&mut out, cfg.key("memory_regions"), config.memory_regions.iter().map(|r| r.name.as_str()));
    list(&mut out, cfg.key("interfaces"), config.interfaces.iter().map(|i| i.name.as_str()));
    for (i, iface) in config.interfaces.iter().enumerate() {
        let path = cfg.key("interfaces").index(i);
        if let Some(rx) = &iface.rx {
            let rx_path = path.key("rx");
            list(&mut out, rx_path.key("queues"), rx.queues.iter().map(|q| q.name.as_str()));
            list(&mut out, rx_path.key("flows"), rx.flows.iter().map(|f| f.name.as_str()));
            list(&mut out, rx_path.key("reorder_configs"), rx.reorder_configs.iter().map(|r| r.name.as_str()));
        }
        if let Some(tx) = &iface.tx {
            list(&mut out, path.key("tx").key("queues"), tx.queues.iter().map(|q| q.name.as_str()));
            list(&mut out, path.key("tx").key("flows"), tx.flows.iter().map(|f| f.name.as_str()));
        }
    }
    out
}

fn check_queues(queues: &[Queue], list: &YamlPath, report: &mut Report) {
    for (i, q) in queues.iter().enumerate() {
        let path = list.index(i);
        at_most(report, &path.key("batch_size"), q.batch_size, MAX_BATCH_SIZE);
        at_most(report, &path.key("timeout_us"), q.timeout_us, MAX_TIMEOUT_US);
        at_most(report, &path.key("pacing_mbps"), q.pacing_mbps, MAX_PACING_MBPS);
        at_most(report, &path.key("busy_poll_us"), q.busy_poll_us, MAX_BUSY_POLL_US);
    }
}

fn at_most<T: PartialOrd + Display>(report: &mut Report, path: &YamlPath, value: Option<T>, max: T) {
    if let Some(value) = value
        && value > max
    {
        report.error(path, format!("{value} is too large; at most {max}"));
    }
}

/// `1.5 GiB`, for messages about memory.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} bytes") } else { format!("{value:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_the_largest_whole_unit() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(36 << 40), "36.0 TiB");
    }
}
