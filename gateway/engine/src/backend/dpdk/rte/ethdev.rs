//! One DPDK Ethernet port: configured with the engine's queues, started,
//! polled, read for counters, stopped and closed.

use std::ffi::CString;
use std::ptr::NonNull;

use dpdk_sys::{MbufFields, rte_mbuf};

use super::mempool::Mempool;
use super::staging::StagingPool;
use super::timestamp::TimestampField;
use crate::burst::Frame;
use crate::error::{Error, Result, Status};

/// A started port.
#[derive(Debug)]
pub(crate) struct EthPort {
    id: u16,
    address: String,
    closed: std::sync::atomic::AtomicBool,
    /// RX staging pools, for a PMD that needs mbufs of its own layout;
    /// dropped after the port closes (fields drop after `Drop::drop`).
    staging: std::sync::OnceLock<Vec<StagingPool>>,
}

/// The drop counters of a port's `rte_eth_stats` (the rest reach users as xstats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PortCounters {
    /// Dropped by the NIC: no RX descriptor was free (`imissed`).
    pub rx_missed: u64,
    /// Erroneous frames (`ierrors`).
    pub rx_errors: u64,
    /// Descriptors that found no mbuf to refill with (`rx_nombuf`).
    pub rx_no_mbuf: u64,
}

/// Mbufs one RX poll returned, as (buffer index, data offset, length).
#[derive(Debug)]
pub(crate) struct RxMbufs {
    raw: Vec<*mut rte_mbuf>,
    count: usize,
}

/// The pools an RX queue lands in: one, or for header-data split two
/// (DPDK buffer split: the headers in `head`'s mbufs, the rest in `payload`'s).
#[derive(Debug, Clone)]
pub(crate) struct RxPools {
    pub head: std::sync::Arc<Mempool>,
    pub payload: Option<std::sync::Arc<Mempool>>,
}

/// `ol_flags` of a packet a MARK action tagged.
const MARKED: u64 = dpdk_sys::RTE_MBUF_F_RX_FDIR_ID as u64;

/// What a receiver reads of a received mbuf's header.
struct RxHeader {
    offset: u16,
    len: u16,
    flags: u64,
    segments: u16,
}

impl RxHeader {
    /// The header of `m`, a chain head `rx_burst` just handed over.
    fn of(m: *mut rte_mbuf) -> (NonNull<rte_mbuf>, Self) {
        let mbuf = NonNull::new(m).expect("rx_burst fills what it counts");
        // SAFETY: an mbuf (chain head) the PMD just handed over.
        let m = unsafe { mbuf.as_ref() };
        (mbuf, Self { offset: m.data_off(), len: m.data_len(), flags: m.ol_flags, segments: m.nb_segs() })
    }
}

/// The second segment of a split packet: its payload buffer, where the
/// bytes start, and how many.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tail {
    pub index: u32,
    pub offset: u16,
    pub len: u32,
}

/// One received frame: its buffer, where it starts, its length, the flow
/// id a MARK rule gave it, and the PMD's receive timestamp.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// The buffer of the queue's pool; `None` for an mbuf of another pool,
    /// or a chain of several (a PMD such as net_ring passes on the chains a
    /// TX queue with several segments sent), which are copied whole.
    pub index: Option<u32>,
    pub offset: u16,
    pub len: u32,
    pub mark: Option<u32>,
    pub timestamp: Option<u64>,
    /// A split packet's payload segment (then `index` holds the headers).
    pub tail: Option<Tail>,
}

// SAFETY: the pointers are mbufs this queue's poller owns until it turns
// them into buffer indices; they never cross threads while held.
unsafe impl Send for RxMbufs {}

/// The payload segment of a buffer-split chain whose second mbuf is one of `payload`'s.
///
/// # Safety
/// `head` is a live two-segment chain the PMD handed over.
unsafe fn split_tail(head: NonNull<rte_mbuf>, payload: &Mempool) -> Option<Tail> {
    // SAFETY: the caller's chain has a live second mbuf.
    let next = NonNull::new(unsafe { head.as_ref().next })?;
    // SAFETY: as above.
    let (offset, len) = unsafe { (next.as_ref().data_off(), next.as_ref().data_len()) };
    Some(Tail { index: payload.index_of(next)?, offset, len: u32::from(len) })
}

/// Makes a split chain's head a single mbuf again: its headers and its
/// payload go back to their pools one by one, as raw mbufs
/// ([`Mempool`]'s `release_bulk`), which must not point at each other.
///
/// # Safety
/// `head` is a live chain the PMD handed over, and nothing else holds it.
unsafe fn unchain(head: NonNull<rte_mbuf>) {
    // SAFETY: the caller's mbuf is live and ours.
    let m = unsafe { &mut *head.as_ptr() };
    m.next = std::ptr::null_mut();
    m.make_single_segment();
}

impl RxMbufs {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self { raw: vec![std::ptr::null_mut(); n], count: 0 }
    }

    /// What the last poll received into `pools`, by position; with
    /// `stamps`, each packet's timestamp.
    pub(crate) fn received<'a>(
        &'a self,
        pools: &'a RxPools,
        stamps: Option<TimestampField>,
        from: usize,
    ) -> impl Iterator<Item = (usize, Received)> + 'a {
        self.raw[..self.count].iter().enumerate().skip(from).map(move |(at, &m)| {
            let (mbuf, RxHeader { offset, len, flags, segments }) = RxHeader::of(m);
            let mut mark = 0u32;
            // Tested here first: most packets carry no mark, and the shim is a call.
            let marked = flags & MARKED != 0
                // SAFETY: as above; `mark` is written when the flag is set.
                && unsafe { dpdk_sys::daqiri_mbuf_mark(mbuf.as_ptr(), &mut mark) } != 0;
            let timestamp = stamps.and_then(|field| field.read(mbuf, flags));
            // A chain that is not a split into our own two pools is copied whole.
            let (index, tail) = match (segments, &pools.payload) {
                (1, _) => (pools.head.index_of(mbuf), None),
                (2, Some(payload)) => {
                    // SAFETY: a two-segment chain the PMD just handed over.
                    match (pools.head.index_of(mbuf), unsafe { split_tail(mbuf, payload) }) {
                        (Some(head), Some(tail)) => {
                            // SAFETY: as above; both mbufs become buffers of their own regions.
                            unsafe { unchain(mbuf) };
                            (Some(head), Some(tail))
                        }
                        _ => (None, None),
                    }
                }
                _ => (None, None),
            };
            (at, Received { index, offset, len: u32::from(len), mark: marked.then_some(mark), timestamp, tail })
        })
    }

    /// The leading frames of the last poll that are each one unmarked mbuf
    /// of `pool`, as (buffer index, where the frame starts, its length) in
    /// `out`; how many. The rest go through [`received`](Self::received).
    pub(crate) fn plain_frames(&self, pool: &Mempool, out: &mut [Frame]) -> usize {
        for (at, (&m, slot)) in self.raw[..self.count].iter().zip(out.iter_mut()).enumerate() {
            let (mbuf, RxHeader { offset, len, flags, segments }) = RxHeader::of(m);
            let index = pool.index_of(mbuf).filter(|_| segments == 1 && flags & MARKED == 0);
            let Some(index) = index else { return at };
            *slot = (index, offset, u32::from(len));
        }
        self.count.min(out.len())
    }

    /// Copies the frame at `at`, which is not a buffer of the queue's pool
    /// (a PMD such as net_ring passes on mbufs of other pools), into `dst`
    /// and frees its mbuf; `None` (mbuf freed all the same) if it does not fit.
    pub(crate) fn take_foreign(&self, at: usize, dst: &mut [u8]) -> Option<usize> {
        let mbuf = self.raw[at];
        let capacity = u32::try_from(dst.len()).unwrap_or(u32::MAX - 1);
        // SAFETY: a live mbuf this poll received and nothing else holds;
        // `dst` has `capacity` bytes; the mbuf is not touched after the free.
        let copied = unsafe {
            let copied = dpdk_sys::daqiri_mbuf_copy_out(mbuf, dst.as_mut_ptr(), capacity);
            dpdk_sys::daqiri_pktmbuf_free(mbuf);
            copied
        };
        (copied != u32::MAX).then_some(copied as usize)
    }
}

/// Packets on their way to a TX queue, as mbuf chains over our buffers.
#[derive(Debug)]
pub(crate) struct TxMbufs {
    raw: Vec<*mut rte_mbuf>,
    /// Each packet's length, for the queue's byte count.
    lens: Vec<u32>,
}

// SAFETY: as for RxMbufs: mbufs the sending task owns until the PMD takes them.
unsafe impl Send for TxMbufs {}

impl TxMbufs {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self { raw: Vec::with_capacity(n), lens: Vec::with_capacity(n) }
    }

    pub(crate) fn len(&self) -> usize {
        self.raw.len()
    }

    /// Adds a packet whose segment `s` is buffer `index` of pool `s`,
    /// `len` bytes from `offset`. The buffers must be the caller's (taken
    /// from the region, which is the pool), and are the PMD's once sent.
    pub(crate) fn push(&mut self, segments: &[(&Mempool, u32, u16, u16)]) {
        let mut mbufs = [std::ptr::null_mut(); crate::burst::MAX_SEGMENTS];
        let mut offsets = [0u16; crate::burst::MAX_SEGMENTS];
        let mut lens = [0u16; crate::burst::MAX_SEGMENTS];
        for (s, &(pool, index, offset, len)) in segments.iter().enumerate() {
            (mbufs[s], offsets[s], lens[s]) = (pool.mbuf(index).as_ptr(), offset, len);
        }
        // SAFETY: each mbuf is the caller's, allocated (so reset) by its pool;
        // the arrays hold `segments.len()` entries.
        let head = unsafe {
            dpdk_sys::daqiri_tx_chain(mbufs.as_mut_ptr(), offsets.as_ptr(), lens.as_ptr(), segments.len() as u32)
        };
        self.raw.push(head);
        self.lens.push(lens.iter().map(|&l| u32::from(l)).sum());
    }

    /// Frees what was not sent (their buffers go back to their pools); returns how many.
    pub(crate) fn free_all(&mut self) -> usize {
        let n = self.raw.len();
        self.lens.clear();
        for m in self.raw.drain(..) {
            // SAFETY: unsent packets are still ours.
            unsafe { dpdk_sys::daqiri_pktmbuf_free(m) };
        }
        n
    }
}

impl Drop for TxMbufs {
    fn drop(&mut self) {
        self.free_all();
    }
}

impl EthPort {
    /// Finds the port of `address` (a PCIe address or a virtual device's
    /// devargs), not yet configured.
    pub(crate) fn find(address: &str) -> Result<Self> {
        // A vdev's name is its devargs up to the first comma.
        let name = address.split(',').next().unwrap_or(address);
        let c_name = CString::new(name).map_err(|_| Error::invalid(format!("address \"{address}\" has a NUL")))?;
        let mut id = 0u16;
        // SAFETY: EAL is initialised; the name is a valid C string; `id` is written on success.
        let rc = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
        if rc != 0 {
            return Err(Error::new(
                Status::InvalidParameter,
                format!(
                    "no DPDK port \"{name}\": not a probed PCIe device or virtual device ({})",
                    super::errors::errno_text(rc)
                ),
            ));
        }
        Ok(EthPort { id, address: address.to_owned(), closed: false.into(), staging: std::sync::OnceLock::new() })
    }

    /// The devargs or PCIe address the port was found by.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// What the PMD says of the port; `None` when it cannot say.
    fn dev_info(&self) -> Option<dpdk_sys::rte_eth_dev_info> {
        let mut info = dpdk_sys::rte_eth_dev_info::default();
        // SAFETY: the port exists; `info` is written on success.
        (unsafe { dpdk_sys::rte_eth_dev_info_get(self.id, &mut info) } == 0).then_some(info)
    }

    /// The NIC's clock (`rte_eth_read_clock`), in its own ticks.
    pub(crate) fn read_clock(&self) -> std::result::Result<u64, String> {
        let mut ticks = 0u64;
        // SAFETY: the port exists; `ticks` is a valid out pointer.
        let rc = unsafe { dpdk_sys::rte_eth_read_clock(self.id, &mut ticks) };
        if rc == 0 { Ok(ticks) } else { Err(super::errors::errno_text(rc)) }
    }

    /// The most RX and TX queues the PMD offers (net_af_packet: its
    /// `qpairs`; net_af_xdp: its `queue_count`).
    pub(crate) fn max_queues(&self) -> (u16, u16) {
        self.dev_info().map_or((0, 0), |info| (info.max_rx_queues, info.max_tx_queues))
    }

    /// The EAL device behind the port, for DMA mappings.
    pub(crate) fn device(&self) -> Option<super::mempool::DmaDevice> {
        self.dev_info().and_then(|info| super::mempool::DmaDevice::new(info.device))
    }

    /// The RX offloads the PMD advertises (`rx_offload_capa`).
    pub(crate) fn rx_offload_capa(&self) -> u64 {
        self.dev_info().map_or(0, |info| info.rx_offload_capa)
    }

    /// The RX offload that header-data split needs, when a queue splits;
    /// NOT_SUPPORTED naming the PMD when it has no buffer split.
    fn buffer_split(&self, rx_pools: &[RxPools]) -> Result<u64> {
        let Some(queue) = rx_pools.iter().position(|p| p.payload.is_some()) else { return Ok(0) };
        // SAFETY: a constant of the shim.
        let split = unsafe { dpdk_sys::daqiri_rx_offload_buffer_split() };
        if self.rx_offload_capa() & split == 0 {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "rx.queues[{queue}].memory_regions: RX queue {queue} of \"{}\" lands in two regions (header-data split), which needs DPDK buffer split: the {} PMD has none (RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT); give the queue one region",
                    self.address,
                    self.driver_name()
                ),
            ));
        }
        Ok(split)
    }

    /// Sets up RX queue `queue` with buffer split: each packet's first
    /// `head`'s data room of bytes (its headers) in an mbuf of `head`, the
    /// rest in one of `payload`.
    fn setup_split_queue(&self, queue: u16, descriptors: u16, socket: u32, head: &Mempool, payload: &Mempool) -> i32 {
        let Some(info) = self.dev_info() else { return -libc::ENODEV };
        let segment = |pool: &Mempool, length: u16| dpdk_sys::rte_eth_rxseg {
            split: dpdk_sys::rte_eth_rxseg_split { mp: pool.raw(), length, offset: 0, proto_hdr: 0 },
        };
        // Length 0: the payload segment takes what its mbuf holds.
        let mut segments = [segment(head, head.data_bytes().min(usize::from(u16::MAX)) as u16), segment(payload, 0)];
        let mut conf = info.default_rxconf;
        // SAFETY: a constant of the shim.
        conf.offloads |= unsafe { dpdk_sys::daqiri_rx_offload_buffer_split() };
        conf.rx_seg = segments.as_mut_ptr();
        conf.rx_nseg = segments.len() as u16;
        // SAFETY: the port is configured with this queue; `segments` lives
        // through the call (PMDs copy it); the pools outlive the port.
        unsafe { dpdk_sys::rte_eth_rx_queue_setup(self.id, queue, descriptors, socket, &conf, std::ptr::null_mut()) }
    }

    /// The staging pools of a PMD that needs them, one per RX queue and as
    /// large as its region's pool (none for other PMDs), kept by the port.
    fn staging_pools(&self, rx_pools: &[RxPools]) -> Result<&[StagingPool]> {
        if !StagingPool::needed_by(&self.driver_name()) {
            return Ok(&[]);
        }
        tracing::info!(port = %self.address, pmd = %self.driver_name(), "the PMD receives only into mbufs of its own layout: RX copies each packet into the queue's region");
        let pools = rx_pools
            .iter()
            .enumerate()
            .map(|(queue, pools)| StagingPool::new(self.id(), self.address(), queue, pools.head.count()))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.staging.get_or_init(|| pools))
    }

    /// The name of the port's driver (its PMD), for messages.
    pub(crate) fn driver_name(&self) -> String {
        let Some(info) = self.dev_info().filter(|info| !info.driver_name.is_null()) else {
            return "unknown PMD".into();
        };
        // SAFETY: a static NUL-terminated name owned by the driver.
        unsafe { std::ffi::CStr::from_ptr(info.driver_name) }.to_string_lossy().into_owned()
    }

    /// Gives the port one RX queue per pool (with `descriptors` each) and
    /// `tx_queues` TX queues, with `rx_offloads` enabled, and starts it.
    pub(crate) fn start(&self, rx_pools: &[RxPools], tx_queues: u16, descriptors: u16, rx_offloads: u64) -> Result<()> {
        let (id, address) = (self.id, &self.address);
        let failed = |doing: String, rc: i32| {
            Error::new(
                Status::GenericFailure,
                format!("DPDK port \"{address}\": {doing}: {}", super::errors::errno_text(rc)),
            )
        };
        let mut conf = dpdk_sys::rte_eth_conf::default();
        conf.rxmode.offloads = rx_offloads | self.buffer_split(rx_pools)?;
        let rx_queues = rx_pools.len() as u16;
        // SAFETY: the port exists and is stopped; `conf` is a valid default configuration.
        let mut rc = unsafe { dpdk_sys::rte_eth_dev_configure(id, rx_queues, tx_queues, &conf) };
        let mut tx_queues = tx_queues;
        if rc != 0 && tx_queues < rx_queues {
            // Some PMDs only run queue pairs (net_af_xdp says EINVAL, net_tap
            // EPERM): the extra TX queues stay unused.
            tx_queues = rx_queues;
            // SAFETY: as above.
            rc = unsafe { dpdk_sys::rte_eth_dev_configure(id, rx_queues, tx_queues, &conf) };
        }
        if rc != 0 {
            return Err(failed(format!("configuring {rx_queues} RX and {tx_queues} TX queues"), rc));
        }
        // SAFETY: as above.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(id) }.max(0) as u32;
        let staging = self.staging_pools(rx_pools)?;
        for (queue, pools) in rx_pools.iter().enumerate() {
            let pool = &pools.head;
            let rc = match &pools.payload {
                Some(payload) => self.setup_split_queue(queue as u16, descriptors, socket, pool, payload),
                None => {
                    let landing = staging.get(queue).map_or_else(|| pool.raw(), StagingPool::raw);
                    // SAFETY: the port is configured with this many RX queues; the
                    // pool outlives the port (the engine stops ports before regions
                    // drop; staging pools drop after the port closes).
                    unsafe {
                        dpdk_sys::rte_eth_rx_queue_setup(
                            id,
                            queue as u16,
                            descriptors,
                            socket,
                            std::ptr::null(),
                            landing,
                        )
                    }
                }
            };
            if rc != 0 {
                return Err(failed(
                    format!(
                        "setting up RX queue {queue}, whose mbufs hold {} bytes after DPDK's headroom (some PMDs need a whole frame slot: raise buf_size)",
                        pool.data_bytes()
                    ),
                    rc,
                ));
            }
        }
        for queue in 0..tx_queues {
            // SAFETY: the port is configured with this many TX queues.
            let rc = unsafe { dpdk_sys::rte_eth_tx_queue_setup(id, queue, descriptors, socket, std::ptr::null()) };
            if rc != 0 {
                return Err(failed(format!("setting up TX queue {queue}"), rc));
            }
        }
        // SAFETY: every queue is set up.
        let rc = unsafe { dpdk_sys::rte_eth_dev_start(id) };
        if rc != 0 {
            return Err(failed("starting".into(), rc));
        }
        if self.driver_name() == "net_af_packet" {
            self.discard_stale(rx_queues);
        }
        // Not every PMD has a promiscuous mode; receiving works without one.
        // SAFETY: the port is started.
        let _ = unsafe { dpdk_sys::rte_eth_promiscuous_enable(id) };
        Ok(())
    }

    /// Empties RX queues of what they held when the port started, so the
    /// engine starts empty, as on a NIC. net_af_packet's sockets receive
    /// from the moment they exist, and in DPDK 22.11 from every interface
    /// until they are bound to theirs (after their ring is mapped): under a
    /// loopback flood, about 1,700 foreign frames were waiting at start.
    /// (Only a started port can be polled: its burst functions are wired
    /// at start.)
    /// A short burst means the queue caught up with its socket; the bound
    /// keeps a start under full-rate traffic short.
    fn discard_stale(&self, rx_queues: u16) {
        const BURST: usize = 64;
        const AT_MOST: usize = 1 << 16;
        let mut mbufs = RxMbufs::with_capacity(BURST);
        let mut discarded = 0;
        for queue in 0..rx_queues {
            let mut from_queue = 0;
            loop {
                let got = self.rx_burst(queue, &mut mbufs);
                for &mbuf in &mbufs.raw[..got] {
                    // SAFETY: an mbuf the PMD just handed over, freed once.
                    unsafe { dpdk_sys::daqiri_pktmbuf_free(mbuf) };
                }
                from_queue += got;
                if got < BURST || from_queue >= AT_MOST {
                    break;
                }
            }
            discarded += from_queue;
        }
        if discarded > 0 {
            tracing::debug!(port = %self.address, discarded, "discarded what the PMD's sockets held when the port started");
        }
    }

    /// Sends from the front of `mbufs` on TX queue `queue`; what the PMD
    /// took leaves `mbufs` (it frees each into its pool once sent). Returns
    /// the packets and bytes it took.
    pub(crate) fn tx_burst(&self, queue: u16, mbufs: &mut TxMbufs) -> (usize, u64) {
        let n = mbufs.raw.len().min(usize::from(u16::MAX)) as u16;
        // SAFETY: the port is started with this queue; the array holds `n`
        // packets that are ours; only this queue's sender calls it.
        let sent = usize::from(unsafe { dpdk_sys::daqiri_eth_tx_burst(self.id, queue, mbufs.raw.as_mut_ptr(), n) });
        mbufs.raw.drain(..sent);
        (sent, mbufs.lens.drain(..sent).map(u64::from).sum())
    }

    /// Asks the PMD to free the mbufs of packets the NIC finished sending
    /// on TX queue `queue` (most PMDs free them only when their ring needs
    /// the room); false when the PMD cannot.
    pub(crate) fn reclaim_sent(&self, queue: u16) -> bool {
        // SAFETY: the port is started with this queue; only this queue's
        // sender calls it, as for `tx_burst`.
        unsafe { dpdk_sys::rte_eth_tx_done_cleanup(self.id, queue, 0) >= 0 }
    }

    /// Limits TX queue `queue` to `mbps` in the NIC; the PMD's reason when it cannot.
    pub(crate) fn set_queue_rate_limit(&self, queue: u16, mbps: u32) -> std::result::Result<(), String> {
        // SAFETY: the port is started with this queue.
        match unsafe { dpdk_sys::rte_eth_set_queue_rate_limit(self.id, queue, mbps) } {
            0 => Ok(()),
            code => Err(super::errors::errno_text(-code)),
        }
    }

    /// The port's MAC address.
    pub(crate) fn mac(&self) -> Option<[u8; 6]> {
        let mut mac = [0u8; 6];
        // SAFETY: the port exists; `mac` has six bytes.
        (unsafe { dpdk_sys::daqiri_macaddr_get(self.id, mac.as_mut_ptr()) } == 0).then_some(mac)
    }

    /// The port's drop counters.
    pub(crate) fn counters(&self) -> PortCounters {
        let mut stats = dpdk_sys::rte_eth_stats::default();
        // SAFETY: the port exists; `stats` is written on success.
        if self.is_closed() || unsafe { dpdk_sys::rte_eth_stats_get(self.id, &mut stats) } != 0 {
            return PortCounters::default();
        }
        PortCounters { rx_missed: stats.imissed, rx_errors: stats.ierrors, rx_no_mbuf: stats.rx_nombuf }
    }

    /// Every counter the PMD keeps (`rte_eth_xstats`), by its name;
    /// empty once the port is closed.
    pub(crate) fn extended_counters(&self) -> Vec<(String, u64)> {
        if self.is_closed() {
            return Vec::new();
        }
        // SAFETY: a null array asks for the count only.
        let n = unsafe { dpdk_sys::rte_eth_xstats_get_names(self.id, std::ptr::null_mut(), 0) };
        let Ok(n) = u32::try_from(n) else { return Vec::new() };
        let mut names = vec![dpdk_sys::rte_eth_xstat_name::default(); n as usize];
        let mut values = vec![dpdk_sys::rte_eth_xstat::default(); n as usize];
        // SAFETY: both arrays hold `n` entries; the port exists.
        let (got_names, got_values) = unsafe {
            (
                dpdk_sys::rte_eth_xstats_get_names(self.id, names.as_mut_ptr(), n),
                dpdk_sys::rte_eth_xstats_get(self.id, values.as_mut_ptr(), n),
            )
        };
        if got_names != n as i32 || got_values != n as i32 {
            return Vec::new();
        }
        values
            .iter()
            .filter_map(|v| {
                let name = names.get(v.id as usize)?;
                // SAFETY: DPDK NUL-terminates names within the 64-byte array.
                let name = unsafe { std::ffi::CStr::from_ptr(name.name.as_ptr()) };
                Some((name.to_string_lossy().into_owned(), v.value))
            })
            .collect()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The port id DPDK gave the device.
    pub(crate) fn id(&self) -> u16 {
        self.id
    }

    /// Receives up to the buffer's capacity from RX queue `queue`.
    pub(crate) fn rx_burst(&self, queue: u16, mbufs: &mut RxMbufs) -> usize {
        let capacity = mbufs.raw.len().min(usize::from(u16::MAX)) as u16;
        // SAFETY: the port is started with this queue; `raw` has room for
        // `capacity` pointers; only this queue's poller calls it.
        mbufs.count =
            usize::from(unsafe { dpdk_sys::daqiri_eth_rx_burst(self.id, queue, mbufs.raw.as_mut_ptr(), capacity) });
        mbufs.count
    }
}

impl EthPort {
    /// Stops and closes the port and removes its device, so its queues give
    /// every mbuf back while their pools still exist, and the next engine
    /// probes the device afresh. Idempotent; pollers must be gone.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let name = self.address.split(',').next().unwrap_or(&self.address);
        let bus = if name.starts_with("net_") { c"vdev" } else { c"pci" };
        // SAFETY: the port was started by us and nothing polls it any more.
        unsafe {
            let _ = dpdk_sys::rte_eth_dev_stop(self.id);
            let _ = dpdk_sys::rte_eth_dev_close(self.id);
        }
        if let Ok(c_name) = CString::new(name) {
            // SAFETY: the port is closed; the names are valid C strings.
            let rc = unsafe { dpdk_sys::rte_eal_hotplug_remove(bus.as_ptr(), c_name.as_ptr()) };
            if rc != 0 {
                tracing::warn!(port = %self.address, "DPDK could not remove the device: {}", super::errors::errno_text(rc));
            }
        }
    }
}

impl Drop for EthPort {
    fn drop(&mut self) {
        self.close();
    }
}
