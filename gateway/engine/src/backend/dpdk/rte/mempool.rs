//! Mbuf pools whose data buffers are a region's own buffers (DPDK's pinned
//! external buffers): buffer `i` of the region is the data room of exactly
//! one mbuf, so a received mbuf names our buffer, and the mempool is the
//! region's free list (a [`BufferPool`]) while the engine runs.
//!
//! The memory is registered with its IOVA addresses (IOVA as VA: the
//! address itself, which an IOMMU translates), so every mbuf carries the
//! address a NIC writes to, and is DMA-mapped to each PCI device whose
//! queues use it ([`Mempool::map_for_dma`]); Drop unmaps it again.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Mutex;

use dpdk_sys::{rte_mbuf, rte_mempool};

use crate::error::{Error, Result, Status};
use crate::memory::BufferPool;

/// Mbufs each lcore keeps at hand before touching the shared ring.
const CACHE: u32 = 256;
/// Mbufs taken or freed per DPDK call.
const BULK: usize = 64;

/// A mempool over `num_bufs` buffers of `buf_size` bytes at `base`.
#[derive(Debug)]
pub(crate) struct Mempool {
    pool: NonNull<rte_mempool>,
    /// The mbuf of each buffer index.
    mbufs: Vec<NonNull<rte_mbuf>>,
    base: usize,
    buf_size: usize,
    /// `log2(buf_size)` where it is a power of two.
    buf_shift: Option<u32>,
    len: usize,
    /// What was registered with EAL: `len` rounded up to whole pages.
    registered: usize,
    /// The IOVA of `base`; `None` when EAL runs IOVA as PA, where our pages
    /// have no contiguous IOVA range and no device may DMA into them.
    iova: Option<u64>,
    /// The devices the memory is DMA-mapped to, unmapped on drop.
    mapped: Mutex<Vec<DmaDevice>>,
}

/// A DPDK device (`struct rte_device`) that memory is DMA-mapped to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DmaDevice(NonNull<dpdk_sys::rte_device>);

// SAFETY: a handle EAL owns for the process's life; only passed back to EAL.
unsafe impl Send for DmaDevice {}

impl DmaDevice {
    pub(super) fn new(device: *mut dpdk_sys::rte_device) -> Option<Self> {
        NonNull::new(device).map(Self)
    }
}

// SAFETY: a DPDK mempool is multi-producer, multi-consumer; the mbuf table
// is read-only after creation.
unsafe impl Send for Mempool {}
// SAFETY: as above.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates the pool; `base` must stay mapped (and `len` bytes long)
    /// until the pool is dropped, which the region guarantees by dropping
    /// its pool before its memory.
    pub(crate) fn over(name: &str, base: NonNull<u8>, buf_size: usize, num_bufs: u32) -> Result<Self> {
        let len = buf_size * num_bufs as usize;
        let page = page_size();
        // The region is a whole-page mapping, so the rounded range is ours.
        let registered = len.next_multiple_of(page);
        let failed = |doing: &str| {
            Error::new(
                Status::GenericFailure,
                format!("memory region \"{name}\": DPDK cannot {doing}: {}", super::errors::last_error()),
            )
        };
        let iova = iova_as_va().then_some(base.as_ptr() as u64);
        let mut pages: Vec<u64> = match iova {
            Some(start) => (0..registered / page).map(|i| start + (i * page) as u64).collect(),
            None => Vec::new(),
        };
        let table = if pages.is_empty() { std::ptr::null_mut() } else { pages.as_mut_ptr() };
        // SAFETY: [base, base + registered) is mapped memory the region owns;
        // `table` is null or holds one IOVA per page; DPDK records them
        // until Drop unregisters the range.
        let status =
            unsafe { dpdk_sys::rte_extmem_register(base.as_ptr().cast(), registered, table, pages.len() as u32, page) };
        if status != 0 {
            return Err(failed("register its memory"));
        }
        let ext = dpdk_sys::rte_pktmbuf_extmem {
            buf_ptr: base.as_ptr().cast(),
            buf_iova: iova.unwrap_or(u64::MAX), // RTE_BAD_IOVA where no device may DMA
            buf_len: len,
            elt_size: buf_size as u16,
        };
        let pool_name = CString::new(format!("daqiri_{}", super::errors::unique_id()))
            .map_err(|_| Error::invalid("mempool name has a NUL"))?;
        let data_room = u16::try_from(buf_size).map_err(|_| {
            Error::new(
                Status::NotSupported,
                format!("memory region \"{name}\": DPDK mbufs hold at most 65535 bytes, buf_size is {buf_size}"),
            )
        })?;
        // SAFETY: EAL is initialised; `ext` describes the memory registered
        // above; the name is a valid C string.
        let pool = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create_extbuf(
                pool_name.as_ptr(),
                num_bufs,
                CACHE.min(num_bufs / 2),
                0,
                data_room,
                dpdk_sys::rte_socket_id() as i32,
                &ext,
                1,
            )
        };
        let Some(pool) = NonNull::new(pool) else {
            let error = failed("create its mbuf pool");
            // SAFETY: registered above, unused by any pool.
            unsafe { dpdk_sys::rte_extmem_unregister(base.as_ptr().cast(), registered) };
            return Err(error);
        };
        let mut mempool = Self {
            pool,
            mbufs: Vec::new(),
            base: base.as_ptr() as usize,
            buf_size,
            buf_shift: buf_size.is_power_of_two().then(|| buf_size.trailing_zeros()),
            len,
            registered,
            iova,
            mapped: Mutex::new(Vec::new()),
        };
        mempool.index_mbufs(num_bufs as usize)?;
        Ok(mempool)
    }

    /// Maps the pool's memory for DMA by `device` (a PCI NIC whose queues
    /// use it), once per device. Refused under IOVA as PA, where the pages
    /// have no contiguous IOVA range a NIC could be given.
    pub(crate) fn map_for_dma(&self, device: DmaDevice, region: &str, address: &str) -> Result<()> {
        let mut mapped = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
        if mapped.contains(&device) {
            return Ok(());
        }
        let Some(iova) = self.iova else {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "memory region \"{region}\" cannot be given to {address}: DPDK runs IOVA as PA, and the region's pages are not physically contiguous; bind the NIC to vfio-pci behind an IOMMU (IOVA as VA) or pass --iova-mode=va"
                ),
            ));
        };
        // SAFETY: the range is registered external memory (above); the
        // device is live; the mapping is undone in Drop before unregistering.
        let status = unsafe {
            dpdk_sys::rte_dev_dma_map(device.0.as_ptr(), self.base as *mut std::os::raw::c_void, iova, self.registered)
        };
        if status != 0 {
            return Err(Error::new(
                Status::GenericFailure,
                // rte_errno is not set on every path through VFIO: the
                // kernel's answer is in EAL's log, not in the error.
                format!(
                    "memory region \"{region}\": DPDK cannot map it for DMA by {address}: the IOMMU refused the mapping (EAL's log above says why; under IOVA as VA the region's virtual addresses are its IOVAs, and an IOMMU whose address width is narrower than they are refuses them)"
                ),
            ));
        }
        mapped.push(device);
        Ok(())
    }

    /// How many mbufs (buffers) the pool has.
    pub(crate) fn count(&self) -> u32 {
        self.mbufs.len() as u32
    }

    /// Bytes a packet can fill in one mbuf: the buffer less DPDK's headroom.
    pub(crate) fn data_bytes(&self) -> usize {
        self.buf_size.saturating_sub(dpdk_sys::RTE_PKTMBUF_HEADROOM as usize)
    }

    /// Builds the buffer-index-to-mbuf table from every mbuf of the pool.
    fn index_mbufs(&mut self, count: usize) -> Result<()> {
        let mut found: Vec<Option<NonNull<rte_mbuf>>> = vec![None; count];
        unsafe extern "C" fn visit(
            _pool: *mut rte_mempool,
            table: *mut std::os::raw::c_void,
            mbuf: *mut std::os::raw::c_void,
            _index: u32,
        ) {
            // SAFETY: `table` is the (found, base, buf_size) tuple below, alive for the iteration.
            let (found, base, buf_size) =
                unsafe { &mut *table.cast::<(&mut Vec<Option<NonNull<rte_mbuf>>>, usize, usize)>() };
            let mbuf = mbuf.cast::<rte_mbuf>();
            // SAFETY: the iterator hands out initialised mbufs of this pool.
            let address = unsafe { (*mbuf).buf_addr } as usize;
            if let Some(slot) =
                address.checked_sub(*base).map(|offset| offset / *buf_size).and_then(|i| found.get_mut(i))
            {
                *slot = NonNull::new(mbuf);
            }
        }
        let mut context = (&mut found, self.base, self.buf_size);
        // SAFETY: the pool is live; `visit` only reads each mbuf and writes `context`.
        unsafe { dpdk_sys::rte_mempool_obj_iter(self.pool.as_ptr(), Some(visit), (&raw mut context).cast()) };
        self.mbufs = found.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| {
            Error::new(Status::InternalError, "a DPDK mbuf's buffer lies outside its region".to_owned())
        })?;
        Ok(())
    }

    /// The raw pool, for RX queue setup.
    pub(super) fn raw(&self) -> *mut rte_mempool {
        self.pool.as_ptr()
    }

    /// The mbuf whose data room is buffer `index`.
    pub(super) fn mbuf(&self, index: u32) -> NonNull<rte_mbuf> {
        self.mbufs[index as usize]
    }

    /// The buffer index of an mbuf of this pool.
    pub(super) fn index_of(&self, mbuf: NonNull<rte_mbuf>) -> Option<u32> {
        // SAFETY: the mbuf came from this pool's RX queue and is live.
        let address = unsafe { mbuf.as_ref().buf_addr } as usize;
        let offset = address.checked_sub(self.base).filter(|&o| o < self.len)?;
        // Once per received packet: a shift where the size allows (a divide
        // took a seventh of the receive path).
        Some(match self.buf_shift {
            Some(shift) => (offset >> shift) as u32,
            None => (offset / self.buf_size) as u32,
        })
    }
}

impl BufferPool for Mempool {
    fn take_bulk(&self, out: &mut Vec<u32>, n: usize) -> usize {
        let start = out.len();
        out.resize(start + n, 0);
        let taken = self.take_into(&mut out[start..]);
        out.truncate(start + taken);
        taken
    }

    fn take_into(&self, out: &mut [u32]) -> usize {
        let mut mbufs = [std::ptr::null_mut::<rte_mbuf>(); BULK];
        let mut taken = 0;
        while taken < out.len() {
            // rte_pktmbuf_alloc_bulk takes all or nothing: ask for less until it gives.
            let mut want = (out.len() - taken).min(BULK);
            let mut alloc = |want: usize| {
                // SAFETY: `mbufs` has room for `want` (at most BULK) pointers.
                unsafe { dpdk_sys::daqiri_pktmbuf_alloc_bulk(self.pool.as_ptr(), mbufs.as_mut_ptr(), want as u32) == 0 }
            };
            while want > 0 && !alloc(want) {
                want /= 2;
            }
            if want == 0 {
                break;
            }
            for (slot, &mbuf) in out[taken..].iter_mut().zip(&mbufs[..want]) {
                *slot = NonNull::new(mbuf).and_then(|m| self.index_of(m)).expect("an mbuf of this pool");
            }
            taken += want;
        }
        taken
    }

    /// Puts the mbufs straight back into the mempool, unread: every buffer
    /// the engine holds is a raw mbuf (reference count 1, no chain, as
    /// `rte_pktmbuf_alloc` gives it or a PMD receives it; a split chain is
    /// cut in two when it lands). `rte_pktmbuf_free_bulk` would read each
    /// mbuf's header on the releasing core, usually the application's,
    /// while the receiver's core last wrote it: a cross-core transfer per
    /// packet (docs/benchmarks.md, "Scaling over RX queues").
    fn release_bulk(&self, indices: &[u32]) {
        // A burst drop lands here: a stack array, no allocation.
        let mut mbufs = [std::ptr::null_mut::<rte_mbuf>(); BULK];
        for chunk in indices.chunks(BULK) {
            for (slot, &i) in mbufs.iter_mut().zip(chunk) {
                *slot = self.mbufs[i as usize].as_ptr();
            }
            // SAFETY: each index was taken (by us or by the PMD) and not yet
            // released, so its mbuf is out of the pool, ours, and raw (above).
            unsafe { dpdk_sys::daqiri_mempool_put_bulk(self.pool.as_ptr(), mbufs.as_ptr().cast(), chunk.len() as u32) };
        }
    }

    fn available(&self) -> u32 {
        // SAFETY: the pool is live.
        unsafe { dpdk_sys::daqiri_mempool_avail_count(self.pool.as_ptr()) }
    }

    fn takeable(&self) -> u32 {
        // SAFETY: the pool is live; the shim reads the calling lcore's cache, if it has one.
        unsafe { dpdk_sys::daqiri_mempool_takeable(self.pool.as_ptr()) }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: the ports using the pool are stopped and every mbuf is back
        // (the engine stops its ports and drops its bursts first).
        unsafe { dpdk_sys::rte_mempool_free(self.pool.as_ptr()) };
        let base = self.base as *mut std::os::raw::c_void;
        for device in self.mapped.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let iova = self.iova.expect("mapped only with an IOVA");
            // SAFETY: mapped in `map_for_dma` with these arguments; the
            // device's queues are stopped, so no DMA targets the range.
            if unsafe { dpdk_sys::rte_dev_dma_unmap(device.0.as_ptr(), base, iova, self.registered) } != 0 {
                tracing::warn!("unmapping a DPDK region for DMA failed: {}", super::errors::last_error());
            }
        }
        // SAFETY: registered in `over`; no pool or device uses it any more.
        unsafe { dpdk_sys::rte_extmem_unregister(base, self.registered) };
    }
}

/// Whether EAL gives devices virtual addresses as IOVAs (vfio behind an
/// IOMMU, or no device that needs physical addresses).
fn iova_as_va() -> bool {
    // SAFETY: reads EAL's configuration; EAL is initialised.
    unsafe { dpdk_sys::rte_eal_iova_mode() == dpdk_sys::rte_iova_mode_RTE_IOVA_VA }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}
