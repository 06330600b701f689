//! Host checks: what this machine and build cannot run of a valid config.
//! `daqiri-gateway check` lists these as warnings; init fails on the ones
//! that matter with a clear error.

use daqiri_config::{Diagnostic, Severity, ValidConfig, YamlPath};

mod memory;
mod ports;
mod raised_pools;

pub use memory::{MemoryNeeds, check_memory};
pub use raised_pools::{RaisedPool, raised_num_bufs};

/// Cores this process may run on.
pub fn available_cores() -> usize {
    core_affinity::get_core_ids().map_or(1, |ids| ids.len())
}

/// Everything about `config` this host or build cannot honour, as warnings:
/// the keys [`crate::support`] refuses, then what this machine lacks.
pub fn host_warnings(config: &ValidConfig) -> Vec<Diagnostic> {
    let mut out = crate::support::unsupported(config);
    let mut warn = |path: YamlPath, message: String| out.push(Diagnostic::new(Severity::Warning, &path, message));
    let cfg = config.config();
    let cores = available_cores();
    let interfaces = YamlPath::cfg().key("interfaces");
    for (port, iface) in config.interfaces() {
        let path = interfaces.index(port);
        for (dir, queues) in [("rx", iface.rx_queues()), ("tx", iface.tx_queues())] {
            for (i, q) in queues.iter().enumerate() {
                if let Some(core) = q.cpu_core
                    && core.0 as usize >= cores
                {
                    warn(
                        path.key(dir).key("queues").index(i).key("cpu_core"),
                        format!("core {core} does not exist here ({cores} cores); the worker runs unpinned"),
                    );
                }
            }
        }
    }
    if let Some(master) = cfg.master_core
        && master.0 as usize >= cores
    {
        warn(YamlPath::cfg().key("master_core"), format!("core {master} does not exist here ({cores} cores)"));
    }
    let regions = YamlPath::cfg().key("memory_regions");
    for raised in raised_num_bufs(config) {
        warn(regions.index(raised.region).key("num_bufs"), raised.message());
    }
    let nodes = crate::memory::numa_nodes();
    for (i, region) in cfg.memory_regions.iter().enumerate() {
        if region.kind.cpu_addressable() && !nodes.contains(&region.affinity) {
            warn(
                regions.index(i).key("affinity"),
                format!("NUMA node {} does not exist here (nodes: {nodes:?})", region.affinity),
            );
        }
    }
    if let Some(why) = memory::shortfall(config, MemoryNeeds::default()) {
        warn(regions, why);
    }
    for (path, message) in ports::ports_in_use(config) {
        warn(path, message);
    }
    out
}
