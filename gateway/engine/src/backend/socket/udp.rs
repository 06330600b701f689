//! UDP sockets: batched receive into pool buffers with software flow
//! steering, batched send of TX bursts.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use daqiri_config::SocketEndpoints;
use daqiri_config::model::{PollMode, SocketMode};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::buffers::tune;
use super::kernel_drops::{Dropped, KernelDrops};
use super::options::{self, SocketOptions};
use super::peer;
use super::sys::{self, RecvBatch, RecvMeta, SendBatch};
use crate::backend::LinkStats;
use crate::backend::PortDriver;
use crate::burst::{Burst, MAX_SEGMENTS, PacketSlot};
use crate::delivery::{Assembler, FullRing, RuleTally, Steer, Steered};
use crate::error::{Error, Result, Status};
use crate::flow::{FlowTable, Steering};
use crate::headers::{FlowKey, IPV4_LEN, UDP_LEN};
use crate::memory::{BufToken, PoolCache, RegionTable};
use crate::pacing::{self, Pacer};
use crate::port::DirectPoll;
use crate::port::Port;
use crate::queue::Queue;
use crate::sleep::SleepSet;
use crate::stats::DropReason;
use crate::task::{QueueTask, Task, sender_sleeps_on};

/// Counts what a socket's buffer dropped: the exact part and the estimate apart.
fn count_dropped(p: &Port, dropped: Dropped) {
    if dropped.at_least > 0 {
        p.rx_drops.dropped(DropReason::SocketOverflow, dropped.at_least);
    }
    if dropped.estimated_beyond > 0 {
        p.rx_drops.dropped(DropReason::SocketOverflowEstimated, dropped.estimated_beyond);
    }
}

/// The kernel's drop counter is read on every this many receives that got data.
const DROPS_EVERY: u32 = 16;
/// Datagrams per `recvmmsg`/`sendmmsg` call.
const SYSCALL_BATCH: usize = 64;
/// With UDP GRO: messages per `recvmmsg`, and datagrams (buffers) per message.
const GRO_MESSAGES: usize = 8;
const GRO_SEGMENTS: usize = 64;
/// Largest UDP datagram, for draining when the pool is exhausted.
const MAX_DATAGRAM: usize = 65536;
/// Most receive calls a stop spends on what the socket had already queued:
/// more than a full receive buffer takes, and a bound for a sender that
/// keeps sending.
const DRAIN_CALLS_AT_STOP: usize = 4096;

#[derive(Debug)]
struct Shared {
    socket: Socket,
    local: SocketAddr,
    mode: SocketMode,
    /// Server mode: where TX datagrams go (the last peer heard from).
    last_peer: arc_swap::ArcSwapOption<SocketAddr>,
    /// Largest datagram one GSO segment may be: path MTU less IP and UDP headers.
    gso_max_segment: usize,
    /// The kernel hands over coalesced runs of datagrams (UDP GRO).
    gro: bool,
    /// Server mode: the socket connected to the first peer, once there is
    /// one (the receiver reads it; the driver reads its counters).
    peer_socket: OnceLock<Socket>,
    /// Options the application set, for the peer socket when it opens.
    options: SocketOptions,
    /// A server whose indirect RX queues name several cores: a socket per queue.
    group: Option<Group>,
}

/// The sockets of RX queues 1.. of a server whose queues form a reuseport
/// group (queue 0's is [`Shared::socket`]; see [`super::reuseport`]).
#[derive(Debug)]
struct Group {
    sockets: Vec<Socket>,
    /// The flow table the group's program was built from besides the
    /// port's own, while a reload changes them: a datagram is given the
    /// flow id of the table that chose its socket.
    other_table: arc_swap::ArcSwap<FlowTable>,
}

impl Shared {
    /// The socket RX queue `queue` reads (the interface's one socket
    /// unless the queues form a group).
    fn socket_of(&self, queue: usize) -> &Socket {
        match (&self.group, queue) {
            (Some(group), 1..) => &group.sockets[queue - 1],
            _ => &self.socket,
        }
    }

    /// The peer socket; only asked for once the receiver has connected it.
    fn peer_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.peer_socket.get().expect("the peer socket is connected").as_fd()
    }
}

#[derive(Debug)]
pub(super) struct UdpDriver {
    shared: Arc<Shared>,
}

impl UdpDriver {
    pub(super) fn open(endpoints: SocketEndpoints, port: &Port) -> Result<Self> {
        let context = |what: &str| format!("interface \"{}\": {what}", port.name);
        let target = endpoints.local.or(endpoints.remote).expect("validated: one endpoint exists").socket_addr();
        let grouped = forms_group(endpoints, port);
        let socket = Socket::new(Domain::for_address(target), Type::DGRAM, Some(Protocol::UDP))
            .map_err(|e| Error::io(Status::InternalError, context("cannot create a UDP socket"), e))?;
        tune(&socket);
        if grouped {
            socket
                .set_reuse_port(true)
                .map_err(|e| Error::io(Status::InternalError, context("cannot set SO_REUSEPORT"), e))?;
        }
        let local = match endpoints.local {
            Some(local) => local.socket_addr(),
            None => unspecified_like(target),
        };
        socket
            .bind(&local.into())
            .map_err(|e| Error::io(Status::InvalidParameter, context(&format!("cannot bind udp://{local}")), e))?;
        if let (SocketMode::Client, Some(remote)) = (endpoints.mode, endpoints.remote) {
            socket
                .connect(&remote.socket_addr().into())
                .map_err(|e| Error::io(Status::ConnectFailure, context(&format!("cannot connect to {remote}")), e))?;
        }
        let poll = crate::task::poll_interval(&port.rx);
        socket
            .set_read_timeout(Some(poll))
            .map_err(|e| Error::io(Status::InternalError, context("cannot set a receive timeout"), e))?;
        let local = socket.local_addr().ok().and_then(|a| a.as_socket()).unwrap_or(local);
        // Unconnected sockets have no path MTU yet: assume Ethernet's 1500.
        let mtu = sys::path_mtu(socket.as_fd(), target.is_ipv6()).unwrap_or(1500);
        let headers = if target.is_ipv6() { 40 } else { IPV4_LEN } + UDP_LEN;
        let gso_max_segment = mtu.saturating_sub(headers);
        let gro = sys::prepare_receive(socket.as_fd());
        let group = grouped.then(|| open_group(&socket, local, port)).transpose()?;
        let _ = port.local_addr.set(local);
        port.awaiting_peer.store(endpoints.mode == SocketMode::Server, std::sync::atomic::Ordering::Release);
        Ok(Self {
            shared: Arc::new(Shared {
                socket,
                local,
                mode: endpoints.mode,
                last_peer: arc_swap::ArcSwapOption::empty(),
                gso_max_segment,
                gro,
                peer_socket: OnceLock::new(),
                options: SocketOptions::default(),
                group,
            }),
        })
    }
}

/// Whether `port`'s RX queues form a reuseport group, a socket per queue:
/// a server (whose bound port several sockets can share) whose RX queues,
/// all read by workers, name more than one core. Queues on one core share
/// one socket: its one worker can wait in the kernel, where several
/// sockets on one thread would have to be polled in turn. `support`
/// refuses extra RX cores elsewhere.
fn forms_group(endpoints: SocketEndpoints, port: &Port) -> bool {
    let all_indirect = port.rx.iter().all(|q| q.poll_mode == PollMode::Indirect);
    reuseport_group(endpoints, all_indirect, port.rx.iter().map(|q| q.cpu_core))
}

/// [`forms_group`] from what a config says: the queues' poll modes and cores.
pub(crate) fn reuseport_group(
    endpoints: SocketEndpoints,
    all_indirect: bool,
    cores: impl Iterator<Item = Option<u32>>,
) -> bool {
    let cores: std::collections::BTreeSet<Option<u32>> = cores.collect();
    endpoints.mode == SocketMode::Server && all_indirect && cores.len() > 1
}

/// Binds a socket per RX queue 1.. beside queue 0's `first` (bound to
/// `local`) and attaches the program that steers among them.
fn open_group(first: &Socket, local: SocketAddr, port: &Port) -> Result<Group> {
    let context = |what: String| format!("interface \"{}\": {what}", port.name);
    let sockets = (1..port.rx.len())
        .map(|queue| {
            let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
                .map_err(|e| Error::io(Status::InternalError, context("cannot create a UDP socket".into()), e))?;
            tune(&socket);
            sys::prepare_receive(socket.as_fd());
            socket
                .set_reuse_port(true)
                .and_then(|()| socket.bind(&local.into()))
                .and_then(|()| socket.set_read_timeout(Some(crate::task::poll_interval(&port.rx))))
                .map_err(|e| {
                    Error::io(
                        Status::InvalidParameter,
                        context(format!("cannot bind RX queue {queue}'s socket to udp://{local}")),
                        e,
                    )
                })?;
            Ok(socket)
        })
        .collect::<Result<Vec<_>>>()?;
    let table = port.flows.load_full();
    attach_program(first, &table, port)?;
    Ok(Group { sockets, other_table: arc_swap::ArcSwap::new(table) })
}

/// Gives the group of `first` the program for `table`.
fn attach_program(first: &Socket, table: &FlowTable, port: &Port) -> Result<()> {
    super::reuseport::program(table, port.rx.len())
        .and_then(|program| super::reuseport::attach(first, &program))
        .map_err(|e| {
            Error::io(
                Status::NotSupported,
                format!(
                    "rx.flows of interface \"{}\": the kernel took no steering program for its RX sockets",
                    port.name
                ),
                e,
            )
        })
}

fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0),
    }
}

impl PortDriver for UdpDriver {
    /// The receiver: one per RX queue where they form a reuseport group,
    /// else one per interface (its socket is the only receive queue), on
    /// the first RX queue's core or polled from `get_rx_burst` in direct
    /// mode; a sender per TX queue.
    fn tasks(&mut self, p: &Port) -> Vec<Task> {
        let mut tasks = Vec::new();
        if self.shared.group.is_some() {
            for (queue, q) in p.rx.iter().enumerate() {
                let receiver = UdpReceiver::new(Arc::clone(&self.shared), p, queue);
                tasks.push(Task::receiver(p, q, Box::new(receiver)));
            }
        } else if let Some(first) = p.rx.first() {
            let receiver = UdpReceiver::new(Arc::clone(&self.shared), p, 0);
            if first.poll_mode == PollMode::Direct {
                p.set_direct(Box::new(receiver));
            } else {
                tasks.push(Task::port_receiver(p, Box::new(receiver)));
            }
        }
        for (index, q) in p.tx.iter().enumerate() {
            let batch = SendBatch::new(SYSCALL_BATCH, MAX_SEGMENTS, Some(self.shared.gso_max_segment));
            let sender = UdpSender {
                queue: index,
                shared: Arc::clone(&self.shared),
                batch: Arc::new(Mutex::new(batch)),
                warned_no_peer: false,
                pacer: Pacer::for_queue(q),
            };
            // A paced queue keeps its pace on the worker.
            if sender.pacer.is_none() {
                let inline = InlineUdp { shared: Arc::clone(&self.shared), batch: Arc::clone(&sender.batch) };
                let _ = q.inline.set(Box::new(inline));
            }
            tasks.push(Task::sender(p, q, Box::new(sender)));
        }
        tasks
    }

    /// A group gets the new table's program; meanwhile its receivers
    /// resolve a datagram by the old table or the new, whichever chose its
    /// socket. On a refusal the running program and table stay.
    fn apply_flows(&self, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        let Some(group) = &self.shared.group else {
            port.flows.store(table);
            return Ok(());
        };
        group.other_table.store(Arc::clone(&table));
        if let Err(e) = attach_program(&self.shared.socket, &table, port) {
            group.other_table.store(port.flows.load_full());
            return Err(e);
        }
        let old = port.flows.swap(table);
        group.other_table.store(old);
        Ok(())
    }

    /// The interface's socket, a server group's, and the peer socket once connected.
    fn set_socket_option(&self, level: i32, name: i32, value: &[u8]) -> Option<Result<()>> {
        let shared = &*self.shared;
        let live = |apply: &mut dyn FnMut(BorrowedFd<'_>) -> Result<()>| {
            let grouped = shared.group.iter().flat_map(|g| &g.sockets);
            std::iter::once(&shared.socket)
                .chain(grouped)
                .chain(shared.peer_socket.get())
                .try_for_each(|s| apply(s.as_fd()))
        };
        Some(shared.options.set(live, level, name, value))
    }

    fn socket_option(&self, level: i32, name: i32) -> Option<Result<Vec<u8>>> {
        Some(options::read(self.shared.socket.as_fd(), level, name))
    }

    /// The receive buffers of the interface's sockets and, once connected,
    /// the peer socket; and the peer TX answers.
    fn link_stats(&self) -> LinkStats {
        let grouped = self.shared.group.iter().flat_map(|g| &g.sockets);
        let sockets = std::iter::once(&self.shared.socket).chain(grouped).chain(self.shared.peer_socket.get());
        let memory: Vec<_> = sockets.filter_map(|s| sys::socket_memory(s.as_fd()).ok()).collect();
        let peer = match self.shared.mode {
            SocketMode::Server => self.shared.last_peer.load_full().map(|p| *p),
            SocketMode::Client => self.shared.socket.peer_addr().ok().and_then(|a| a.as_socket()),
        };
        LinkStats {
            kernel_rx_backlog_bytes: Some(memory.iter().map(|m| u64::from(m.rx_backlog)).sum()),
            kernel_rx_buffer_bytes: Some(memory.iter().map(|m| u64::from(m.rx_buffer)).sum()),
            peer,
            connected: None,
            ..LinkStats::default()
        }
    }
}

/// The socket `source` names for RX queue `queue`'s receiver: the peer's
/// while one is connected.
fn source_fd<'a>(shared: &'a Shared, peer: &Option<PeerSocket>, source: Source, queue: usize) -> BorrowedFd<'a> {
    match (source, peer) {
        (Source::Peer, Some(_)) => shared.peer_fd(),
        _ => shared.socket_of(queue).as_fd(),
    }
}

/// How one datagram's bytes are laid out over a message's buffers.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Bytes per datagram but the last.
    segment: usize,
    /// Datagrams in the message.
    datagrams: usize,
}

fn layout(meta: &RecvMeta) -> Layout {
    let segment = meta.gro_segment.unwrap_or(meta.len).max(1);
    Layout { segment, datagrams: meta.len.div_ceil(segment).max(1) }
}

/// The receive side of one UDP port, kept between polls: an RX worker runs
/// it in a loop, and in `poll_mode: direct` the application's own
/// `get_rx_burst` polls it, so no thread hand-off sits between the socket
/// and the consumer.
#[derive(Debug)]
pub(super) struct UdpReceiver {
    /// The RX queue whose socket it reads: in a group its own, else 0
    /// (the interface's socket, steered to every queue).
    queue: usize,
    shared: Arc<Shared>,
    landing: u16,
    /// The layout in use: one buffer per message, or (under GRO) a run of
    /// buffers per message.
    batch: RecvBatch,
    /// The other layout, when the socket has UDP GRO: swapped in while the
    /// kernel coalesces, swapped out once it stops.
    other: Option<RecvBatch>,
    /// Polls in a row that got messages but no coalesced run.
    polls_without_runs: u32,
    /// Direct mode: the backlog was delivered at stop (once).
    drained: bool,
    /// Free buffers of the landing region, refilled in bulk.
    cache: PoolCache,
    /// Buffers offered to the next receive call.
    ready: Vec<BufToken>,
    /// Buffers of the message being delivered.
    mine: Vec<BufToken>,
    gather: Vec<u8>,
    drain: Vec<u8>,
    /// Expected bytes per datagram: each buffer takes this much of a GRO run.
    segment: usize,
    kernel_drops: KernelDrops,
    peer_seen: Option<SocketAddr>,
    /// Server mode: the socket connected to the first peer (see [`super::peer`]).
    peer: Option<PeerSocket>,
    /// Whether connecting a peer socket was tried (once per engine).
    peer_tried: bool,
    receives_with_data: u32,
    assemblers: Vec<Assembler>,
    /// Each poll's flow matches, added to the rules' counters once per poll.
    tally: RuleTally,
}

/// How the receiver reads the server's socket connected to its first peer
/// (held in `Shared::peer_socket`), with that socket's own drop counter.
#[derive(Debug)]
struct PeerSocket {
    kernel_drops: KernelDrops,
    /// The interface socket was read dry after the connect: no datagram of
    /// the peer can be left there.
    interface_drained: bool,
    /// The last read of the interface socket returned datagrams.
    interface_busy: bool,
    polls: u32,
}

/// With a peer socket, the interface socket is read on every this many polls.
const INTERFACE_EVERY: u32 = 8;

/// Which socket a receive call reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The bound (server) or connected (client) socket of the interface.
    Interface,
    /// The server's socket connected to its first peer.
    Peer,
}

/// What one poll learned about its port, read once per poll.
struct PollView<'e> {
    port: &'e Port,
    regions: &'e RegionTable,
    steer: Steer<'e>,
    local_ip: [u8; 4],
    local_port: u16,
}

impl UdpReceiver {
    fn new(shared: Arc<Shared>, p: &Port, queue: usize) -> Self {
        let regions = &p.regions;
        let landing = p.rx[queue].segment_regions[0];
        // Start flat: most traffic is not coalesced, and a flat call takes 64
        // datagrams where a run-shaped one takes 8 single ones. Under GRO a
        // coalesced run that meets the flat layout lands in the overflow and
        // is copied out once; then the run layout takes over.
        let (batch, other) = if shared.gro {
            (
                RecvBatch::new(SYSCALL_BATCH, 1, MAX_DATAGRAM),
                Some(RecvBatch::new(GRO_MESSAGES, GRO_SEGMENTS, MAX_DATAGRAM)),
            )
        } else {
            (RecvBatch::new(SYSCALL_BATCH, 1, 0), None)
        };
        let capacity = GRO_MESSAGES * GRO_SEGMENTS;
        Self {
            queue,
            landing,
            // Refills of one flat call's worth: the cache must not hold buffers TX needs.
            cache: PoolCache::new(SYSCALL_BATCH),
            ready: Vec::with_capacity(capacity),
            mine: Vec::with_capacity(GRO_SEGMENTS),
            gather: vec![0u8; MAX_DATAGRAM],
            drain: vec![0u8; MAX_DATAGRAM],
            segment: regions.get(landing).buf_size(),
            kernel_drops: KernelDrops::default(),
            peer_seen: None,
            peer: None,
            // A group's sockets are the queues: no connected twin outranks them.
            peer_tried: shared.group.is_some(),
            receives_with_data: 0,
            assemblers: (0..p.rx.len()).map(|queue| Assembler::new(p, queue, FullRing::Drop)).collect(),
            tally: RuleTally::default(),
            batch,
            other,
            polls_without_runs: 0,
            drained: false,
            shared,
        }
    }

    /// Adds what the kernel dropped on `source`'s socket since the last look.
    fn count_kernel_drops(&mut self, p: &Port, source: Source) {
        let fd = source_fd(&self.shared, &self.peer, source, self.queue);
        if let Ok(total) = sys::socket_memory(fd).map(|m| m.drops) {
            let drops = self.kernel_drops(source);
            drops.counter(total);
            let fresh = drops.take();
            count_dropped(p, fresh);
        }
    }

    fn kernel_drops(&mut self, source: Source) -> &mut KernelDrops {
        match (source, &mut self.peer) {
            (Source::Peer, Some(peer)) => &mut peer.kernel_drops,
            _ => &mut self.kernel_drops,
        }
    }

    /// Gives back every buffer the receiver holds and takes a last count of kernel drops.
    fn release_held(&mut self, port: &Port) {
        let p = port;
        self.count_kernel_drops(p, Source::Interface);
        self.count_kernel_drops(p, Source::Peer);
        let landing = port.regions.get(self.landing);
        landing.release_all(self.ready.drain(..));
        landing.drain_cache(&mut self.cache);
    }

    /// At stop: what the socket had queued is delivered like any datagram
    /// (or, where a ring is full, dropped and counted), so a stop or a
    /// restart loses nothing the kernel accepted without a count.
    fn drain_backlog(&mut self, port: &Port) {
        for _ in 0..DRAIN_CALLS_AT_STOP {
            if self.poll_once(port, false) == 0 {
                return;
            }
        }
    }

    /// Receives and delivers what is ready; with `wait`, blocks up to the
    /// poll interval when nothing is. Returns the number of datagrams.
    fn poll_once(&mut self, port: &Port, wait: bool) -> usize {
        let Some(peer) = &mut self.peer else {
            return self.receive(port, Source::Interface, wait).0;
        };
        // Until the interface socket has once been read dry after the connect,
        // it may hold the peer's older datagrams: it is read first, so they
        // keep their order. After that it holds other peers' datagrams only:
        // it is read while it has some, else on every few polls, and the wait
        // for more is on the peer's socket.
        peer.polls = peer.polls.wrapping_add(1);
        let mut datagrams = 0;
        if !peer.interface_drained || peer.interface_busy || peer.polls % INTERFACE_EVERY == 0 {
            let (got, more) = self.receive(port, Source::Interface, false);
            let peer = self.peer.as_mut().expect("checked above");
            if more && !peer.interface_drained {
                return got;
            }
            peer.interface_drained = true;
            peer.interface_busy = got > 0;
            datagrams = got;
        }
        datagrams + self.receive(port, Source::Peer, wait && datagrams == 0).0
    }

    /// One receive call on `source` and the delivery of what it returned:
    /// the number of datagrams, and whether the call was full (more may wait).
    fn receive(&mut self, port: &Port, source: Source, wait: bool) -> (usize, bool) {
        let p = port;
        let regions = &*port.regions;
        let landing = regions.get(self.landing);
        while self.ready.len() < self.batch.capacity() {
            match landing.take_cached(&mut self.cache) {
                Some(token) => self.ready.push(token),
                None => break,
            }
        }
        let fd = source_fd(&self.shared, &self.peer, source, self.queue);
        let segment = self.segment;
        let received = if self.ready.is_empty() {
            // Pool exhausted: drain into scratch so the loss is counted as ours,
            // as a NIC counts packets it had no descriptor for.
            self.batch.recv(fd, std::iter::once(&mut self.drain[..]), MAX_DATAGRAM, wait).map(|m| {
                let datagrams: usize = m.iter().map(|m| layout(m).datagrams).sum();
                p.rx_drops.dropped(DropReason::NoFreePacketBuffers, datagrams as u64);
                0
            })
        } else {
            self.batch.recv(fd, self.ready.iter_mut().map(|t| landing.bytes_mut(t)), segment, wait).map(|m| m.len())
        };
        let count = match received {
            Ok(count) => count,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                return (0, false);
            }
            Err(e) => {
                tracing::warn!(interface = %p.name, "receive failed: {e}");
                if wait {
                    std::thread::sleep(Duration::from_millis(1));
                }
                return (0, false);
            }
        };
        let full = count == self.batch.messages();
        let mut tally = std::mem::take(&mut self.tally);
        let mut view = PollView {
            port: p,
            regions,
            steer: Steer::new(p, &mut tally),
            local_ip: ipv4_octets(self.shared.local.ip()),
            local_port: self.shared.local.port(),
        };
        let mut datagrams = 0;
        let used: usize = self.batch.last(count).iter().map(|m| m.buffers).sum();
        let mut tokens = std::mem::take(&mut self.ready);
        let mut offered = tokens.drain(..used);
        for index in 0..count {
            let meta = self.batch.last(count)[index];
            self.mine.extend(offered.by_ref().take(meta.buffers));
            if meta.peer != self.peer_seen && self.shared.mode == SocketMode::Server {
                self.peer_seen = meta.peer;
                self.shared.last_peer.store(meta.peer.map(Arc::new));
                p.awaiting_peer.store(false, std::sync::atomic::Ordering::Release);
            }
            let shape = layout(&meta);
            datagrams += shape.datagrams;
            self.kernel_drops(source).message(meta.drops, shape.datagrams as u32);
            let in_place = !meta.truncated
                && shape.datagrams <= meta.buffers
                && ((shape.datagrams == 1 && meta.len <= segment) || shape.segment == segment);
            if in_place {
                let mut mine = std::mem::take(&mut self.mine);
                for (j, token) in mine.drain(..shape.datagrams).enumerate() {
                    let len = shape.segment.min(meta.len - j * shape.segment);
                    self.deliver(&mut view, token, len, meta.peer);
                }
                self.mine = mine;
            } else {
                self.relayout(&mut view, &meta, shape, segment, index);
            }
            landing.release_all(self.mine.drain(..));
            // Follow the sender's datagram size so the next calls land in place.
            if meta.gro_segment.is_some() || meta.len > segment {
                self.segment = shape.segment.clamp(1, landing.buf_size());
            }
        }
        drop(offered);
        self.ready = tokens;
        drop(view);
        self.tally = tally;
        self.follow_coalescing(count);
        // Drops the messages' stamps showed; the counter itself every few
        // receives that returned data, for drops after the last message.
        let stamped = self.kernel_drops(source).take();
        count_dropped(p, stamped);
        self.receives_with_data = self.receives_with_data.wrapping_add(u32::from(count > 0));
        if count > 0 && self.receives_with_data % DROPS_EVERY == 1 {
            self.count_kernel_drops(p, source);
        }
        if let Some(peer) = self.peer_seen
            && !self.peer_tried
            && self.shared.mode == SocketMode::Server
        {
            self.connect_peer(p, peer);
        }
        (datagrams, full)
    }

    /// Opens the socket connected to the server's first peer; without it
    /// everything still arrives on the interface socket, only slower.
    fn connect_peer(&mut self, p: &Port, peer: SocketAddr) {
        self.peer_tried = true;
        let socket = peer::connect(&self.shared.socket, self.shared.local, peer)
            .and_then(|s| s.set_read_timeout(Some(crate::task::poll_interval(&p.rx))).map(|()| s));
        match socket {
            Ok(socket) => {
                tracing::debug!(interface = %p.name, %peer, "receiving from {peer} on a connected socket");
                if self.shared.peer_socket.set(socket).is_err() {
                    unreachable!("a peer socket is connected once per engine");
                }
                self.shared.options.apply(&p.name, self.shared.peer_fd());
                self.peer = Some(PeerSocket {
                    kernel_drops: KernelDrops::default(),
                    interface_drained: false,
                    interface_busy: false,
                    polls: 0,
                });
            }
            Err(e) => tracing::info!(
                interface = %p.name,
                "cannot connect a socket to {peer} ({e}); its datagrams keep arriving on the server socket"
            ),
        }
    }

    /// Picks the layout for the next call from what this one received.
    fn follow_coalescing(&mut self, count: usize) {
        let Some(other) = &mut self.other else { return };
        let runs = self.batch.last(count).iter().any(|m| m.gro_segment.is_some());
        let in_run_layout = self.batch.capacity() > SYSCALL_BATCH;
        self.polls_without_runs = if runs || count == 0 { 0 } else { self.polls_without_runs + 1 };
        if (runs && !in_run_layout) || (in_run_layout && self.polls_without_runs >= 16) {
            std::mem::swap(&mut self.batch, other);
            self.polls_without_runs = 0;
        }
    }

    fn deliver(&mut self, view: &mut PollView<'_>, token: BufToken, len: usize, peer: Option<SocketAddr>) {
        let p = view.port;
        let key = FlowKey {
            src_ip: peer.map_or([0; 4], |a| ipv4_octets(a.ip())),
            dst_ip: view.local_ip,
            src_port: peer.map_or(0, |a| a.port()),
            dst_port: view.local_port,
            ipv4_len: (IPV4_LEN + UDP_LEN + len).min(u16::MAX as usize) as u16,
        };
        let steered = match self.shared.group {
            Some(_) => self.grouped_steering(view, &key, len as u32),
            None => view.steer.key(&key, len as u32),
        };
        let Some(Steered { queue, flow_id }) = steered else {
            view.regions.get(self.landing).release(token);
            return;
        };
        let slot = PacketSlot::single(token, len as u32, flow_id).with_source(peer);
        self.assemblers[queue].push(&p.rx[queue], slot, view.regions);
    }

    /// In a group the socket chose the queue: the flow id is that of the
    /// port's table when it sends the datagram here, else of the table a
    /// reload is replacing (the datagram was queued by its program), else
    /// the port's.
    fn grouped_steering(&self, view: &mut PollView<'_>, key: &FlowKey, len: u32) -> Option<Steered> {
        let here = |table: &FlowTable, steering: Steering| match steering {
            Steering::Flow { rule, .. } if table.rules[rule].queues().contains(&self.queue) => Some(Some(rule)),
            Steering::Default { queue } if queue == self.queue => Some(None),
            _ => None,
        };
        let steering = view.steer.table().steer(key);
        if steering == Steering::Unmatched {
            return view.steer.decide(steering, len);
        }
        let rule = match here(view.steer.table(), steering) {
            Some(rule) => rule,
            None => {
                let other = self.shared.group.as_ref().expect("grouped").other_table.load();
                if let Some(rule) = here(&other, other.steer(key)) {
                    return view.steer.kept(self.queue, rule.map(|r| other.rules[r].flow_id));
                }
                match steering {
                    Steering::Flow { rule, .. } => Some(rule),
                    _ => None,
                }
            }
        };
        let queue = self.queue;
        view.steer.decide(rule.map_or(Steering::Default { queue }, |rule| Steering::Flow { rule, queue }), len)
    }

    /// The slow path: a message whose datagrams did not line up with its
    /// buffers (first run of a new size, or a datagram longer than expected).
    /// Gathers the bytes, then copies each datagram into a buffer of its own.
    fn relayout(&mut self, view: &mut PollView<'_>, meta: &RecvMeta, shape: Layout, segment: usize, index: usize) {
        let p = view.port;
        let landing = view.regions.get(self.landing);
        if meta.truncated {
            p.rx_drops.dropped(DropReason::Truncated, shape.datagrams as u64);
            return;
        }
        let mut at = 0;
        for token in &self.mine {
            let take = segment.min(landing.buf_size()).min(meta.len - at);
            self.gather[at..at + take].copy_from_slice(&landing.bytes(token)[..take]);
            at += take;
        }
        let rest = meta.len - at;
        self.gather[at..meta.len].copy_from_slice(&self.batch.overflow(index)[..rest]);
        // The gathered bytes are safe in `gather`: the message's own buffers are free for reuse.
        for j in 0..shape.datagrams {
            let start = j * shape.segment;
            let len = shape.segment.min(meta.len - start);
            if len > landing.buf_size() {
                p.rx_drops.dropped(DropReason::Truncated, 1);
                continue;
            }
            let Some(mut token) = self.mine.pop().or_else(|| landing.take_cached(&mut self.cache)) else {
                p.rx_drops.dropped(DropReason::NoFreePacketBuffers, 1);
                continue;
            };
            landing.bytes_mut(&mut token)[..len].copy_from_slice(&self.gather[start..start + len]);
            self.deliver(view, token, len, meta.peer);
        }
    }
}

impl QueueTask for UdpReceiver {
    /// Receives (blocking up to `wait` when nothing is ready), delivers, and
    /// hands over partial bursts whose timeout passed.
    fn poll(&mut self, port: &Port, wait: Option<Duration>) -> usize {
        let datagrams = self.poll_once(port, wait.is_some());
        crate::delivery::flush_due(&mut self.assemblers, &port.rx, Instant::now(), &port.regions);
        datagrams
    }

    fn sleeps_on(&self, _port: &Port, set: &mut SleepSet) -> bool {
        set.watch(self.shared.socket_of(self.queue).as_raw_fd(), libc::POLLIN);
        if self.peer.is_some() {
            set.watch(self.shared.peer_fd().as_raw_fd(), libc::POLLIN);
        }
        true
    }

    fn finish(&mut self, port: &Port) {
        self.drain_backlog(port);
        crate::delivery::finish_all(&mut self.assemblers, &port.rx, &port.regions);
        self.release_held(port);
    }
}

impl DirectPoll for UdpReceiver {
    fn poll(&mut self, port: &Port, stopping: bool) -> usize {
        if stopping {
            if !std::mem::replace(&mut self.drained, true) {
                self.drain_backlog(port);
                crate::delivery::finish_all(&mut self.assemblers, &port.rx, &port.regions);
            }
            self.release_held(port);
            return 0;
        }
        let datagrams = self.poll_once(port, false);
        let p = port;
        for (a, q) in self.assemblers.iter_mut().zip(&p.rx) {
            a.flush(q);
        }
        datagrams
    }
}

fn ipv4_octets(ip: IpAddr) -> [u8; 4] {
    match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or([0; 4], |v4| v4.octets()),
    }
}

/// One TX queue's sender: a burst per poll, so a shared core stays fair.
/// The batch is shared with the queue's [`InlineUdp`]: whoever holds it
/// sends, and the worker takes a burst from the ring only while holding it,
/// so a burst sent inline never overtakes one queued before it.
struct UdpSender {
    queue: usize,
    shared: Arc<Shared>,
    batch: Arc<Mutex<SendBatch>>,
    warned_no_peer: bool,
    pacer: Option<Pacer>,
}

impl QueueTask for UdpSender {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let p = port;
        let q = &p.tx[self.queue];
        if q.ring.is_empty() {
            return 0;
        }
        let mut batch = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        let Some(burst) = pacing::next_burst(q, self.pacer.as_mut()) else { return 0 };
        let packets = burst.num_packets().max(1);
        let dest = match self.shared.mode {
            SocketMode::Client => None,
            // A backstop: send_tx_burst refuses bursts until a peer is heard.
            SocketMode::Server => match self.shared.last_peer.load_full() {
                Some(peer) => Some(SockAddr::from(*peer)),
                None => {
                    if !self.warned_no_peer {
                        tracing::warn!(interface = %p.name, "TX on a UDP server before any peer sent a datagram: nowhere to send, dropping");
                        self.warned_no_peer = true;
                    }
                    q.stats.dropped(DropReason::SendFailed, burst.num_packets() as u64);
                    return packets;
                }
            },
        };
        send_burst(&mut batch, &self.shared, q, &burst, dest.as_ref());
        packets
    }
    fn sleeps_on(&self, port: &Port, set: &mut SleepSet) -> bool {
        sender_sleeps_on(&port.tx[self.queue], self.pacer.is_some(), set)
    }
}

/// Sends a TX burst in `send_tx_burst`'s thread, as DAQIRI's socket engine
/// does, when the queue's ring is empty and its worker is not sending: one
/// hand-off between threads fewer per burst. Else the burst is queued.
struct InlineUdp {
    shared: Arc<Shared>,
    batch: Arc<Mutex<SendBatch>>,
}

impl crate::queue::InlineSend for InlineUdp {
    fn send_now(&self, q: &Queue, burst: Burst) -> std::result::Result<(), Burst> {
        if !q.ring.is_empty() {
            return Err(burst);
        }
        let Ok(mut batch) = self.batch.try_lock() else { return Err(burst) };
        // Checked again under the lock: the worker pops only while holding it.
        if !q.ring.is_empty() {
            return Err(burst);
        }
        let dest = match self.shared.mode {
            SocketMode::Client => None,
            // No peer yet: the worker counts the drop.
            SocketMode::Server => match self.shared.last_peer.load_full() {
                Some(peer) => Some(SockAddr::from(*peer)),
                None => return Err(burst),
            },
        };
        burst.wait_ready();
        send_burst(&mut batch, &self.shared, q, &burst, dest.as_ref());
        Ok(())
    }
}

fn send_burst(batch: &mut SendBatch, shared: &Shared, q: &Queue, burst: &Burst, dest: Option<&SockAddr>) {
    let fd = shared.socket.as_fd();
    let total = burst.num_packets();
    let (mut done, mut sent, mut bytes) = (0, 0u64, 0u64);
    while done < total {
        let datagrams =
            burst.packets().skip(done).map(|p| (0..MAX_SEGMENTS).filter_map(move |s| p.sendable_segment(s)));
        match batch.send(fd, dest, datagrams) {
            Ok(n) => {
                bytes += burst.packets().skip(done).take(n).map(|p| p.len() as u64).sum::<u64>();
                done += n;
                sent += n as u64;
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                std::thread::yield_now()
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => std::thread::sleep(Duration::from_micros(10)),
            Err(e)
                if batch.gso()
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP | libc::EMSGSIZE)
                    ) =>
            {
                tracing::info!("UDP GSO refused by the kernel ({e}); sending one datagram per message");
                batch.disable_gso();
            }
            Err(_) => {
                // One datagram was refused (e.g. ICMP port unreachable on a connected socket): count it, go on.
                q.stats.dropped(DropReason::SendFailed, 1);
                done += 1;
            }
        }
    }
    if sent > 0 {
        q.stats.delivered(sent, bytes);
    }
}
