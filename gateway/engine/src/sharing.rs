//! A region's memory for a process outside the engine (a consumer of the
//! gateway's bursts): a descriptor of its memory (host pages that map only
//! for reading, or GPU memory that process imports through CUDA), and where
//! each packet's segments lie in it, so the consumer reads them in place.

use std::os::fd::OwnedFd;

use daqiri_config::model::MemoryKind;

use crate::burst::Packet;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::preflight::MemoryNeeds;

/// A region as another process maps it.
#[derive(Debug)]
pub struct SharedRegion {
    /// Its index, as [`SegmentLocation::region`] names it.
    pub index: u16,
    /// Its name in the config.
    pub name: String,
    /// A descriptor of its memory: host pages (`kind` host, huge or
    /// host_pinned) that map only for reading, or, with `gpu` set, GPU
    /// memory (`kind: device`) to import through CUDA
    /// (`cuMemImportFromShareableHandle`, a POSIX file descriptor).
    pub fd: OwnedFd,
    /// Bytes to map from offset 0 (whole pages, or whole CUDA allocation
    /// granules for GPU memory).
    pub len: usize,
    /// The GPU whose memory it is, by UUID (`GPU-...`); `None` for host memory.
    pub gpu: Option<String>,
    /// Bytes per buffer.
    pub buf_size: usize,
    /// Buffers, from offset 0, `buf_size` apart.
    pub num_bufs: u32,
}

/// Where one segment of a packet lies in its region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLocation {
    /// The region's index (see [`SharedRegion::index`]).
    pub region: u16,
    /// Bytes from the region's first byte to the segment's.
    pub offset: u64,
    /// Its bytes.
    pub len: u32,
}

impl Engine {
    /// The index of the region named `name` (as [`SegmentLocation::region`] names it).
    pub fn region_index(&self, name: &str) -> Option<u16> {
        self.regions().index_of(name)
    }

    /// Region `index`'s memory for another process. `NOT_SUPPORTED` for
    /// device memory a GPU could not make shareable.
    pub fn share_region(&self, index: u16) -> Result<SharedRegion> {
        let regions = self.regions();
        let region = regions
            .iter()
            .nth(usize::from(index))
            .ok_or_else(|| Error::invalid(format!("no region {index}: the engine has {}", regions.iter().count())))?;
        let exported = region
            .backing()
            .export()
            .map_err(|e| Error::new(e.status, format!("sharing region \"{}\": {}", region.name(), e.message)))?;
        self.shared_regions().insert(index);
        Ok(SharedRegion {
            index,
            name: region.name().to_owned(),
            fd: exported.fd,
            len: exported.len,
            gpu: exported.gpu,
            buf_size: region.buf_size(),
            num_bufs: region.num_bufs(),
        })
    }
}

impl Engine {
    /// The memory of the regions handed to other processes: they may keep
    /// it mapped after this engine stops (no mapping of ours can be
    /// revoked), so a restart cannot count on it coming back.
    pub fn memory_shared(&self) -> MemoryNeeds {
        let config = self.config();
        let mut shared = MemoryNeeds::default();
        for &index in self.shared_regions().iter() {
            let Some(region) = self.regions().iter().nth(usize::from(index)) else { continue };
            let bytes = region.backing().len() as u64;
            match region.kind() {
                MemoryKind::Host | MemoryKind::HostPinned => shared.host += bytes,
                MemoryKind::Huge => shared.huge += bytes,
                MemoryKind::Device => {
                    let gpu = config
                        .config()
                        .memory_regions
                        .iter()
                        .find(|r| r.name == region.name())
                        .map_or(0, |r| r.affinity);
                    *shared.device.entry(gpu).or_default() += bytes;
                }
            }
        }
        shared
    }
}

impl Packet<'_> {
    /// Where segment `index` lies in its region (see
    /// [`Engine::share_region`]); `None` when absent or released.
    pub fn segment_location(&self, index: usize) -> Option<SegmentLocation> {
        let (region, offset, len) = self.segment_place(index)?;
        Some(SegmentLocation { region, offset: offset as u64, len })
    }
}
