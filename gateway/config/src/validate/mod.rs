//! Validation: every rule of the DAQIRI configuration reference, reported all
//! at once with the YAML path of the offending key and what would be valid.
//!
//! Validation judges the config, not this machine: whether the host has the
//! cores, hugepages or GPU a config asks for is the engine's preflight.

mod flow;
mod interface;
pub mod limits;
mod queue;
mod reorder;

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;

use crate::diagnostic::{Report, YamlPath};
use crate::model::{EngineConfig, Loopback, MemoryRegion, StreamType};
use crate::valid::ValidConfig;

/// NIC RX ring size DAQIRI uses for raw streams; pools below 1.5x of it are raised to 3x.
pub const RAW_RING_SIZE: u32 = 8192;

impl EngineConfig {
    /// Checks the config and returns it as a [`ValidConfig`], or every problem found.
    pub fn validate(self) -> Result<ValidConfig, Report> {
        let mut report = Report::default();
        let cfg = YamlPath::cfg();
        if self.version != 1 {
            report.error(
                &cfg.key("version"),
                format!("version {} is not supported; the only valid version is 1", self.version),
            );
        }
        for (key, value) in [("rx_meta_buffers", self.rx_meta_buffers), ("tx_meta_buffers", self.tx_meta_buffers)] {
            if value == Some(0) {
                report.error(
                    &cfg.key(key),
                    "must be at least 1 (default 256): one metadata buffer is used per burst in flight",
                );
            }
        }
        if self.loopback == Loopback::Software && self.stream_type == Some(StreamType::Socket) {
            report.error(
                &cfg.key("loopback"),
                "\"sw\" loopback applies to raw streams; use stream_type: raw or loopback: \"\"",
            );
        }
        if self.interfaces.is_empty() {
            report.error(&cfg.key("interfaces"), "no interfaces are defined; add at least one");
        }
        check_memory_regions(&self, &mut report);
        limits::check_limits(&self, &mut report);
        let links = interface::check_interfaces(&self, &mut report);
        if report.has_errors() {
            return Err(report);
        }
        // Without errors every interface resolved; `None` would mean an unreported gap.
        let links = links.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| {
            let mut report = Report::default();
            report.error(
                &cfg.key("interfaces"),
                "an interface resolved to no backend (a validator bug; please report it)",
            );
            report
        })?;
        Ok(ValidConfig::new(self, links, report))
    }
}

fn check_memory_regions(config: &EngineConfig, report: &mut Report) {
    let regions = YamlPath::cfg().key("memory_regions");
    duplicates(config.memory_regions.iter().map(|r| &r.name), &regions, "name", "memory region name", report);
    for (i, region) in config.memory_regions.iter().enumerate() {
        let path = regions.index(i);
        if region.num_bufs == 0 {
            report.error(&path.key("num_bufs"), "must be at least 1");
        }
        if region.buf_size == 0 {
            report.error(&path.key("buf_size"), "must be at least 1 byte");
        }
        let used_by_rx_queue =
            config.interfaces.iter().flat_map(|i| i.rx_queues()).any(|q| q.memory_regions.contains(&region.name));
        let used = used_by_rx_queue
            || config.interfaces.iter().flat_map(|i| i.tx_queues()).any(|q| q.memory_regions.contains(&region.name))
            || config
                .interfaces
                .iter()
                .filter_map(|i| i.rx.as_ref())
                .flat_map(|rx| &rx.reorder_configs)
                .any(|r| r.memory_region == region.name);
        if !used {
            report.warn(
                &path.key("name"),
                format!("memory region \"{}\" is not used by any queue or reorder config", region.name),
            );
        }
        let raised = rx_num_bufs(config, region);
        if used_by_rx_queue && raised != region.num_bufs {
            report.warn(
                &path.key("num_bufs"),
                format!(
                    "{} is below 1.5x the NIC ring ({}); DAQIRI raises it to {raised} buffers",
                    region.num_bufs,
                    RAW_RING_SIZE + RAW_RING_SIZE / 2,
                ),
            );
        }
    }
}

/// Buffers an RX queue's region gets: raw streams without software
/// loopback raise a pool below 1.5x the NIC ring to 3x, as DAQIRI does.
pub(super) fn rx_num_bufs(config: &EngineConfig, region: &MemoryRegion) -> u32 {
    let raw = config.stream_type == Some(StreamType::Raw);
    if raw && config.loopback == Loopback::Off && region.num_bufs < RAW_RING_SIZE + RAW_RING_SIZE / 2 {
        RAW_RING_SIZE * 3
    } else {
        region.num_bufs
    }
}

/// Reports every value that appears more than once, at the later occurrences.
pub(crate) fn duplicates<'a, T: Eq + Hash + Display + 'a>(
    values: impl IntoIterator<Item = &'a T>,
    list: &YamlPath,
    key: &str,
    what: &str,
    report: &mut Report,
) {
    let mut seen = HashMap::new();
    for (i, value) in values.into_iter().enumerate() {
        if let Some(first) = seen.insert(value, i) {
            seen.insert(value, first);
            let at = if key.is_empty() { list.index(i) } else { list.index(i).key(key) };
            report.error(&at, format!("duplicate {what} {value} (first used at {})", list.index(first)));
        }
    }
}

/// `"valid: a, b"` or `"none are defined"`, for messages that list alternatives.
pub(crate) fn valid_list<T: Display>(values: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    if items.is_empty() { "none are defined".to_owned() } else { format!("valid: {}", items.join(", ")) }
}
