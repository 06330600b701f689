//! TCP sockets, and how a byte stream maps onto bursts.
//!
//! A TCP interface carries one connection at a time (a server accepts the
//! next once the current one closes; a client reconnects). A connection
//! that delivered less than [`YIELD_BELOW_BYTES`] over the last
//! [`YIELD_WINDOW`] while another waits to be accepted is closed, so a
//! client that connects and sends nothing, or a byte now and then, cannot
//! lock every sender out; a lone quiet connection is kept however long it
//! pauses. Received bytes
//! land in buffers of the first RX queue's memory region: each packet is one
//! `read` of up to `buf_size` bytes (or `max_payload_size`, if smaller), and
//! packets and bursts go to the first RX queue in stream order. Packet
//! boundaries carry no meaning; concatenating the packets of successive bursts
//! gives the stream back byte for byte.
//!
//! Nothing is ever dropped: when buffers, burst metadata or ring space run
//! out, the receiver stops reading and TCP flow control slows the sender.
//! On TX, a burst's segments are written in order by one `sendmsg` (up to
//! [`PIECES_PER_WRITE`] segments each, MSG_MORE until the burst's last
//! byte), the stream with TCP_NODELAY as DAQIRI's is. Neither side ever
//! blocks its worker: reads and writes do not wait, and a write the socket
//! took only part of resumes at the next poll, so TCP queues can share a
//! core with any other queue.

use std::io::{self, IoSlice};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use daqiri_config::SocketEndpoints;
use daqiri_config::model::SocketMode;
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::buffers::SOCKET_BUFFER_BYTES;
use super::options::{self, SocketOptions};
use super::sys;
use crate::backend::LinkStats;
use crate::backend::PortDriver;
use crate::burst::{Burst, MAX_SEGMENTS, PacketSlot};
use crate::delivery::{Assembler, FullRing};
use crate::error::{Error, Result, Status};
use crate::pacing::{self, Pacer};
use crate::port::Port;
use crate::sleep::SleepSet;
use crate::stats::DropReason;
use crate::task::{QueueTask, Task, sender_sleeps_on};

/// Reads per receive poll, so a busy stream leaves its core's other queues a turn.
const READS_PER_POLL: usize = 64;
/// Segments one `sendmsg` writes (the kernel takes up to 1024).
const PIECES_PER_WRITE: usize = 128;
/// A client's connect attempt holds its worker at most this long.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// A client retries a failed connect after this long.
const CONNECT_RETRY: Duration = Duration::from_millis(100);
/// The window over which a server's connection must deliver
/// [`YIELD_BELOW_BYTES`] while another client waits, or give way to it.
pub(crate) const YIELD_WINDOW: Duration = Duration::from_secs(5);
/// What a connection must deliver per [`YIELD_WINDOW`] while another client
/// waits: 1 KiB/s, far below any instrument's stream and far above a
/// keep-alive trickle.
pub(crate) const YIELD_BELOW_BYTES: u64 = 5 * 1024;
/// How long a receiver alone on its core sleeps while the application holds
/// every buffer or ring slot.
const BACKPRESSURE_PAUSE: Duration = Duration::from_micros(20);

#[derive(Debug)]
struct Shared {
    mode: SocketMode,
    /// Non-blocking: accepts are polled.
    listener: Option<Socket>,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    /// The live connection, shared by the receiver and the senders.
    stream: Mutex<Option<Arc<TcpStream>>>,
    max_read: Option<usize>,
    /// Options the application set, for each connection.
    options: SocketOptions,
}

#[derive(Debug)]
pub(super) struct TcpDriver {
    shared: Arc<Shared>,
}

impl TcpDriver {
    pub(super) fn open(endpoints: SocketEndpoints, port: &Port) -> Result<Self> {
        let local = endpoints.local.map(|e| e.socket_addr());
        let remote = endpoints.remote.map(|e| e.socket_addr());
        let listener = match endpoints.mode {
            SocketMode::Server => {
                let addr = local.expect("validated: servers have local_addr");
                let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
                    .and_then(|s| {
                        s.set_reuse_address(true)?;
                        s.bind(&addr.into())?;
                        s.listen(16)?;
                        s.set_nonblocking(true)?;
                        Ok(s)
                    })
                    .map_err(|e| {
                        Error::io(
                            Status::InvalidParameter,
                            format!("interface \"{}\": cannot listen on tcp://{addr}", port.name),
                            e,
                        )
                    })?;
                Some(socket)
            }
            SocketMode::Client => None,
        };
        Ok(Self {
            shared: Arc::new(Shared {
                mode: endpoints.mode,
                listener,
                local,
                remote,
                stream: Mutex::new(None),
                max_read: port.config_max_payload(),
                options: SocketOptions::default(),
            }),
        })
    }
}

impl PortDriver for TcpDriver {
    /// A receiver on the first RX queue, a sender per TX queue. One of them
    /// owns the connection (accepts or connects): the receiver, or the
    /// first sender of a TX-only interface.
    fn tasks(&mut self, p: &Port) -> Vec<Task> {
        let mut tasks = Vec::new();
        if !p.rx.is_empty() {
            let receiver = TcpReceiver {
                connection: Connection::new(&self.shared),
                assembler: Assembler::new(p, 0, FullRing::HoldBack),
                window: (Instant::now(), 0),
                drained: false,
            };
            tasks.push(Task::port_receiver(p, Box::new(receiver)));
        }
        for (index, q) in p.tx.iter().enumerate() {
            let sender = TcpSender {
                queue: index,
                connection: Connection::new(&self.shared),
                owns_connection: p.rx.is_empty() && index == 0,
                outgoing: None,
                pacer: Pacer::for_queue(q),
            };
            tasks.push(Task::sender(p, q, Box::new(sender)));
        }
        tasks
    }

    /// The connection, and every connection after (set between
    /// connections, it waits for the next).
    fn set_socket_option(&self, level: i32, name: i32, value: &[u8]) -> Option<Result<()>> {
        let shared = &*self.shared;
        let live = |apply: &mut dyn FnMut(BorrowedFd<'_>) -> Result<()>| match shared.current() {
            Some(stream) => apply(stream.as_fd()),
            None => Ok(()),
        };
        Some(shared.options.set(live, level, name, value))
    }

    fn socket_option(&self, level: i32, name: i32) -> Option<Result<Vec<u8>>> {
        Some(match self.shared.current() {
            Some(stream) => options::read(stream.as_fd(), level, name),
            None => {
                Err(Error::new(Status::NotReady, "no TCP connection now: its options are read from the connection"))
            }
        })
    }

    fn link_stats(&self) -> LinkStats {
        let stream = self.shared.current();
        let memory = stream.as_ref().and_then(|s| sys::socket_memory(s.as_fd()).ok());
        LinkStats {
            kernel_rx_backlog_bytes: memory.map(|m| u64::from(m.rx_backlog)),
            kernel_rx_buffer_bytes: memory.map(|m| u64::from(m.rx_buffer)),
            peer: stream.as_ref().and_then(|s| s.peer_addr().ok()),
            connected: Some(stream.is_some()),
            ..LinkStats::default()
        }
    }

    /// Closes the connection (queued bytes still go out before the FIN).
    fn stop(&self) {
        if let Some(stream) = self.shared.current() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        self.shared.set(None);
    }
}

impl Shared {
    fn current(&self) -> Option<Arc<TcpStream>> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, stream: Option<Arc<TcpStream>>) {
        *self.stream.lock().unwrap_or_else(|e| e.into_inner()) = stream;
    }
}

/// A task's way to the live connection; the owner also makes one.
struct Connection {
    shared: Arc<Shared>,
    /// A client does not try to connect again before this.
    retry_at: Instant,
}

impl Connection {
    fn new(shared: &Arc<Shared>) -> Self {
        Self { shared: Arc::clone(shared), retry_at: Instant::now() }
    }

    /// The live connection, if any.
    fn current(&self) -> Option<Arc<TcpStream>> {
        self.shared.current()
    }

    /// The live connection, or a new one: a pending connection accepted
    /// (waiting up to `wait` for one) or a connect made.
    fn current_or_establish(&mut self, name: &str, wait: Option<Duration>) -> Option<Arc<TcpStream>> {
        self.shared.current().or_else(|| self.establish(name, wait))
    }

    fn establish(&mut self, name: &str, wait: Option<Duration>) -> Option<Arc<TcpStream>> {
        let shared = &*self.shared;
        let stream = match shared.mode {
            SocketMode::Server => {
                let listener = shared.listener.as_ref()?;
                let (socket, peer) = match listener.accept() {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        if e.kind() == io::ErrorKind::WouldBlock
                            && let Some(wait) = wait
                        {
                            let _ = sys::wait_readable(listener.as_fd(), wait);
                        }
                        return None;
                    }
                };
                tracing::info!(interface = name, peer = ?peer.as_socket(), "TCP connection accepted");
                // Accepted sockets do not inherit the listener's O_NONBLOCK; writes rely on that.
                TcpStream::from(socket)
            }
            SocketMode::Client => {
                let now = Instant::now();
                if now < self.retry_at {
                    return None;
                }
                match self.connect() {
                    Ok(stream) => stream,
                    Err(e) => {
                        tracing::debug!(interface = name, "connect failed, retrying: {e}");
                        self.retry_at = now + CONNECT_RETRY;
                        return None;
                    }
                }
            }
        };
        let socket = SockRef::from(&stream);
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
        let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
        // As DAQIRI's: a burst's end goes out at once, not after the peer's ACK
        // (within a burst, MSG_MORE lets the kernel fill segments). The
        // program's socket_setsockopt, applied next, may turn it back.
        let _ = stream.set_nodelay(true);
        let stream = Arc::new(stream);
        shared.set(Some(Arc::clone(&stream)));
        shared.options.apply(name, stream.as_fd());
        Some(stream)
    }

    fn connect(&self) -> io::Result<TcpStream> {
        let remote = self.shared.remote.expect("validated: clients have remote_addr");
        let socket = Socket::new(Domain::for_address(remote), Type::STREAM, Some(Protocol::TCP))?;
        if let Some(local) = self.shared.local {
            socket.set_reuse_address(true)?;
            socket.bind(&local.into())?;
        }
        socket.connect_timeout(&remote.into(), CONNECT_TIMEOUT)?;
        Ok(socket.into())
    }

    /// Drops a connection that failed or closed.
    fn lose(&self) {
        self.shared.set(None);
    }
}

/// Reads the stream into the first RX queue.
struct TcpReceiver {
    connection: Connection,
    assembler: Assembler,
    /// The current [`YIELD_WINDOW`]: when it began, and the bytes it saw.
    window: (Instant, u64),
    /// The last read emptied the socket, so a worker that may block waits
    /// for readiness before reading again: one `ppoll` and one `recv` per
    /// arrival, not a `recv` that finds nothing on each side of the wait.
    drained: bool,
}

impl TcpReceiver {
    /// At the end of each [`YIELD_WINDOW`], closes a server's connection
    /// that delivered less than [`YIELD_BELOW_BYTES`] in it while another
    /// client waits in the listen backlog; else starts the next window.
    /// Whether it closed the connection.
    fn yield_if_slow(&mut self, stream: &TcpStream, name: &str) -> bool {
        let shared = &*self.connection.shared;
        let Some(listener) = shared.listener.as_ref() else { return false };
        let (started, bytes) = self.window;
        if started.elapsed() < YIELD_WINDOW {
            return false;
        }
        self.window = (Instant::now(), 0);
        if bytes >= YIELD_BELOW_BYTES || !sys::wait_readable(listener.as_fd(), Duration::ZERO).unwrap_or(false) {
            return false;
        }
        tracing::warn!(
            interface = name,
            peer = ?stream.peer_addr().ok(),
            "TCP connection delivered {bytes} bytes in {YIELD_WINDOW:?} (less than {YIELD_BELOW_BYTES}) while another client waits: closing it"
        );
        let _ = stream.shutdown(Shutdown::Both);
        self.connection.lose();
        true
    }
}

impl QueueTask for TcpReceiver {
    fn poll(&mut self, port: &Port, wait: Option<Duration>) -> usize {
        let p = port;
        let queue = &p.rx[0];
        let stream = match self.connection.current() {
            Some(stream) => stream,
            None => {
                let Some(stream) = self.connection.establish(&p.name, wait) else { return 0 };
                self.window = (Instant::now(), 0);
                self.drained = false;
                stream
            }
        };
        // Checked on every poll, so a trickle that puts a byte into most
        // polls is measured too.
        if self.yield_if_slow(&stream, &p.name) {
            self.assembler.flush(queue);
            return 0;
        }
        if self.drained
            && let Some(wait) = wait
            && !sys::wait_readable(stream.as_fd(), wait).unwrap_or(true)
        {
            self.assembler.flush_if_due(queue, Instant::now(), &port.regions);
            return 0;
        }
        self.drained = false;
        let landing = port.regions.get(queue.segment_regions[0]);
        let read_size = self.connection.shared.max_read.unwrap_or(usize::MAX).min(landing.buf_size());
        let mut reads = 0;
        while reads < READS_PER_POLL {
            // Out of metadata or ring space, or of buffers: hand over what is
            // held so the application can free some, and read no further.
            let token = if self.assembler.ready(queue) { landing.take() } else { None };
            let Some(mut token) = token else {
                self.assembler.flush(queue);
                if wait.is_some() {
                    std::thread::sleep(BACKPRESSURE_PAUSE);
                }
                break;
            };
            match sys::recv_nowait(stream.as_fd(), &mut landing.bytes_mut(&mut token)[..read_size]) {
                Ok(0) => {
                    landing.release(token);
                    self.assembler.flush(queue);
                    self.connection.lose();
                    tracing::info!(interface = %p.name, "TCP peer closed the connection");
                    break;
                }
                Ok(n) => {
                    reads += 1;
                    self.window.1 += n as u64;
                    if p.drop_all.load(std::sync::atomic::Ordering::Relaxed) {
                        landing.release(token);
                        p.rx_drops.dropped(DropReason::DropAllTraffic, 1);
                    } else {
                        self.assembler.push(queue, PacketSlot::single(token, n as u32, None), &port.regions);
                    }
                    // A read the stream could not fill took all the socket held.
                    if n < read_size {
                        self.drained = true;
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    landing.release(token);
                    self.drained = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    landing.release(token);
                    break;
                }
                Err(e) => {
                    landing.release(token);
                    tracing::warn!(interface = %p.name, "TCP receive failed, dropping the connection: {e}");
                    self.assembler.flush(queue);
                    self.connection.lose();
                    break;
                }
            }
        }
        self.assembler.flush_if_due(queue, Instant::now(), &port.regions);
        reads
    }

    fn sleeps_on(&self, _port: &Port, set: &mut SleepSet) -> bool {
        if self.assembler.holds_back() {
            return false;
        }
        match (self.connection.current(), &self.connection.shared.listener) {
            (Some(stream), _) => set.watch(stream.as_raw_fd(), libc::POLLIN),
            (None, Some(listener)) => set.watch(listener.as_raw_fd(), libc::POLLIN),
            // A client reconnects on its own schedule.
            (None, None) => return false,
        }
        true
    }

    fn finish(&mut self, port: &Port) {
        let queue = &port.rx[0];
        self.assembler.finish(queue, &port.regions);
    }
}

/// Writes one TX queue's bursts to the stream, in order.
struct TcpSender {
    queue: usize,
    connection: Connection,
    owns_connection: bool,
    /// The burst being written, and how far.
    outgoing: Option<Outgoing>,
    pacer: Option<Pacer>,
}

/// Where the write of a burst stands: the next byte to write is `offset`
/// into segment `segment` of packet `packet`.
struct Outgoing {
    burst: Burst,
    packet: usize,
    segment: usize,
    offset: usize,
    sent_bytes: u64,
}

impl Outgoing {
    /// The bytes still to write, from here, as up to `pieces.len()` slices;
    /// how many it filled, and whether bytes remain past them.
    fn gather<'a>(&'a self, pieces: &mut [IoSlice<'a>]) -> (usize, bool) {
        let (mut packet, mut segment, mut offset) = (self.packet, self.segment, self.offset);
        let mut filled = 0;
        while packet < self.burst.num_packets() {
            match piece(&self.burst, packet, segment) {
                None => (packet, segment, offset) = (packet + 1, 0, 0),
                Some(bytes) => {
                    if offset < bytes.len() {
                        if filled == pieces.len() {
                            return (filled, true);
                        }
                        pieces[filled] = IoSlice::new(&bytes[offset..]);
                        filled += 1;
                    }
                    (segment, offset) = (segment + 1, 0);
                }
            }
        }
        (filled, false)
    }

    /// Moves past `written` bytes, and past every packet they finished
    /// (counting its bytes as sent).
    fn advance(&mut self, mut written: usize) {
        while self.packet < self.burst.num_packets() {
            let Some(bytes) = piece(&self.burst, self.packet, self.segment) else {
                self.sent_bytes += self.burst.packet(self.packet).len() as u64;
                (self.packet, self.segment, self.offset) = (self.packet + 1, 0, 0);
                continue;
            };
            let left = bytes.len() - self.offset;
            if left == 0 {
                (self.segment, self.offset) = (self.segment + 1, 0);
            } else if written == 0 {
                return;
            } else {
                let taken = written.min(left);
                self.offset += taken;
                written -= taken;
            }
        }
    }
}

/// Segment `segment` of packet `packet`, where it is host memory TCP can send.
fn piece(burst: &Burst, packet: usize, segment: usize) -> Option<&[u8]> {
    (segment < MAX_SEGMENTS).then(|| burst.packet(packet).sendable_segment(segment)).flatten()
}

impl QueueTask for TcpSender {
    fn poll(&mut self, port: &Port, _wait: Option<Duration>) -> usize {
        let p = port;
        let q = &p.tx[self.queue];
        if self.outgoing.is_none() {
            let burst = pacing::next_burst(q, self.pacer.as_mut());
            self.outgoing = burst.map(|burst| Outgoing { burst, packet: 0, segment: 0, offset: 0, sent_bytes: 0 });
        }
        let Some(out) = &mut self.outgoing else { return 0 };
        let stream = if self.owns_connection {
            self.connection.current_or_establish(&p.name, None)
        } else {
            self.connection.current()
        };
        // No connection yet: the burst waits for one.
        let Some(stream) = stream else { return 0 };
        let socket = SockRef::from(&*stream);
        let first = out.packet;
        while out.packet < out.burst.num_packets() {
            let mut pieces = [IoSlice::new(&[]); PIECES_PER_WRITE];
            let (gathered, rest) = out.gather(&mut pieces);
            if gathered == 0 {
                // Only empty or absent segments were left: the burst is done.
                out.advance(0);
                break;
            }
            let more = if rest { libc::MSG_MORE } else { 0 };
            match socket.send_vectored_with_flags(&pieces[..gathered], libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | more) {
                Ok(n) => out.advance(n),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    // The socket buffer is full: go on from here at the next poll.
                    return (out.packet - first).max(1);
                }
                Err(e) => {
                    tracing::warn!(interface = %p.name, "TCP send failed, dropping the connection: {e}");
                    q.stats.dropped(DropReason::SendFailed, (out.burst.num_packets() - out.packet) as u64);
                    self.connection.lose();
                    break;
                }
            }
        }
        let total = out.burst.num_packets();
        let done = self.outgoing.take().expect("matched above");
        if done.packet > 0 {
            q.stats.delivered(done.packet.min(total) as u64, done.sent_bytes);
        }
        (done.packet - first).max(1)
    }

    fn sleeps_on(&self, port: &Port, set: &mut SleepSet) -> bool {
        if self.outgoing.is_none() {
            return sender_sleeps_on(&port.tx[self.queue], self.pacer.is_some(), set);
        }
        // A burst part written waits for room in the socket (or a connection).
        let Some(stream) = self.connection.current() else { return false };
        set.watch(stream.as_raw_fd(), libc::POLLOUT);
        true
    }

    /// A burst cut short by the stop: its unsent packets are counted.
    fn finish(&mut self, port: &Port) {
        if let Some(out) = self.outgoing.take() {
            let q = &port.tx[self.queue];
            q.stats.dropped(DropReason::SendFailed, (out.burst.num_packets() - out.packet) as u64);
        }
    }
}
