//! TCP sockets, and how a byte stream maps onto bursts.
//!
//! A TCP interface carries one connection at a time (a server accepts the
//! next once the current one closes; a client reconnects). Received bytes
//! land in buffers of the first RX queue's memory region: each packet is one
//! `read` of up to `buf_size` bytes (or `max_payload_size`, if smaller), and
//! packets and bursts go to the first RX queue in stream order. Packet
//! boundaries carry no meaning; concatenating the packets of successive bursts
//! gives the stream back byte for byte.
//!
//! Nothing is ever dropped: when buffers, burst metadata or ring space run
//! out, the worker stops reading and TCP flow control slows the sender.
//! On TX, each packet's segments are written in order with `write_all`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;
use daqiri_config::SocketEndpoints;
use daqiri_config::model::SocketMode;
use socket2::{Domain, Protocol, Socket, Type};

use super::SOCKET_BUFFER_BYTES;
use crate::backend::Backend;
use crate::burst::{MAX_SEGMENTS, PacketSlot};
use crate::error::{Error, Result, Status};
use crate::port::Port;
use crate::state::EngineState;
use crate::stats::DropReason;
use crate::worker::{self, Assembler, idle};

#[derive(Debug)]
struct Shared {
    mode: SocketMode,
    listener: Option<Socket>,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    /// The live connection, shared by the RX and TX workers.
    stream: Mutex<Option<Arc<TcpStream>>>,
    poll: Duration,
    max_read: Option<usize>,
}

#[derive(Debug)]
pub(super) struct TcpBackend {
    shared: Arc<Shared>,
}

impl TcpBackend {
    pub(super) fn open(endpoints: SocketEndpoints, port: &Port) -> Result<Self> {
        let poll = worker::poll_interval(&port.rx);
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
                        s.set_read_timeout(Some(poll))?;
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
        let max_read = port.config_max_payload();
        Ok(Self {
            shared: Arc::new(Shared {
                mode: endpoints.mode,
                listener,
                local,
                remote,
                stream: Mutex::new(None),
                poll,
                max_read,
            }),
        })
    }
}

impl Backend for TcpBackend {
    fn start(self: Box<Self>, engine: &Arc<EngineState>, port: u16) -> Result<Vec<JoinHandle<()>>> {
        let p = &engine.ports[port as usize];
        let mut workers = Vec::new();
        // One worker owns the connection: the RX worker, or the first TX worker without RX.
        let rx_owns = !p.rx.is_empty();
        if let Some(first) = p.rx.first() {
            let (engine, shared) = (Arc::clone(engine), Arc::clone(&self.shared));
            workers.push(worker::spawn(format!("rx-{}", p.name), first.cpu_core, move || {
                receive_loop(&engine, port, &shared)
            })?);
        }
        for (index, q) in p.tx.iter().enumerate() {
            let owns = !rx_owns && index == 0;
            let (engine, shared) = (Arc::clone(engine), Arc::clone(&self.shared));
            workers.push(worker::spawn(format!("tx-{}-{}", p.name, q.id), q.cpu_core, move || {
                send_loop(&engine, port, index, &shared, owns)
            })?);
        }
        Ok(workers)
    }
}

impl Shared {
    fn current(&self) -> Option<Arc<TcpStream>> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, stream: Option<Arc<TcpStream>>) {
        *self.stream.lock().unwrap_or_else(|e| e.into_inner()) = stream;
    }

    /// Accepts (server) or connects (client) once; `None` when nothing happened this round.
    fn establish(&self, name: &str) -> Option<Arc<TcpStream>> {
        let stream = match self.mode {
            SocketMode::Server => {
                let (socket, peer) = self.listener.as_ref()?.accept().ok()?;
                tracing::info!(interface = name, peer = ?peer.as_socket(), "TCP connection accepted");
                TcpStream::from(socket)
            }
            SocketMode::Client => match self.connect() {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(interface = name, "connect failed, retrying: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    return None;
                }
            },
        };
        let socket = Socket::from(stream);
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
        let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
        let stream = TcpStream::from(socket);
        let _ = stream.set_read_timeout(Some(self.poll));
        let stream = Arc::new(stream);
        self.set(Some(Arc::clone(&stream)));
        Some(stream)
    }

    fn connect(&self) -> io::Result<TcpStream> {
        let remote = self.remote.expect("validated: clients have remote_addr");
        let socket = Socket::new(Domain::for_address(remote), Type::STREAM, Some(Protocol::TCP))?;
        if let Some(local) = self.local {
            socket.set_reuse_address(true)?;
            socket.bind(&local.into())?;
        }
        socket.connect_timeout(&remote.into(), Duration::from_secs(1))?;
        Ok(socket.into())
    }
}

fn receive_loop(engine: &EngineState, port: u16, shared: &Shared) {
    let p = &engine.ports[port as usize];
    let regions = &*engine.regions;
    let queue = &p.rx[0];
    let landing = regions.get(queue.segment_regions[0]);
    let read_size = shared.max_read.unwrap_or(usize::MAX).min(landing.buf_size());
    let mut assembler = Assembler::default();
    let stop = || engine.stopping();
    while !engine.stopping() {
        let Some(stream) = shared.current().or_else(|| shared.establish(&p.name)) else { continue };
        loop {
            let token = loop {
                if let Some(token) = landing.take() {
                    break Some(token);
                }
                // Out of buffers: hand over what we hold so the application can free some.
                assembler.flush_lossless(queue, &stop);
                if stop() {
                    break None;
                }
                std::thread::sleep(Duration::from_micros(20));
            };
            let Some(mut token) = token else { break };
            let read = (&*stream).read(&mut landing.bytes_mut(&mut token)[..read_size]);
            match read {
                Ok(0) => {
                    landing.release(token);
                    assembler.flush_lossless(queue, &stop);
                    shared.set(None);
                    tracing::info!(interface = %p.name, "TCP peer closed the connection");
                    break;
                }
                Ok(n) => {
                    if p.drop_all.load(std::sync::atomic::Ordering::Relaxed) {
                        landing.release(token);
                        p.rx_drops.dropped(DropReason::DropAllTraffic, 1);
                    } else {
                        assembler.push_lossless(queue, PacketSlot::single(token, n as u32, None), regions, &stop);
                    }
                }
                Err(e) => {
                    landing.release(token);
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) {
                        tracing::warn!(interface = %p.name, "TCP receive failed, dropping the connection: {e}");
                        assembler.flush_lossless(queue, &stop);
                        shared.set(None);
                        break;
                    }
                }
            }
            assembler.flush_if_due_lossless(queue, Instant::now(), &stop);
            if stop() {
                break;
            }
        }
    }
    if let Some(stream) = shared.current() {
        let _ = stream.shutdown(Shutdown::Both);
    }
}

fn send_loop(engine: &EngineState, port: u16, queue: usize, shared: &Shared, owns_connection: bool) {
    let p = &engine.ports[port as usize];
    let q = &p.tx[queue];
    let backoff = Backoff::new();
    while !engine.stopping() {
        let Some(burst) = q.ring.pop() else {
            idle(&backoff);
            continue;
        };
        backoff.reset();
        let stream = loop {
            let stream =
                if owns_connection { shared.current().or_else(|| shared.establish(&p.name)) } else { shared.current() };
            if stream.is_some() || engine.stopping() {
                break stream;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let Some(stream) = stream else { break };
        let (mut packets, mut bytes) = (0u64, 0u64);
        for (index, packet) in burst.packets().enumerate() {
            let written =
                (0..MAX_SEGMENTS).filter_map(|s| packet.segment(s)).try_for_each(|piece| (&*stream).write_all(piece));
            if let Err(e) = written {
                tracing::warn!(interface = %p.name, "TCP send failed, dropping the connection: {e}");
                q.stats.dropped(DropReason::SendFailed, (burst.num_packets() - index) as u64);
                shared.set(None);
                break;
            }
            packets += 1;
            bytes += packet.len() as u64;
        }
        if packets > 0 {
            q.stats.delivered(packets, bytes);
        }
    }
    if owns_connection && let Some(stream) = shared.current() {
        let _ = stream.shutdown(Shutdown::Write);
    }
}
