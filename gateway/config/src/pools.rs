//! How many buffers a region really gets: upstream's floor for the regions
//! DPDK queues land in, one rule for the engine (which applies it), `check`
//! (which reports it) and the checks that count a region's buffers.
//!
//! A DPDK queue's ring holds [`DPDK_RING_DESCRIPTORS`] of its region's
//! buffers, and the application holds up to two bursts more per queue; a
//! region that cannot cover both wedges receive or transmit once the rings
//! fill (upstream's "TX wedged at bursts=0", its issue #242). Upstream
//! raises such a region; so do we, counting each queue that lands in it
//! (upstream counts one ring per region, which a region several queues
//! share outgrows). Other engines have no such floor: ibverbs, sockets and
//! AF_XDP take what is written.

use crate::model::{EngineConfig, EngineKind, Loopback, StreamType};

/// Descriptors in each DPDK RX and TX ring the engine sets up.
pub const DPDK_RING_DESCRIPTORS: u16 = 1024;

/// A region whose `num_bufs` the engine raises (see [`raised_regions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaisedRegion {
    /// Index in `memory_regions`.
    pub region: usize,
    /// `num_bufs` as written.
    pub from: u32,
    /// What the engine allocates.
    pub to: u32,
    /// DPDK queues (RX and TX) landing in the region.
    pub queues: u32,
    /// Their batch sizes together.
    pub batches: u64,
}

/// Whether `config`'s interfaces are DPDK ports: raw streams on the
/// default engine, not looped back in software.
fn drives_dpdk(config: &EngineConfig) -> bool {
    config.stream_type == Some(StreamType::Raw)
        && matches!(config.engine, None | Some(EngineKind::Dpdk))
        && config.loopback == Loopback::Off
}

/// Upstream's rule: a region the DPDK queues' rings (R descriptors
/// together) and bursts (B, their batch sizes together) land in, with
/// fewer buffers than max(1.5 R, R + 2 B), is raised to max(3 R, R + 4 B).
pub fn raised_regions(config: &EngineConfig) -> Vec<RaisedRegion> {
    if !drives_dpdk(config) {
        return Vec::new();
    }
    let mut landing = vec![(0u32, 0u64); config.memory_regions.len()];
    let queues = config.interfaces.iter().flat_map(|i| i.rx_queues().iter().chain(i.tx_queues()));
    for queue in queues {
        for name in &queue.memory_regions {
            if let Some(at) = config.memory_regions.iter().position(|r| &r.name == name) {
                landing[at].0 += 1;
                landing[at].1 += u64::from(queue.batch_size());
            }
        }
    }
    landing
        .into_iter()
        .enumerate()
        .filter(|&(_, (queues, _))| queues > 0)
        .filter_map(|(region, (queues, batches))| {
            let from = config.memory_regions[region].num_bufs;
            let rings = u64::from(DPDK_RING_DESCRIPTORS) * u64::from(queues);
            let floor = (rings * 3 / 2).max(rings + 2 * batches);
            let raised = (rings * 3).max(rings + 4 * batches);
            (u64::from(from) < floor).then(|| RaisedRegion {
                region,
                from,
                to: u32::try_from(raised).unwrap_or(u32::MAX),
                queues,
                batches,
            })
        })
        .collect()
}

/// The buffers region `name` gets: as written, or raised.
pub fn num_bufs_allocated(config: &EngineConfig, name: &str) -> Option<u32> {
    let at = config.memory_regions.iter().position(|r| r.name == name)?;
    let raised = raised_regions(config).into_iter().find(|r| r.region == at);
    Some(raised.map_or(config.memory_regions[at].num_bufs, |r| r.to))
}

impl RaisedRegion {
    /// The warning, with the numbers.
    pub fn message(&self) -> String {
        let rings = u32::from(DPDK_RING_DESCRIPTORS) * self.queues;
        format!(
            "num_bufs {} is below max(1.5 x {rings}, {rings} + 2 x {}): the rings of the {} DPDK queue(s) landing here ({} descriptors each) and two bursts each (batch sizes together {}); raised to {}, max(3 x {rings}, {rings} + 4 x {}), as DAQIRI raises it",
            self.from, self.batches, self.queues, DPDK_RING_DESCRIPTORS, self.batches, self.to, self.batches
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DPDK port with `queues` RX queues of batch `batch` in a region of `num_bufs`.
    fn dpdk(num_bufs: u32, batch: u32, queues: u16) -> EngineConfig {
        let queues: String = (0..queues)
            .map(|id| {
                format!(
                    "        - {{ name: q{id}, id: {id}, cpu_core: 0, batch_size: {batch}, memory_regions: [m] }}\n"
                )
            })
            .collect();
        let yaml = format!(
            "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 0\n    memory_regions:\n    - {{ name: m, kind: host, num_bufs: {num_bufs}, buf_size: 2048 }}\n    interfaces:\n    - name: p\n      address: 0000:3b:00.0\n      rx:\n        queues:\n{queues}"
        );
        crate::Document::parse(&yaml).unwrap().config
    }

    #[test]
    fn a_region_below_one_and_a_half_rings_is_raised_to_three() {
        let raised = raised_regions(&dpdk(1535, 32, 1));
        assert_eq!(raised.iter().map(|r| (r.from, r.to)).collect::<Vec<_>>(), [(1535, 3072)]);
        assert!(raised_regions(&dpdk(1536, 32, 1)).is_empty(), "1.5 x 1024 is enough");
    }

    #[test]
    fn large_batches_raise_the_floor_to_the_ring_and_two_bursts() {
        // 1024 + 2 x 512 = 2048 > 1536: raised to 1024 + 4 x 512.
        let raised = raised_regions(&dpdk(2047, 512, 1));
        assert_eq!(raised.iter().map(|r| (r.from, r.to)).collect::<Vec<_>>(), [(2047, 3072)]);
        let raised = raised_regions(&dpdk(2047, 1024, 1));
        assert_eq!(raised.iter().map(|r| r.to).collect::<Vec<_>>(), [5120], "1024 + 4 x 1024");
        assert!(raised_regions(&dpdk(2048, 512, 1)).is_empty());
    }

    #[test]
    fn each_queue_landing_in_a_region_counts() {
        let raised = raised_regions(&dpdk(3071, 32, 2));
        assert_eq!(raised.iter().map(|r| (r.queues, r.to)).collect::<Vec<_>>(), [(2, 6144)]);
        assert_eq!(num_bufs_allocated(&dpdk(3071, 32, 2), "m"), Some(6144));
    }

    #[test]
    fn other_engines_take_what_is_written() {
        let mut ibverbs = dpdk(16, 32, 1);
        ibverbs.engine = Some(EngineKind::Ibverbs);
        let mut looped = dpdk(16, 32, 1);
        looped.loopback = Loopback::Software;
        let mut sockets = dpdk(16, 32, 1);
        sockets.stream_type = Some(StreamType::Socket);
        for config in [ibverbs, looped, sockets] {
            assert!(raised_regions(&config).is_empty(), "{config:?}");
        }
    }
}
