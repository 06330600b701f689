//! DAQIRI's rule that raises a DPDK RX region's `num_bufs` to fill its
//! rings, shared by the engine (which applies it) and the checks.

use daqiri_config::{InterfaceBackend, ValidConfig};

use crate::backend::DPDK_RX_DESCRIPTORS;

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
