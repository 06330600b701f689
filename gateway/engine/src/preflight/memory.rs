//! Whether this host can give a config the memory it takes, asked before
//! anything is allocated: a host region is populated when mapped, so one
//! that does not fit is not refused by `mmap` but killed by the OOM killer,
//! and on a reload that would happen after the old engine stopped. GPU
//! memory is asked of the driver for the same reason as the second: a
//! reload refused up front keeps the running engine receiving.

use std::collections::BTreeMap;

use daqiri_config::limits::human_bytes;
use daqiri_config::model::{MemoryKind, PollMode, Queue};
use daqiri_config::{ValidConfig, YamlPath};

use super::raised_pools::raised_num_bufs;
use crate::memory::{HostMemory, HugepageInfo};
use crate::queue::DIRECT_BURST_PACKETS;
use crate::{Error, Result, Status};

/// Bytes one burst metadata entry keeps per packet at most: per segment a
/// buffer index, offset and length; a flow id, a sender index, a timestamp.
const META_BYTES_PER_PACKET: u64 = 16 * crate::burst::MAX_SEGMENTS as u64 + 4 + 4 + 8;
/// Bytes of one metadata entry beside its per-packet columns.
const META_BYTES_PER_ENTRY: u64 = 256;

/// Memory a config takes from the host and its GPUs when it starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryNeeds {
    /// Plain memory: `host` and `host_pinned` regions and burst metadata.
    pub host: u64,
    /// Hugepage memory: `huge` regions.
    pub huge: u64,
    /// GPU memory: `device` regions, by GPU.
    pub device: BTreeMap<u32, u64>,
}

impl MemoryNeeds {
    /// These needs less `other`'s, each kind no lower than zero.
    pub fn less(mut self, other: &MemoryNeeds) -> Self {
        self.host = self.host.saturating_sub(other.host);
        self.huge = self.huge.saturating_sub(other.huge);
        for (gpu, bytes) in &other.device {
            if let Some(mine) = self.device.get_mut(gpu) {
                *mine = mine.saturating_sub(*bytes);
            }
        }
        self
    }

    /// Whether nothing is needed.
    pub fn is_empty(&self) -> bool {
        self.host == 0 && self.huge == 0 && self.device.values().all(|&b| b == 0)
    }

    /// What `config` allocates, with pools raised as the engine raises them.
    pub fn of(config: &ValidConfig) -> Self {
        let cfg = config.config();
        let mut num_bufs: Vec<u32> = cfg.memory_regions.iter().map(|r| r.num_bufs).collect();
        for raised in raised_num_bufs(config) {
            num_bufs[raised.region] = raised.to;
        }
        let mut needs = MemoryNeeds::default();
        for (region, bufs) in cfg.memory_regions.iter().zip(num_bufs) {
            let bytes = u64::from(bufs).saturating_mul(region.buf_size);
            match region.kind {
                MemoryKind::Host | MemoryKind::HostPinned => needs.host = needs.host.saturating_add(bytes),
                MemoryKind::Huge => needs.huge = needs.huge.saturating_add(bytes),
                MemoryKind::Device => {
                    let on_gpu = needs.device.entry(region.affinity).or_default();
                    *on_gpu = on_gpu.saturating_add(bytes);
                }
            }
        }
        let meta = |queues: &[Queue], entries: u32| -> u64 {
            queues.iter().map(|q| u64::from(entries).saturating_mul(entry_bytes(q))).fold(0, u64::saturating_add)
        };
        for (_, iface) in config.interfaces() {
            needs.host = needs
                .host
                .saturating_add(meta(iface.rx_queues(), cfg.rx_meta_buffers()))
                .saturating_add(meta(iface.tx_queues(), cfg.tx_meta_buffers()));
        }
        needs
    }
}

fn entry_bytes(queue: &Queue) -> u64 {
    let packets = match queue.poll_mode {
        PollMode::Indirect => u64::from(queue.batch_size()),
        PollMode::Direct => DIRECT_BURST_PACKETS as u64,
    };
    packets.saturating_mul(META_BYTES_PER_PACKET).saturating_add(META_BYTES_PER_ENTRY)
}

/// Refuses `config` when this host cannot give it its memory. `freed` is
/// what the engine it replaces gives back first (nothing at start-up).
pub fn check_memory(config: &ValidConfig, freed: MemoryNeeds) -> Result<()> {
    match shortfall(config, freed) {
        Some(why) => {
            let at = YamlPath::cfg().key("memory_regions");
            Err(Error::new(Status::NoFreePacketBuffers, format!("{at}: {why}")))
        }
        None => Ok(()),
    }
}

/// What this host lacks to give `config` its memory, if anything.
pub(super) fn shortfall(config: &ValidConfig, freed: MemoryNeeds) -> Option<String> {
    let needs = MemoryNeeds::of(config);
    if needs.host > 0
        && let Some(host) = HostMemory::read()
    {
        let available = host.available.saturating_add(freed.host);
        if needs.host > available {
            return Some(format!(
                "host and host_pinned regions with their burst metadata need {} but {} is available ({}{}); lower num_bufs, buf_size, batch_size or rx_meta_buffers/tx_meta_buffers, or give the gateway more memory",
                human_bytes(needs.host),
                human_bytes(available),
                host.limited_by.describe(),
                if freed.host > 0 { ", with what the running engine frees" } else { "" },
            ));
        }
    }
    if needs.huge > 0
        && let Some(pages) = HugepageInfo::read()
    {
        let wanted = pages.pages_for(needs.huge);
        let free = pages.free.saturating_add(freed.huge / pages.page_size.max(1));
        if wanted > free {
            return Some(format!(
                "huge regions need {wanted} hugepages ({}) but {free} are free{}; {}",
                human_bytes(needs.huge),
                if freed.huge > 0 { " with what the running engine frees" } else { "" },
                pages.how_to_reserve(wanted - free)
            ));
        }
    }
    for (&gpu, &bytes) in &needs.device {
        // Without a driver or that GPU the engine's start says so itself.
        let Some(free) = crate::memory::free_device_memory(gpu) else { continue };
        let given_back = freed.device.get(&gpu).copied().unwrap_or(0);
        let available = (free as u64).saturating_add(given_back);
        if bytes > available {
            return Some(format!(
                "device regions on GPU {gpu} need {} but {} of its memory is free{}; lower num_bufs or buf_size, or place regions on another GPU (affinity)",
                human_bytes(bytes),
                human_bytes(available),
                if given_back > 0 { " with what the running engine frees" } else { "" },
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(regions: &str, queue: &str) -> ValidConfig {
        let yaml = format!(
            r#"
daqiri:
  cfg:
    version: 1
    stream_type: socket
    rx_meta_buffers: 8
    memory_regions: [{regions}]
    interfaces:
    - name: in
      address: 127.0.0.1
      socket_config: {{ mode: server, local_addr: "udp://127.0.0.1:5001" }}
      rx:
        queues: [{queue}]
"#
        );
        daqiri_config::Document::parse(&yaml).unwrap().config.validate().unwrap()
    }

    #[test]
    fn needs_count_regions_by_kind_and_the_metadata() {
        let valid = config(
            "{ name: rx, kind: host, num_bufs: 1000, buf_size: 2048 }, { name: h, kind: huge, num_bufs: 10, buf_size: 4096 }, \
             { name: g1, kind: device, affinity: 1, num_bufs: 4, buf_size: 1024 }, { name: g1b, kind: device, affinity: 1, num_bufs: 1, buf_size: 8 }",
            "{ name: q, id: 0, cpu_core: 0, batch_size: 100, memory_regions: [rx] }",
        );
        let needs = MemoryNeeds::of(&valid);
        assert_eq!(needs.huge, 40_960);
        assert_eq!(needs.device, BTreeMap::from([(1, 4104)]));
        assert_eq!(needs.host, 2_048_000 + 8 * (100 * META_BYTES_PER_PACKET + META_BYTES_PER_ENTRY));
    }

    #[test]
    fn a_pool_beyond_this_host_is_refused_naming_the_numbers() {
        // 512 GiB, far beyond any machine the suite runs on.
        let valid = config(
            "{ name: rx, kind: host, num_bufs: 524288, buf_size: 1048576 }",
            "{ name: q, id: 0, cpu_core: 0, batch_size: 32, memory_regions: [rx] }",
        );
        let err = check_memory(&valid, MemoryNeeds::default()).unwrap_err();
        assert_eq!(err.status, Status::NoFreePacketBuffers);
        assert!(err.to_string().contains("need 512.0 GiB but"), "{err}");
        // What the replaced engine frees counts as available.
        let freed = MemoryNeeds { host: 1 << 40, ..MemoryNeeds::default() };
        check_memory(&valid, freed).unwrap();
    }
}
