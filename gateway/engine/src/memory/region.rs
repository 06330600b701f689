//! One memory region: a mapping, its buffers and their free list.

#![allow(unsafe_code)]

use std::ptr::NonNull;

use daqiri_config::model::{MemoryAccess, MemoryKind, MemoryRegion};

use super::backing::Backing;
use super::device::{DeviceSlice, SegmentMemory};
use super::gpu_backing::{GpuBacking, StagingTwin};
use super::hugepages::HugepageInfo;
use super::mapping::Mapping;
use super::pool::{BufferPool, PoolCache, SharedStack};
use crate::error::{Error, Status};

/// Proof that its holder owns one buffer of a region.
///
/// Not `Clone`: exactly one token exists per taken buffer, so a `&mut` to a
/// token is a `&mut` to the bytes. The region is known from where the token
/// is kept (a queue's segment, a burst's column), so the token is just the
/// buffer's index: four bytes in a burst's column. Tokens never leave the crate.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a buffer token must be released to its region or it leaks"]
pub(crate) struct BufToken(u32);

impl BufToken {
    /// Marks a burst's segment whose buffer was already given back.
    pub(crate) const RELEASED: BufToken = BufToken(u32::MAX);

    pub(crate) fn is_released(&self) -> bool {
        self.0 == u32::MAX
    }

    /// A token made up for a unit test of a structure that only stores tokens.
    #[cfg(test)]
    pub(crate) fn for_test(index: u32) -> Self {
        Self(index)
    }

    /// The buffer's index in its region (an AF_XDP frame's address is
    /// derived from it).
    #[cfg(any(test, feature = "af_xdp", feature = "rdma"))]
    pub(crate) fn index(&self) -> u32 {
        self.0
    }
}

/// A named buffer pool over one block of memory.
#[derive(Debug)]
pub struct Region {
    name: String,
    kind: MemoryKind,
    access: Vec<MemoryAccess>,
    buf_size: usize,
    num_bufs: u32,
    /// Before `backing`: a pool over the memory (a DPDK mempool) is dropped
    /// before the memory is unmapped.
    pool: Box<dyn BufferPool>,
    /// The same pool, typed, when a device manages it (a DPDK mempool, whose
    /// RX queues are set up on it). Typed by its owner, so memory never
    /// names a backend.
    #[cfg(feature = "dpdk")]
    device_pool: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
    backing: Backing,
    /// A `device` region a CPU backend receives into or sends from: pinned
    /// host memory of the same layout where the CPU lands each buffer's
    /// bytes, copied to the device buffer of the same index when its burst
    /// is delivered (or from it, when a burst is sent).
    staging: StagingTwin,
}

impl Region {
    /// Allocates the region described by `config`.
    pub(crate) fn new(config: &MemoryRegion) -> Result<Self, Error> {
        let buf_size = usize::try_from(config.buf_size)
            .map_err(|_| Error::invalid(format!("memory region \"{}\": buf_size is too large", config.name)))?;
        let bytes = config.total_bytes();
        let len = usize::try_from(bytes).map_err(|_| {
            Error::invalid(format!("memory region \"{}\" ({bytes} bytes) does not fit this address space", config.name))
        })?;
        let backing = match config.kind {
            MemoryKind::Host => Backing::Host(Mapping::host(len, config.affinity).map_err(|e| map_error(config, e))?),
            MemoryKind::Huge => Backing::Hugetlb(map_hugepages(config, bytes, len)?),
            MemoryKind::Device | MemoryKind::HostPinned => Backing::Gpu(GpuBacking::allocate(config, len)?),
        };
        Ok(Self {
            name: config.name.clone(),
            kind: config.kind,
            access: config.access.clone(),
            buf_size,
            num_bufs: config.num_bufs,
            backing,
            pool: Box::new(SharedStack::full(config.num_bufs)),
            #[cfg(feature = "dpdk")]
            device_pool: None,
            staging: StagingTwin::new(),
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

    /// The config's `access` flags (what RDMA registration must allow).
    pub fn access(&self) -> &[MemoryAccess] {
        &self.access
    }

    /// What holds the bytes.
    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    /// Bytes per buffer.
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Buffers in the pool.
    pub fn num_bufs(&self) -> u32 {
        self.num_bufs
    }

    /// Buffers currently free (buffers a worker keeps in its cache count as in use).
    pub fn available(&self) -> u32 {
        self.pool.available()
    }

    /// Buffers the calling thread could take now (a DPDK mempool keeps some
    /// in other threads' caches, counted as available but out of its reach).
    pub(crate) fn takeable(&self) -> u32 {
        self.pool.takeable()
    }

    /// Buffers currently owned by bursts or workers.
    pub fn in_use(&self) -> u32 {
        self.num_bufs - self.available()
    }

    /// Hands the region's free list to a device's pool over its buffers (a
    /// DPDK mempool), which then owns which buffers are free. Refused while
    /// any buffer is taken.
    #[cfg(feature = "dpdk")]
    pub(crate) fn set_device_pool<P>(&mut self, pool: std::sync::Arc<P>) -> Result<(), Error>
    where
        P: BufferPool + Send + Sync + 'static,
    {
        if self.pool.available() != self.num_bufs {
            return Err(Error::new(
                Status::InternalError,
                format!("memory region \"{}\" has buffers in use; its pool cannot change", self.name),
            ));
        }
        self.pool = Box::new(std::sync::Arc::clone(&pool));
        self.device_pool = Some(pool);
        Ok(())
    }

    /// The device pool of type `P` that holds this region's free buffers, if any.
    #[cfg(feature = "dpdk")]
    pub(crate) fn device_pool<P: Send + Sync + 'static>(&self) -> Option<std::sync::Arc<P>> {
        self.device_pool.clone()?.downcast().ok()
    }

    /// The token of buffer `index`, which a device took from this region's
    /// pool itself (a DPDK driver refilling its RX ring from the mempool)
    /// and hands back filled: the caller now owns it.
    #[cfg(feature = "dpdk")]
    pub(crate) fn adopt(&self, index: u32) -> BufToken {
        debug_assert!(index < self.num_bufs, "buffer {index} of a {}-buffer region", self.num_bufs);
        BufToken(index)
    }

    /// Hands buffer `token` to a device that gives it back to this region's
    /// pool itself (a DPDK PMD freeing a sent mbuf into the mempool);
    /// returns its index. The mirror of [`adopt`](Self::adopt).
    #[cfg(feature = "dpdk")]
    pub(crate) fn hand_over(&self, token: BufToken) -> u32 {
        debug_assert!(self.device_pool.is_some(), "region \"{}\" has no device-managed pool", self.name);
        token.0
    }

    /// Takes a free buffer; `None` when the pool is exhausted.
    pub(crate) fn take(&self) -> Option<BufToken> {
        self.pool.take_one().map(BufToken)
    }

    /// Takes up to `n` free buffers, one pool operation per 64 rather than
    /// per buffer, handing each to `each`; how many it took.
    pub(crate) fn take_each(&self, n: usize, mut each: impl FnMut(BufToken)) -> usize {
        let mut chunk = [0u32; 64];
        let mut taken = 0;
        while taken < n {
            let want = (n - taken).min(chunk.len());
            let got = self.pool.take_into(&mut chunk[..want]);
            chunk[..got].iter().for_each(|&index| each(BufToken(index)));
            taken += got;
            if got < want {
                break;
            }
        }
        taken
    }

    /// Takes a buffer through a worker's cache (one shared access per refill).
    pub(crate) fn take_cached(&self, cache: &mut PoolCache) -> Option<BufToken> {
        cache.take(&*self.pool).map(BufToken)
    }

    /// Gives a worker's cached buffers back.
    pub(crate) fn drain_cache(&self, cache: &mut PoolCache) {
        cache.drain_into(&*self.pool);
    }

    /// Returns a buffer to the pool.
    pub(crate) fn release(&self, token: BufToken) {
        self.release_all(std::iter::once(token));
    }

    /// Returns many buffers in one pool operation; released markers are skipped.
    pub(crate) fn release_all(&self, tokens: impl Iterator<Item = BufToken>) {
        let mut indices = [0u32; 64];
        let mut n = 0;
        for token in tokens.filter(|t| !t.is_released()) {
            assert!(token.0 < self.num_bufs, "buffer {} is not in region {}", token.0, self.name);
            indices[n] = token.0;
            n += 1;
            if n == indices.len() {
                self.pool.release_bulk(&indices);
                n = 0;
            }
        }
        self.pool.release_bulk(&indices[..n]);
    }

    /// The host bytes of a buffer the caller owns. Panics for memory the CPU
    /// cannot read: backends check their queues' regions at open.
    pub(crate) fn bytes<'a>(&'a self, token: &'a BufToken) -> &'a [u8] {
        self.host_bytes(token).expect("backend opened on CPU-addressable regions only")
    }

    /// As [`bytes`](Self::bytes), `None` for memory the CPU cannot read (a
    /// `device` region without its staging twin).
    pub(crate) fn host_bytes<'a>(&'a self, token: &'a BufToken) -> Option<&'a [u8]> {
        let ptr = self.host_buffer(token)?;
        // SAFETY: the token proves exclusive ownership of this buffer, which lies
        // inside the mapping (`host_buffer` checks the index); the shared borrow of
        // the token keeps any `&mut` to the same bytes from existing meanwhile.
        Some(unsafe { std::slice::from_raw_parts(ptr.as_ptr(), self.buf_size) })
    }

    /// The host bytes of a buffer the caller owns, writable.
    pub(crate) fn bytes_mut<'a>(&'a self, token: &'a mut BufToken) -> &'a mut [u8] {
        self.host_bytes_mut(token).expect("backend opened on CPU-addressable regions only")
    }

    /// As [`bytes_mut`](Self::bytes_mut), `None` for memory the CPU cannot write.
    pub(crate) fn host_bytes_mut<'a>(&'a self, token: &'a mut BufToken) -> Option<&'a mut [u8]> {
        let ptr = self.host_buffer(token)?;
        // SAFETY: as in `bytes`; the unique borrow of the one token for this
        // buffer makes this the only live reference to its bytes.
        Some(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), self.buf_size) })
    }

    /// `len` bytes at `offset` of a buffer the caller owns, where they live.
    pub(crate) fn segment<'a>(&'a self, token: &'a BufToken, offset: usize, len: usize) -> SegmentMemory<'a> {
        assert!(offset + len <= self.buf_size, "segment beyond its buffer");
        match self.backing.host_base() {
            Some(_) => SegmentMemory::Host(&self.bytes(token)[offset..offset + len]),
            None => SegmentMemory::Device(self.device_segment(token, offset, len).expect("memory is host or device")),
        }
    }

    /// `len` bytes at `offset` of a buffer the caller owns, at the address a
    /// GPU reads them; `None` for memory no GPU maps.
    pub(crate) fn device_segment<'a>(
        &'a self,
        token: &'a BufToken,
        offset: usize,
        len: usize,
    ) -> Option<DeviceSlice<'a>> {
        assert!(offset + len <= self.buf_size, "segment beyond its buffer");
        let base = self.backing.device_base()?;
        Some(DeviceSlice::new(base.offset(self.buffer_offset(token) + offset), len))
    }

    /// Gives a `device` region its pinned staging twin (once), so a backend
    /// that reads and writes with the CPU can land and send its packets.
    pub(crate) fn stage_on_host(&self) -> Result<(), Error> {
        let Some(gpu) = self.backing.gpu() else { return Ok(()) };
        if self.backing.host_base().is_some() {
            return Ok(());
        }
        self.staging.give(gpu, self.backing.len(), &self.name)
    }

    /// For a staged `device` region: where the GPU reads `len` landed bytes
    /// of a buffer, and the device buffer they belong in.
    #[cfg(feature = "cuda")]
    pub(crate) fn staged_copy(&self, token: &BufToken, len: usize) -> Option<(super::DevicePtr, super::DevicePtr)> {
        let twin = self.staging.get()?;
        assert!(len <= self.buf_size, "segment beyond its buffer");
        let offset = self.buffer_offset(token);
        Some((twin.device().offset(offset), self.backing.device_base()?.offset(offset)))
    }

    /// Bytes from the region's first byte to byte `offset` of a buffer the caller owns.
    pub(crate) fn byte_offset(&self, token: &BufToken, offset: usize) -> usize {
        self.buffer_offset(token) + offset
    }

    fn buffer_offset(&self, token: &BufToken) -> usize {
        assert!(token.0 < self.num_bufs, "buffer {} is not in region {}", token.0, self.name);
        token.0 as usize * self.buf_size
    }

    fn host_buffer(&self, token: &BufToken) -> Option<NonNull<u8>> {
        let offset = self.buffer_offset(token);
        let base = self.backing.host_base().or_else(|| self.staging.host())?;
        assert!(offset + self.buf_size <= self.backing.len(), "buffer index out of range");
        // SAFETY: offset + buf_size is within the mapping, checked above.
        Some(unsafe { base.add(offset) })
    }
}

fn map_error(config: &MemoryRegion, e: std::io::Error) -> Error {
    let status =
        if e.kind() == std::io::ErrorKind::Unsupported { Status::NotSupported } else { Status::NoFreePacketBuffers };
    Error::io(
        status,
        format!(
            "memory region \"{}\": cannot map {} bytes of host memory on NUMA node {}",
            config.name,
            config.total_bytes(),
            config.affinity
        ),
        e,
    )
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
    Mapping::hugetlb(rounded, config.affinity).map_err(|_| shortage(HugepageInfo::read().map_or(0, |i| i.free)))
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
        let region = Region::new(&config).unwrap();
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
