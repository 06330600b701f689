//! Host checks: what this machine and build cannot run of a valid config.
//! `daqiri-gateway check` lists these as warnings; init fails on the ones
//! that matter with a clear error.

use daqiri_config::model::MemoryKind;
use daqiri_config::{Diagnostic, InterfaceBackend, Severity, ValidConfig, YamlPath};

use crate::memory::HugepageInfo;

/// Cores this process may run on.
pub fn available_cores() -> usize {
    core_affinity::get_core_ids().map_or(1, |ids| ids.len())
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
        let backend = config.backend(port);
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
        if backend == InterfaceBackend::Socket && !iface.rx_queues().is_empty() {
            let regions: Vec<&String> = iface.rx_queues().iter().flat_map(|q| q.memory_regions.first()).collect();
            if regions.windows(2).any(|w| w[0] != w[1]) {
                warn(
                    path.key("rx").key("queues"),
                    format!(
                        "a socket lands every datagram in its first RX queue's region (\"{}\") before steering; other queues' regions are not used for receive",
                        regions[0]
                    ),
                );
            }
        }
    }
    if let Some(master) = cfg.master_core
        && master.0 as usize >= cores
    {
        warn(YamlPath::cfg().key("master_core"), format!("core {master} does not exist here ({cores} cores)"));
    }
    let regions = YamlPath::cfg().key("memory_regions");
    let mut huge_bytes = 0;
    let nodes = crate::memory::numa_nodes();
    for (i, region) in cfg.memory_regions.iter().enumerate() {
        if region.kind == MemoryKind::Huge {
            huge_bytes += region.total_bytes();
        }
        if region.kind.cpu_addressable() && !nodes.contains(&region.affinity) {
            warn(
                regions.index(i).key("affinity"),
                format!("NUMA node {} does not exist here (nodes: {nodes:?})", region.affinity),
            );
        }
    }
    if huge_bytes > 0 {
        match HugepageInfo::read() {
            Some(info) if info.free < info.pages_for(huge_bytes) => {
                let pages = info.pages_for(huge_bytes);
                warn(
                    regions.clone(),
                    format!(
                        "huge regions need {pages} hugepages but {} are free; {}",
                        info.free,
                        info.how_to_reserve(pages - info.free)
                    ),
                );
            }
            Some(_) => {}
            None => warn(regions.clone(), "huge regions need hugepages, which this kernel does not report".into()),
        }
    }
    out
}
