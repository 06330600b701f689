//! Host checks: what this machine and build cannot run of a valid config.
//! `daqiri-gateway check` lists these as warnings; init fails on the ones
//! that matter with a clear error.

use daqiri_config::{Diagnostic, InterfaceBackend, Severity, ValidConfig, YamlPath};

mod memory;
mod ports;

pub use memory::{MemoryNeeds, check_memory};

/// Cores this process may run on.
pub fn available_cores() -> usize {
    core_affinity::get_core_ids().map_or(1, |ids| ids.len())
}

/// Descriptors in each DPDK RX queue's ring.
pub(crate) const DPDK_RX_DESCRIPTORS: u16 = 1024;

/// A region whose `num_bufs` the engine raises (see [`raised_num_bufs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaisedPool {
    /// Index in `memory_regions`.
    pub region: usize,
    /// `num_bufs` as written.
    pub from: u32,
    /// What the engine allocates.
    pub to: u32,
    /// DPDK RX queues landing in the region.
    pub rx_queues: u32,
}

/// DAQIRI's rule for raw streams: a region that DPDK RX queues land in, with
/// fewer buffers than 1.5x their rings' descriptors, is raised to 3x, so the
/// NIC can fill its rings and refill them while bursts are held. The engine
/// applies it with a warning; `check` reports it.
pub fn raised_num_bufs(config: &ValidConfig) -> Vec<RaisedPool> {
    let cfg = config.config();
    let mut rings = vec![0u32; cfg.memory_regions.len()];
    for (port, iface) in config.interfaces() {
        if config.backend(port) != InterfaceBackend::Dpdk {
            continue;
        }
        for q in iface.rx_queues() {
            if let Some(at) =
                q.memory_regions.first().and_then(|n| cfg.memory_regions.iter().position(|r| &r.name == n))
            {
                rings[at] += 1;
            }
        }
    }
    let ring = u64::from(DPDK_RX_DESCRIPTORS);
    rings
        .iter()
        .enumerate()
        .filter(|&(_, &queues)| queues > 0)
        .filter_map(|(region, &queues)| {
            let from = cfg.memory_regions[region].num_bufs;
            let descriptors = ring * u64::from(queues);
            (u64::from(from) * 2 < descriptors * 3).then(|| RaisedPool {
                region,
                from,
                to: u32::try_from(descriptors * 3).unwrap_or(u32::MAX),
                rx_queues: queues,
            })
        })
        .collect()
}

impl RaisedPool {
    /// The warning DAQIRI gives, with the numbers.
    pub fn message(&self) -> String {
        format!(
            "num_bufs {} is below 1.5x the {} RX descriptors of the {} DPDK RX queue(s) landing here; raised to {} (3x)",
            self.from,
            u32::from(DPDK_RX_DESCRIPTORS) * self.rx_queues,
            self.rx_queues,
            self.to
        )
    }
}

/// Everything about `config` this host or build cannot honour, as warnings:
/// the keys [`crate::support`] refuses, then what this machine lacks.
pub fn host_warnings(config: &ValidConfig) -> Vec<Diagnostic> {
    let mut out = crate::support::unsupported(config);
    let mut warn = |path: YamlPath, message: String| {
        out.push(Diagnostic { severity: Severity::Warning, path: path.to_string(), message })
    };
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
