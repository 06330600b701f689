//! Validation: every rule of the DAQIRI configuration reference, reported all
//! at once with the YAML path of the offending key and what would be valid.
//!
//! Validation judges the config, not this machine: whether the host has the
//! cores, hugepages or GPU a config asks for is the engine's preflight.

mod context;
mod flow;
mod interface;
pub mod limits;
mod lists;
mod queue;
mod reorder;

use crate::diagnostic::{Report, YamlPath};
use crate::model::{EngineConfig, EngineKind, Loopback, StreamType};
use crate::valid::ValidConfig;

use lists::duplicates;

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
        if self.loopback == Loopback::Hardware
            && (self.stream_type != Some(StreamType::Raw) || self.engine != Some(EngineKind::Ibverbs))
        {
            report.error(
                &cfg.key("loopback"),
                "\"hw\" loopback is the ibverbs engine's mlx5 internal loopback on one port (no cable): it needs stream_type: raw and engine: ibverbs",
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
    }
}
