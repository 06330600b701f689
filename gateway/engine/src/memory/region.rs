//! One memory region: a mapping, its buffers and their free list.

use std::ptr::NonNull;

use daqiri_config::model::{MemoryKind, MemoryRegion};

use super::free_list::FreeList;
use super::hugepages::HugepageInfo;
use super::mapping::Mapping;
use crate::error::{Error, Status};

/// Proof that its holder owns buffer `index` of region `region`.
///
/// Not `Clone`: exactly one token exists per taken buffer, so a `&mut` to a
/// token is a `&mut` to the bytes. Tokens never leave the crate.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a buffer token must be released to its region or it leaks"]
pub(crate) struct BufToken {
    region: u16,
    index: u32,
}

impl BufToken {
    pub(crate) fn region(&self) -> u16 {
        self.region
    }
}

/// A named buffer pool.
#[derive(Debug)]
pub struct Region {
    name: String,
    kind: MemoryKind,
    index: u16,
    buf_size: usize,
    num_bufs: u32,
    mapping: Mapping,
    free: FreeList,
}

impl Region {
    /// Allocates the region described by `config`. `index` is its position in
    /// the engine's region table.
    pub(crate) fn new(config: &MemoryRegion, index: u16) -> Result<Self, Error> {
        let buf_size = usize::try_from(config.buf_size)
            .map_err(|_| Error::invalid(format!("memory region \"{}\": buf_size is too large", config.name)))?;
        let bytes = config.total_bytes();
        let len = usize::try_from(bytes).map_err(|_| {
            Error::invalid(format!("memory region \"{}\" ({bytes} bytes) does not fit this address space", config.name))
        })?;
        let mapping = match config.kind {
            MemoryKind::Host => Mapping::host(len).map_err(|e| {
                Error::new(
                    Status::NoFreePacketBuffers,
                    format!("memory region \"{}\": cannot map {bytes} bytes of host memory: {e}", config.name),
                )
            })?,
            MemoryKind::Huge => map_hugepages(config, bytes, len)?,
            MemoryKind::Device | MemoryKind::HostPinned => {
                return Err(Error::new(
                    Status::NotSupported,
                    format!(
                        "memory region \"{}\" is kind {}, which needs CUDA; this build has no GPU support (use kind host or huge)",
                        config.name,
                        config.kind.as_str()
                    ),
                ));
            }
        };
        let free = FreeList::full(config.num_bufs);
        Ok(Self {
            name: config.name.clone(),
            kind: config.kind,
            index,
            buf_size,
            num_bufs: config.num_bufs,
            mapping,
            free,
        })
    }

    /// Region name from the config.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Memory kind.
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }

    /// Bytes per buffer.
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Buffers in the pool.
    pub fn num_bufs(&self) -> u32 {
        self.num_bufs
    }

    /// Buffers currently free.
    pub fn available(&self) -> u32 {
        self.free.len()
    }

    /// Buffers currently owned by bursts or workers.
    pub fn in_use(&self) -> u32 {
        self.num_bufs - self.available()
    }

    /// Takes a free buffer; `None` when the pool is exhausted.
    pub(crate) fn take(&self) -> Option<BufToken> {
        self.free.pop().map(|index| BufToken { region: self.index, index })
    }

    /// Returns a buffer to the pool.
    pub(crate) fn release(&self, token: BufToken) {
        self.check(&token);
        self.free.push(token.index);
    }

    /// The bytes of a buffer the caller owns.
    pub(crate) fn bytes<'a>(&'a self, token: &'a BufToken) -> &'a [u8] {
        let ptr = self.buffer_ptr(token);
        // SAFETY: the token proves exclusive ownership of this buffer, which lies
        // inside the mapping (`buffer_ptr` checks the index); the shared borrow of
        // the token keeps any `&mut` to the same bytes from existing meanwhile.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), self.buf_size) }
    }

    /// The bytes of a buffer the caller owns, writable.
    pub(crate) fn bytes_mut<'a>(&'a self, token: &'a mut BufToken) -> &'a mut [u8] {
        let ptr = self.buffer_ptr(token);
        // SAFETY: as in `bytes`; the unique borrow of the one token for this
        // buffer makes this the only live reference to its bytes.
        unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), self.buf_size) }
    }

    fn buffer_ptr(&self, token: &BufToken) -> NonNull<u8> {
        self.check(token);
        let offset = token.index as usize * self.buf_size;
        assert!(offset + self.buf_size <= self.mapping.len(), "buffer index out of range");
        // SAFETY: offset + buf_size is within the mapping, checked above.
        unsafe { self.mapping.base().add(offset) }
    }

    fn check(&self, token: &BufToken) {
        assert_eq!(
            token.region, self.index,
            "buffer of region {} used with region {} ({})",
            token.region, self.index, self.name
        );
    }
}

fn map_hugepages(config: &MemoryRegion, bytes: u64, len: usize) -> Result<Mapping, Error> {
    let info = HugepageInfo::read().ok_or_else(|| {
        Error::new(
            Status::NotSupported,
            format!(
                "memory region \"{}\" is kind huge but this kernel reports no hugepages in /proc/meminfo",
                config.name
            ),
        )
    })?;
    let pages = info.pages_for(bytes);
    let shortage = |free: u64| hugepage_shortage(&config.name, &info, pages, free);
    if info.free < pages {
        return Err(shortage(info.free));
    }
    let rounded = usize::try_from(pages * info.page_size).unwrap_or(len);
    Mapping::hugetlb(rounded).map_err(|_| shortage(HugepageInfo::read().map_or(0, |i| i.free)))
}

fn hugepage_shortage(region: &str, info: &HugepageInfo, pages: u64, free: u64) -> Error {
    Error::new(
        Status::NoFreePacketBuffers,
        format!(
            "memory region \"{region}\" (kind huge) needs {pages} hugepages of {} KiB ({} MiB) but only {free} are free; {}",
            info.page_size / 1024,
            (pages * info.page_size) >> 20,
            info.how_to_reserve(pages.saturating_sub(free))
        ),
    )
}

/// Every region of an engine, indexed as in `memory_regions`.
#[derive(Debug)]
pub(crate) struct RegionTable {
    regions: Vec<Region>,
}

impl RegionTable {
    pub(crate) fn new(regions: Vec<Region>) -> Self {
        Self { regions }
    }

    pub(crate) fn get(&self, index: u16) -> &Region {
        &self.regions[index as usize]
    }

    pub(crate) fn of(&self, token: &BufToken) -> &Region {
        self.get(token.region())
    }

    pub(crate) fn release(&self, token: BufToken) {
        self.of(&token).release(token);
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Region> {
        self.regions.iter()
    }

    pub(crate) fn index_of(&self, name: &str) -> Option<u16> {
        self.regions.iter().position(|r| r.name == name).map(|i| i as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugepage_shortage_says_how_to_reserve() {
        let info = HugepageInfo { page_size: 2 << 20, total: 10, free: 2 };
        let err = hugepage_shortage("rx", &info, 6, 2);
        assert_eq!(err.status, Status::NoFreePacketBuffers);
        assert!(err.message.contains("needs 6 hugepages of 2048 KiB (12 MiB) but only 2 are free"), "{err}");
        assert!(err.message.contains("echo 14 > /proc/sys/vm/nr_hugepages"), "{err}");
    }

    #[test]
    fn host_region_hands_out_each_buffer_once() {
        let config = MemoryRegion {
            name: "r".into(),
            kind: MemoryKind::Host,
            affinity: 0,
            access: vec![],
            num_bufs: 3,
            buf_size: 16,
        };
        let region = Region::new(&config, 0).unwrap();
        let mut tokens: Vec<BufToken> = (0..3).map(|_| region.take().unwrap()).collect();
        assert!(region.take().is_none());
        region.bytes_mut(&mut tokens[1]).fill(7);
        assert!(region.bytes(&tokens[0]).iter().all(|&b| b == 0), "buffers do not overlap");
        for t in tokens {
            region.release(t);
        }
        assert_eq!(region.available(), 3);
    }
}
