//! A region's memory for a process outside the engine (a consumer of the
//! gateway's bursts): a read-only descriptor of its pages, and where each
//! packet's segments lie in it, so the consumer reads them in place.

use std::os::fd::OwnedFd;

use crate::burst::Packet;
use crate::engine::Engine;
use crate::error::{Error, Result, Status};
use crate::memory::Backing;

/// A region as another process maps it.
#[derive(Debug)]
pub struct SharedRegion {
    /// Its index, as [`SegmentLocation::region`] names it.
    pub index: u16,
    /// Its name in the config.
    pub name: String,
    /// A descriptor of its pages that maps only for reading.
    pub fd: OwnedFd,
    /// Bytes to map from offset 0 (whole pages).
    pub len: usize,
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

    /// Region `index`'s memory for another process. Host and hugepage
    /// regions are shared; GPU memory (`device`, `host_pinned`) answers
    /// `NOT_SUPPORTED`.
    pub fn share_region(&self, index: u16) -> Result<SharedRegion> {
        let regions = self.regions();
        let region = regions
            .iter()
            .nth(usize::from(index))
            .ok_or_else(|| Error::invalid(format!("no region {index}: the engine has {}", regions.iter().count())))?;
        let mapping = match region.backing() {
            Backing::Host(m) | Backing::Hugetlb(m) => m,
            Backing::Gpu(_) => {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "region \"{}\" is kind {}: only host and huge regions are shared with other processes",
                        region.name(),
                        region.kind().as_str()
                    ),
                ));
            }
        };
        let fd = mapping
            .read_only_fd()
            .map_err(|e| Error::new(Status::InternalError, format!("sharing region \"{}\": {e}", region.name())))?;
        Ok(SharedRegion {
            index,
            name: region.name().to_owned(),
            fd,
            len: mapping.len(),
            buf_size: region.buf_size(),
            num_bufs: region.num_bufs(),
        })
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
