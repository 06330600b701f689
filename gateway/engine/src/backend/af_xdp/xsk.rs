//! AF_XDP sockets over our regions (through xdpilone): one UMEM per region,
//! registered over the region's whole mapping with its buffers as frames,
//! and one socket per NIC queue, bound to that queue. Sockets on one region
//! share its UMEM, each with its own fill and completion rings.
//!
//! A frame's address in the UMEM is `buffer index * buf_size + offset`, so
//! the address the kernel hands back names the region buffer it filled.
//!
//! The backend's `unsafe` lives here (the UMEM over a region, two socket
//! options xdpilone does not read) and in the map layouts of `program.rs`.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::CString;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use xdpilone::{CompletionQueue, FillQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig};

use crate::error::{Error, Result, Status};
use crate::memory::Region;

/// Whether the kernel moves frames by DMA into the UMEM or copies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketMode {
    ZeroCopy,
    Copy,
}

impl SocketMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SocketMode::ZeroCopy => "zero_copy",
            SocketMode::Copy => "copy",
        }
    }
}

/// The rings of one socket, for the tasks that use them.
pub(super) struct QueueSocket {
    pub(super) nic_queue: u32,
    pub(super) mode: SocketMode,
    /// RX half: the fill ring and the receive ring.
    pub(super) rx: Option<(FillQueue, RingRx)>,
    /// TX half: the transmit ring and the completion ring.
    pub(super) tx: Option<(RingTx, CompletionQueue)>,
    /// A second descriptor of the socket, for its statistics and the XDP map.
    pub(super) handle: SocketHandle,
}

impl std::fmt::Debug for QueueSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSocket").field("nic_queue", &self.nic_queue).field("mode", &self.mode).finish()
    }
}

/// An owned duplicate of a socket's descriptor: reads its statistics
/// without touching the rings another thread drives.
#[derive(Debug)]
pub(crate) struct SocketHandle(OwnedFd);

impl AsRawFd for SocketHandle {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// What the kernel counted on one socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SocketCounters {
    /// Frames dropped for want of a fill-ring buffer, or too large for one.
    pub(crate) rx_dropped: u64,
    /// Frames dropped because the RX ring was full: the poller fell behind.
    pub(crate) rx_ring_full: u64,
    pub(crate) rx_invalid_descs: u64,
    pub(crate) tx_invalid_descs: u64,
}

impl SocketHandle {
    fn duplicate(fd: RawFd) -> Result<Self> {
        // SAFETY: `fd` is a live descriptor of a socket the caller holds.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(os_error("duplicating an AF_XDP socket", std::io::Error::last_os_error()));
        }
        // SAFETY: `dup` is a fresh descriptor nothing else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(dup) }))
    }

    /// Another handle on the same socket.
    pub(crate) fn try_clone(&self) -> Result<Self> {
        Self::duplicate(self.0.as_raw_fd())
    }

    pub(crate) fn counters(&self) -> SocketCounters {
        let mut stats: libc::xdp_statistics = zeroed_statistics();
        let mut len = std::mem::size_of_val(&stats) as libc::socklen_t;
        // SAFETY: a getsockopt into a buffer of the length given.
        let rc = unsafe {
            libc::getsockopt(self.0.as_raw_fd(), libc::SOL_XDP, libc::XDP_STATISTICS, (&raw mut stats).cast(), &mut len)
        };
        if rc != 0 {
            return SocketCounters::default();
        }
        SocketCounters {
            rx_dropped: stats.rx_dropped,
            rx_ring_full: stats.rx_ring_full,
            rx_invalid_descs: stats.rx_invalid_descs,
            tx_invalid_descs: stats.tx_invalid_descs,
        }
    }

    /// Lets polls of this socket busy-poll its NAPI for up to `us`
    /// microseconds, preferred over the softirq, `budget` frames at a time.
    fn set_busy_poll(&self, us: u32, budget: u32) -> Result<()> {
        for (option, value, name) in [
            (libc::SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"),
            (libc::SO_BUSY_POLL, us as libc::c_int, "SO_BUSY_POLL"),
            (libc::SO_BUSY_POLL_BUDGET, budget as libc::c_int, "SO_BUSY_POLL_BUDGET"),
        ] {
            // SAFETY: a setsockopt of one int on a socket we hold.
            let rc = unsafe {
                libc::setsockopt(
                    self.0.as_raw_fd(),
                    libc::SOL_SOCKET,
                    option,
                    (&raw const value).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                let why = std::io::Error::last_os_error();
                return Err(os_error(
                    &format!("busy_poll_us: {name} (it needs CAP_NET_ADMIN above net.core.busy_read)"),
                    why,
                ));
            }
        }
        Ok(())
    }

    /// The socket's `SO_BUSY_POLL`, in microseconds (0: off).
    pub(crate) fn busy_poll_us(&self) -> u32 {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a getsockopt of one int.
        let rc = unsafe {
            libc::getsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                (&raw mut value).cast(),
                &mut len,
            )
        };
        if rc == 0 { value.max(0) as u32 } else { 0 }
    }

    /// Drives the socket's NAPI from this thread (a busy-polling socket
    /// runs it here, not in the softirq): an empty, non-blocking receive.
    pub(crate) fn busy_poll(&self) {
        // SAFETY: no buffer is passed; the kernel only polls.
        unsafe {
            libc::recvfrom(
                self.0.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }

    fn mode(&self) -> SocketMode {
        let mut options = libc::xdp_options { flags: 0 };
        let mut len = std::mem::size_of_val(&options) as libc::socklen_t;
        // SAFETY: as in `counters`.
        let rc = unsafe {
            libc::getsockopt(self.0.as_raw_fd(), libc::SOL_XDP, libc::XDP_OPTIONS, (&raw mut options).cast(), &mut len)
        };
        if rc == 0 && options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 { SocketMode::ZeroCopy } else { SocketMode::Copy }
    }
}

/// A zeroed `xdp_statistics`, which is plain integers.
fn zeroed_statistics() -> libc::xdp_statistics {
    libc::xdp_statistics {
        rx_dropped: 0,
        rx_invalid_descs: 0,
        tx_invalid_descs: 0,
        rx_ring_full: 0,
        rx_fill_ring_empty_descs: 0,
        tx_ring_empty_descs: 0,
    }
}

fn os_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(Status::GenericFailure, format!("{what}: {e}"))
}

/// Ring sizes for a region of `num_bufs` buffers: a power of two that
/// leaves the application at least half the buffers, at most 2048.
pub(crate) fn ring_size(num_bufs: u32) -> u32 {
    let half = (num_bufs / 2).max(1);
    (1u32 << (31 - half.leading_zeros())).clamp(1, 2048)
}

/// One socket to open: its NIC queue, the region its UMEM is, and which halves it has.
pub(super) struct SocketPlan<'a> {
    pub(super) nic_queue: u32,
    pub(super) region: &'a Region,
    pub(super) rx: bool,
    pub(super) tx: bool,
    /// The RX queue's `busy_poll_us` and batch size (the poll budget).
    pub(super) busy_poll: Option<(u32, u32)>,
}

/// Opens the sockets of `plans` on `netdev`, one UMEM per region.
pub(super) fn open(netdev: &str, plans: &[SocketPlan<'_>]) -> Result<Vec<QueueSocket>> {
    let name = CString::new(netdev).map_err(|_| Error::invalid(format!("netdev \"{netdev}\" holds a NUL byte")))?;
    // Kept while sockets are made; the sockets then keep each UMEM registered.
    let mut umems: HashMap<*const Region, Umem> = HashMap::new();
    plans
        .iter()
        .map(|plan| {
            let (first, umem) = match umems.entry(plan.region) {
                Entry::Occupied(entry) => (false, entry.into_mut()),
                Entry::Vacant(entry) => (true, entry.insert(umem_over(plan.region)?)),
            };
            open_socket(&name, netdev, umem, first, plan)
        })
        .collect()
}

fn umem_over(region: &Region) -> Result<Umem> {
    let base = region.backing().host_base().ok_or_else(|| {
        Error::new(Status::NotSupported, format!("region \"{}\" is not host memory, which AF_XDP needs", region.name()))
    })?;
    let len = region.buf_size() * region.num_bufs() as usize;
    let rings = ring_size(region.num_bufs());
    let config = UmemConfig {
        fill_size: rings,
        complete_size: rings,
        frame_size: region.buf_size() as u32,
        headroom: 0,
        flags: 0,
    };
    let area = NonNull::slice_from_raw_parts(base, len);
    // SAFETY: the region's mapping is page aligned, `len` bytes long, and
    // outlives the sockets: their rings go with the workers' tasks, and the
    // driver closes its last descriptors at stop, all in `Engine::shutdown`,
    // before the engine can drop its regions.
    unsafe { Umem::new(config, area) }.map_err(|e| {
        Error::new(
            Status::GenericFailure,
            format!(
                "registering region \"{}\" as an AF_XDP UMEM failed: {e} (it needs CAP_NET_RAW and CAP_IPC_LOCK, or a memlock limit above {} bytes)",
                region.name(),
                len
            ),
        )
    })
}

fn open_socket(name: &CString, netdev: &str, umem: &Umem, first: bool, plan: &SocketPlan<'_>) -> Result<QueueSocket> {
    let queue = plan.nic_queue;
    let failed = |what: &str, e: xdpilone::Errno| {
        Error::new(Status::GenericFailure, format!("AF_XDP socket on {netdev} queue {queue}: {what}: {e}"))
    };
    let mut info = IfInfo::invalid();
    info.from_name(name).map_err(|e| {
        Error::new(Status::InvalidParameter, format!("netdev \"{netdev}\" not found in this network namespace: {e}"))
    })?;
    info.set_queue(queue);
    let socket =
        if first { Socket::with_shared(&info, umem) } else { Socket::new(&info) }.map_err(|e| failed("socket", e))?;
    let device = umem.fq_cq(&socket).map_err(|e| failed("fill and completion rings", e))?;
    let rings = ring_size(plan.region.num_bufs());
    let config = SocketConfig {
        rx_size: plan.rx.then(|| NonZeroU32::new(rings)).flatten(),
        tx_size: plan.tx.then(|| NonZeroU32::new(rings)).flatten(),
        // Neither copy nor zero-copy named: the kernel takes zero-copy
        // where the driver has it and copies otherwise. A socket sharing
        // the UMEM must name nothing: it inherits the first one's flags.
        bind_flags: if first { SocketConfig::XDP_BIND_NEED_WAKEUP } else { 0 },
    };
    let user = umem.rx_tx(&socket, &config).map_err(|e| failed("RX and TX rings", e))?;
    // Mapped before the bind, which works on every kernel: older ones (Debian
    // 12's 6.1 in the VM test bed) refuse to map a bound socket's rings (EBUSY).
    let rx = if plan.rx { Some(user.map_rx().map_err(|e| failed("mapping the RX ring", e))?) } else { None };
    let tx = if plan.tx { Some(user.map_tx().map_err(|e| failed("mapping the TX ring", e))?) } else { None };
    umem.bind(&user).map_err(|e| {
        let hint = if e.get_raw() == libc::EINVAL {
            format!(" (does {netdev} have a queue {queue}? `ethtool -L {netdev} combined N` sets how many it has)")
        } else {
            String::new()
        };
        Error::new(Status::GenericFailure, format!("AF_XDP socket on {netdev} queue {queue}: bind: {e}{hint}"))
    })?;
    let handle = SocketHandle::duplicate(user.as_raw_fd())?;
    if let Some((us, budget)) = plan.busy_poll {
        handle.set_busy_poll(us, budget)?;
    }
    let (fill, completion) = device.into_parts();
    Ok(QueueSocket {
        nic_queue: queue,
        mode: handle.mode(),
        rx: rx.map(|rx| (fill, rx)),
        tx: tx.map(|tx| (tx, completion)),
        handle,
    })
}

#[cfg(test)]
mod tests {
    use super::ring_size;

    #[test]
    fn rings_leave_the_application_half_the_buffers() {
        assert_eq!(ring_size(8192), 2048);
        assert_eq!(ring_size(100_000), 2048);
        assert_eq!(ring_size(3000), 1024);
        assert_eq!(ring_size(64), 32);
        assert_eq!(ring_size(1), 1);
    }
}
