//! Host checks: what this machine and build cannot run of a valid config.
//! `daqiri-gateway check` lists these as warnings; init fails on the ones
//! that matter with a clear error.

use daqiri_config::{Diagnostic, Severity, ValidConfig, YamlPath};

mod cores;
mod memory;
mod ports;
mod raised_pools;

pub(crate) use cores::require_present_cores;
pub use cores::{
    ALLOW_UNPINNED_CORES_ENV, allow_unpinned_cores, allowed_cores, available_cores, unpinned_cores_allowed,
};
pub use memory::{MemoryNeeds, check_memory};
pub use raised_pools::{RaisedPool, raised_num_bufs};

/// Everything about `config` this host or build cannot honour, as warnings:
/// the keys [`crate::support`] refuses, then what this machine lacks.
pub fn host_warnings(config: &ValidConfig) -> Vec<Diagnostic> {
    let mut out = crate::support::unsupported(config);
    let mut warn = |path: YamlPath, message: String| out.push(Diagnostic::new(Severity::Warning, &path, message));
    let cfg = config.config();
    let consequence = if unpinned_cores_allowed() {
        "; allowed here: the thread runs unpinned"
    } else {
        "; the engine refuses to start unless unpinned threads are allowed"
    };
    for (path, why) in cores::absent_cores(config, &allowed_cores()) {
        warn(path, format!("{why}{consequence}"));
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
