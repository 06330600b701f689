//! What a port's driver reads below its queues (a kernel socket, a NIC, an
//! XDP program), for `/api/v1/stats`.

use std::net::SocketAddr;

/// State and counters below a port's queues, as its driver reads them:
/// for sockets, the kernel's receive buffer and the peer. A field a backend
/// has no such thing for is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Bytes waiting in the kernel's receive buffers, not yet read.
    pub kernel_rx_backlog_bytes: Option<u64>,
    /// Size of those buffers (what the kernel granted of the requested 64 MiB).
    pub kernel_rx_buffer_bytes: Option<u64>,
    /// The peer: a UDP server's last sender, a TCP connection's other end.
    pub peer: Option<SocketAddr>,
    /// Whether a connection is up (connection-oriented backends; with a
    /// connection per queue, whether any is).
    pub connected: Option<bool>,
    /// A RoCE port's connection per RX queue.
    pub connections: Vec<QueueConnection>,
    /// The NIC's own counters by the driver's names (DPDK xstats: packets,
    /// bytes, `rx_missed_errors`, `rx_mbuf_allocation_errors`, per queue ...).
    pub nic_counters: Vec<(String, u64)>,
    /// An AF_XDP port's XDP program and sockets.
    pub af_xdp: Option<AfXdpLink>,
    /// A RoCE port's device, and the ring an ingest port's sender writes.
    pub roce: Option<RoceLink>,
    /// Why the port is down for good, where the backend knows (a RoCE
    /// port whose device was removed).
    pub down: Option<String>,
    /// Times the port brought its link back from an error a peer caused
    /// (a RoCE ingest port's queue pair from the error state).
    pub recoveries: Option<u64>,
    /// Why, the last time.
    pub last_error: Option<String>,
}

/// The connection of one RX queue (and of the TX queue of its position).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueConnection {
    /// The RX queue's id.
    pub rx_queue: u16,
    /// Its peer, while connected.
    pub peer: Option<SocketAddr>,
    /// Whether it is up.
    pub connected: bool,
}

/// One RoCE connection, as a program that drives it request by request
/// (DAQIRI's `rdma_*` calls) reads it: cheap to read on every poll, unlike
/// [`LinkStats`], which reads the device's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdmaConnection {
    /// Whether it is up.
    pub connected: bool,
    /// Its peer, while connected.
    pub peer: Option<SocketAddr>,
    /// Connections established at this position so far: a new one (after
    /// a reconnect, or the next peer of a server) counts up.
    pub established: u64,
    /// Work requests of the TX queue of this position (one per packet: a
    /// SEND, WRITE or READ) that are done, posted or not: completed by the
    /// device, flushed, or dropped before they were posted.
    pub finished: u64,
    /// Of those, the ones that failed.
    pub failed: u64,
}

/// How an AF_XDP port moves frames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfXdpLink {
    /// `native` (in the driver) or `generic` (after the kernel built a
    /// socket buffer): how the XDP program runs; `detached` once stopped.
    pub xdp_mode: &'static str,
    /// Each socket, by NIC queue.
    pub sockets: Vec<AfXdpSocket>,
}

/// One AF_XDP socket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfXdpSocket {
    /// The NIC queue it is bound to (the RX queue of that position).
    pub nic_queue: u32,
    /// `zero_copy` (the NIC writes into our buffers) or `copy`.
    pub mode: &'static str,
    /// The socket's busy-poll time in microseconds, when it busy-polls.
    pub busy_poll_us: Option<u32>,
}

/// Where a RoCE port lives on its RDMA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoceLink {
    /// The RDMA device (`rxe0`, `mlx5_0`).
    pub device: String,
    /// Its port number.
    pub port: u8,
    /// Our RoCE v2 GID (the address's IPv4-mapped form for IPv4).
    pub gid: std::net::Ipv6Addr,
    /// An ingest port's queue pair and ring: what its sender is programmed with.
    pub ingest: Option<IngestRing>,
}

/// The values a sender (an FPGA, a sensor) writes an ingest port's ring with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestRing {
    /// The queue pair number its packets go to.
    pub qpn: u32,
    /// The remote key of the ring's registration.
    pub rkey: u32,
    /// The ring's first byte as the sender addresses it (0: registered at IOVA 0).
    pub base: u64,
    /// Bytes per page: one frame each, its last bytes the sender's metadata.
    pub page_size: u64,
    /// Pages in the ring; the frame with immediate `n` is page `n % pages`.
    pub pages: u32,
    /// `UC` or `RC`.
    pub transport: &'static str,
}
