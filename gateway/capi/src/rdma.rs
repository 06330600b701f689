//! DAQIRI's RDMA calls over our RoCE ports: connection ids, requests and
//! their completions.
//!
//! DAQIRI's RDMA engine leaves every receive and send to the program: it
//! posts RECEIVE and SEND requests (`rdma_set_header`, `get_tx_packet_burst`,
//! `send_tx_burst`) and takes each back from `get_rx_burst(conn_id)` once
//! the device completed it. Our RoCE port keeps receives posted on its own,
//! into its RX queue's buffers, and sends each TX packet as a SEND. Here
//! the two meet:
//! - a connection id names a port's connection (RX queue j, and TX queue j,
//!   which sends on it) as it was when the program took the id; once the
//!   port connects again there, the id is stale (`CONNECT_FAILURE`);
//! - a SEND request is a burst of TX queue j; it completes once the device
//!   has finished as many of that queue's work requests as the request has
//!   packets (the engine counts them: [`daqiri::RdmaConnection`]);
//! - a RECEIVE request takes no buffer: it completes with the next burst RX
//!   queue j delivers, the messages in that queue's own buffers, where the
//!   device wrote them. While no RECEIVE request is pending, bursts wait in
//!   the queue's ring, which holds an RC sender back once it is full.
//!
//! The calls on connections take one lock (the table of connections
//! taken): once per request or completion, not per packet.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_char;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use daqiri::{Burst, Direction, Engine, EngineId, Error, RdmaConnection, Status};
use daqiri_config::InterfaceBackend;
use daqiri_config::model::SocketMode;

use crate::connections::{self, ip};
use crate::handle::{self, BurstParams, Role};
use crate::lifecycle::{Running, text, with_engine};
pub use crate::rdma_request::OpCode;
use crate::rdma_request::{Request, TransportFields};
use crate::status::{self, SUCCESS, status_of};

/// Connection ids carry this tag in their top 16 bits (socket ids have another).
const TAG: usize = 0xDA92 << 48;
/// How long `rdma_connect_to_server` waits for the port's own connection.
const CONNECT_WAIT: Duration = Duration::from_secs(3);

/// Where a connection id points: a port's connection `index`, as it was
/// when `established` connections had been made there (its low 16 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ConnId {
    port: u16,
    index: u16,
    established: u16,
}

impl ConnId {
    fn encode(self) -> usize {
        TAG | (usize::from(self.established) << 32) | (usize::from(self.port) << 16) | (usize::from(self.index) + 1)
    }

    fn decode(id: usize) -> Option<Self> {
        if id & (0xFFFF << 48) != TAG || id & 0xFFFF == 0 {
            return None;
        }
        Some(Self { port: (id >> 16) as u16, index: (id & 0xFFFF) as u16 - 1, established: (id >> 32) as u16 })
    }
}

/// Whether `id` is an RDMA connection id (not a socket one).
pub(crate) fn is_rdma_id(id: usize) -> bool {
    ConnId::decode(id).is_some()
}

/// A connection the program took an id for, and its posted requests.
#[derive(Debug)]
struct Claimed {
    established: u64,
    /// The engine's count of finished (and of failed) TX work requests
    /// already accounted to completions.
    finished_seen: u64,
    failed_seen: u64,
    /// Posted SEND requests (handle, packets), oldest first.
    sends: VecDeque<(usize, u64)>,
    /// Posted RECEIVE requests, oldest first.
    receives: VecDeque<usize>,
}

impl Claimed {
    fn new(now: RdmaConnection) -> Self {
        Self {
            established: now.established,
            finished_seen: now.finished,
            failed_seen: now.failed,
            sends: VecDeque::new(),
            receives: VecDeque::new(),
        }
    }

    fn discard(&mut self) {
        for (address, _) in self.sends.drain(..) {
            handle::discard(address);
        }
        for address in self.receives.drain(..) {
            handle::discard(address);
        }
    }
}

/// The connections the program took ids for, by (port, index), and the
/// engine they are of. The first call on a new engine (after `shutdown`
/// and `daqiri_init`) frees the requests still posted on the old one.
static TAKEN: Mutex<Option<(EngineId, Table)>> = Mutex::new(None);

/// Connections taken, by (port, index).
type Table = HashMap<(u16, u16), Claimed>;

/// The connections `engine`'s program took; held for one call.
fn taken(engine: &Engine) -> Taken<'_> {
    let mut table = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if table.as_ref().is_none_or(|(of, _)| *of != engine.id())
        && let Some((_, mut old)) = table.replace((engine.id(), HashMap::new()))
    {
        old.values_mut().for_each(Claimed::discard);
    }
    Taken(table)
}

/// [`TAKEN`], locked and filled for the running engine by [`taken`].
struct Taken<'a>(MutexGuard<'a, Option<(EngineId, Table)>>);

impl Deref for Taken<'_> {
    type Target = Table;

    fn deref(&self) -> &Self::Target {
        &self.0.as_ref().expect("filled by taken()").1
    }
}

impl DerefMut for Taken<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0.as_mut().expect("filled by taken()").1
    }
}

/// The RoCE ports of `mode` whose endpoint `matches`.
fn roce_ports(
    engine: &Engine,
    mode: SocketMode,
    matches: impl Fn(&daqiri_config::SocketEndpoints) -> bool,
) -> Vec<u16> {
    let config = engine.config();
    (0..engine.num_ports())
        .filter(|&port| config.backend(port) == InterfaceBackend::Roce)
        .filter(|&port| config.endpoints(port).is_some_and(|e| e.mode == mode && matches(&e)))
        .map(|port| port as u16)
        .collect()
}

/// Takes the first connection of `ports` that is up and not taken yet for
/// the program; `None` when none is.
fn claim_one(engine: &Running, ports: &[u16]) -> daqiri::Result<Option<usize>> {
    let mut table = taken(engine);
    for &port in ports {
        for index in 0..positions(engine, port) {
            let now = engine.rdma_connection(port, index)?;
            let taken = table.get(&(port, index as u16)).is_some_and(|c| c.established == now.established);
            if now.connected && !taken {
                if let Some(mut old) = table.insert((port, index as u16), Claimed::new(now)) {
                    old.discard();
                }
                let id = ConnId { port, index: index as u16, established: now.established as u16 };
                return Ok(Some(id.encode()));
            }
        }
    }
    Ok(None)
}

/// A RoCE port's connections: one per RX queue.
fn positions(engine: &Engine, port: u16) -> usize {
    engine.config().config().interfaces[usize::from(port)].rx.as_ref().map_or(0, |rx| rx.queues.len())
}

fn write_id(call: &str, found: daqiri::Result<usize>, conn_id: *mut usize) -> i32 {
    match found {
        Ok(_) if conn_id.is_null() => status::fail(call, Error::new(Status::NullPtr, "conn_id is a null pointer")),
        Ok(id) => {
            // SAFETY: non-null, a writable uintptr_t* by the C contract.
            unsafe { *conn_id = id };
            SUCCESS
        }
        Err(e) => status::fail(call, e),
    }
}

/// A connection a client connected to the RoCE server interface bound to
/// `server_addr:server_port`, not taken by an earlier call: `NOT_READY`
/// while none is, `NO_SPACE_AVAILABLE` once every one is taken.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_rdma_get_server_conn_id(
    server_addr: *const c_char,
    server_port: u16,
    conn_id: *mut usize,
) -> i32 {
    let found = ip("server_addr", server_addr).and_then(|addr| {
        with_engine(|engine| {
            let ports = roce_ports(engine, SocketMode::Server, |e| {
                e.local.is_some_and(|l| (l.ip == addr || l.ip.is_unspecified()) && l.port == Some(server_port))
            });
            if ports.is_empty() {
                return Err(Error::invalid(format!(
                    "no RoCE server interface listens on {addr}:{server_port} (socket_config.local_addr roce://...)"
                )));
            }
            if let Some(id) = claim_one(engine, &ports)? {
                return Ok(id);
            }
            let any_up = ports
                .iter()
                .any(|&p| (0..positions(engine, p)).any(|j| engine.rdma_connection(p, j).is_ok_and(|c| c.connected)));
            Err(if any_up {
                Error::new(
                    Status::NoSpaceAvailable,
                    format!("every connection of the server on {addr}:{server_port} is taken already"),
                )
            } else {
                Error::new(Status::NotReady, format!("no client has connected to {addr}:{server_port} yet"))
            })
        })
    });
    write_id("rdma_get_server_conn_id", found, conn_id)
}

/// A connection of the RoCE client interface aimed at
/// `server_addr:server_port` (and bound to `client_addr`, when given). The
/// port connects on its own, as its config says, and tries again while
/// the server is away; this waits up to 3 s for a connection not taken yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_rdma_connect_to_server(
    server_addr: *const c_char,
    server_port: u16,
    client_addr: *const c_char,
    conn_id: *mut usize,
) -> i32 {
    // DAQIRI's overload without a source address passes "".
    let client = if client_addr.is_null() || text("client_addr", client_addr).is_ok_and(str::is_empty) {
        Ok(None)
    } else {
        ip("client_addr", client_addr).map(Some)
    };
    let found = client.and_then(|client| {
        let server = ip("server_addr", server_addr)?;
        let from = client.map_or(String::new(), |c| format!(" from {c}"));
        let ports = with_engine(|engine| {
            Ok(roce_ports(engine, SocketMode::Client, |e| {
                e.remote.is_some_and(|r| r.ip == server && r.port == Some(server_port))
                    && client.is_none_or(|c| e.local.is_none_or(|l| l.ip == c || l.ip.is_unspecified()))
            }))
        })?;
        if ports.is_empty() {
            return Err(Error::new(
                Status::ConnectFailure,
                format!(
                    "no RoCE client interface is aimed at {server}:{server_port}{from} (socket_config.remote_addr, local_addr)"
                ),
            ));
        }
        let deadline = Instant::now() + CONNECT_WAIT;
        loop {
            if let Some(id) = with_engine(|engine| claim_one(engine, &ports))? {
                return Ok(id);
            }
            if Instant::now() >= deadline {
                return Err(Error::new(
                    Status::ConnectFailure,
                    format!(
                        "no connection to {server}:{server_port}{from} came up within {CONNECT_WAIT:?} that is not taken already (the port keeps trying)"
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    write_id("rdma_connect_to_server", found, conn_id)
}

/// The connection `id` names, checked against the port's connection now.
fn resolve(engine: &Running, id: usize, server: Option<bool>) -> daqiri::Result<ConnId> {
    let conn = ConnId::decode(id).ok_or_else(|| {
        Error::invalid(format!(
            "connection id {id:#x} is not an RDMA connection of this engine's: take it from rdma_get_server_conn_id or rdma_connect_to_server"
        ))
    })?;
    let now = engine.rdma_connection(conn.port, usize::from(conn.index))?;
    if now.established as u16 != conn.established || !now.connected {
        return Err(Error::new(
            Status::ConnectFailure,
            format!(
                "connection {id:#x} has closed: take the port's next one with rdma_get_server_conn_id or rdma_connect_to_server"
            ),
        ));
    }
    if let Some(server) = server {
        let mode = engine.socket_mode(usize::from(conn.port));
        if mode.is_some_and(|m| (m == SocketMode::Server) != server) {
            let side = if server { "server" } else { "client" };
            return Err(Error::invalid(format!(
                "connection {id:#x} is a {mode:?}'s, not a {side}'s",
                mode = mode.unwrap()
            )));
        }
    }
    Ok(conn)
}

/// Connection `conn`'s queue of `direction` (its position's).
fn queue_of(engine: &Engine, conn: ConnId, direction: Direction) -> Option<(u16, Option<String>)> {
    let config = engine.config();
    let interface = &config.config().interfaces[usize::from(conn.port)];
    let queues = match direction {
        Direction::Tx => interface.tx.as_ref().map(|t| &t.queues),
        Direction::Rx => interface.rx.as_ref().map(|r| &r.queues),
    };
    queues.and_then(|q| q.get(usize::from(conn.index))).map(|q| (q.id, q.memory_regions.first().cloned()))
}

/// The ids of connection `conn`'s queues: (RX queue, TX queue if any).
fn queues(engine: &Engine, conn: ConnId) -> (u16, Option<u16>) {
    let id = |direction| queue_of(engine, conn, direction).map(|(id, _)| id);
    (id(Direction::Rx).unwrap_or(0), id(Direction::Tx))
}

/// The port and the TX queue (an RX queue where there is none) of a connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_rdma_get_port_queue(conn_id: usize, port: *mut u16, queue: *mut u16) -> i32 {
    const CALL: &str = "rdma_get_port_queue";
    if port.is_null() || queue.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "port or queue is a null pointer"));
    }
    let found = with_engine(|engine| {
        let conn = resolve(engine, conn_id, None)?;
        let (rx, tx) = queues(engine, conn);
        Ok((conn.port, tx.unwrap_or(rx)))
    });
    connections::write_port_queue(CALL, found, port, queue)
}

/// Makes a TX burst handle not yet filled an RDMA request of `num_pkts`
/// packets on connection `conn_id`: a SEND from its TX queue's region or a
/// RECEIVE into its RX queue's (`local_mr_name` must be that region, or empty).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_rdma_set_header(
    burst: *mut BurstParams,
    op_code: i32,
    conn_id: usize,
    is_server: bool,
    num_pkts: i32,
    wr_id: u64,
    local_mr_name: *const c_char,
) -> i32 {
    const CALL: &str = "rdma_set_header";
    let set = handle::resolve(burst).and_then(|h| {
        if h.role != Role::Tx || h.burst.is_some() {
            return Err(Error::invalid(
                "rdma_set_header takes a burst of create_tx_burst_params that holds no packets yet",
            ));
        }
        let op = OpCode::from_c(op_code)?;
        let packets =
            u32::try_from(num_pkts).ok().filter(|&n| n > 0).ok_or_else(|| Error::invalid(format!("num_pkts {num_pkts} is not positive")))?;
        let mr = if local_mr_name.is_null() { "" } else { text("local_mr_name", local_mr_name)? };
        with_engine(|engine| {
            let conn = resolve(engine, conn_id, Some(is_server))?;
            let (rx, tx) = queues(engine, conn);
            let queue = match op {
                OpCode::Send => tx.ok_or_else(|| {
                    Error::invalid(format!("connection {conn_id:#x} has no TX queue at its position ({}) to send from", conn.index))
                })?,
                _ => rx,
            };
            let direction = if op == OpCode::Send { Direction::Tx } else { Direction::Rx };
            let region = queue_of(engine, conn, direction).and_then(|(_, region)| region).unwrap_or_default();
            if !mr.is_empty() && mr != region {
                let (what, direction) = if op == OpCode::Send { ("SEND", "tx") } else { ("RECEIVE", "rx") };
                return Err(Error::invalid(format!(
                    "local_mr_name \"{mr}\": a {what} on connection {conn_id:#x} uses region \"{region}\", its {direction} queue's (memory_regions); our RoCE queues send from and receive into their own region only"
                )));
            }
            h.hdr.hdr.port_id = conn.port;
            h.hdr.hdr.q_id = queue;
            h.hdr.hdr.num_pkts = packets;
            h.hdr.hdr.num_segs = 1;
            h.conn_id = conn_id;
            let request = Request { op, wr_id, armed: false };
            h.transport = TransportFields::of(&request, conn_id, is_server, &region);
            h.rdma = Some(request);
            Ok(())
        })
    });
    status_of(CALL, set)
}

/// The request a burst is, or completed as: DAQIRI's `RDMAOpCode` number
/// (7, `INVALID`, for a burst that is no RDMA request).
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_rdma_get_opcode(burst: *mut BurstParams) -> i32 {
    match handle::resolve(burst) {
        Ok(h) => h.rdma.map_or(OpCode::Invalid, |r| r.op) as i32,
        Err(e) => {
            status::fail("rdma_get_opcode", e);
            OpCode::Invalid as i32
        }
    }
}

/// The work request id `rdma_set_header` gave the burst (0 for none).
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_rdma_get_wr_id(burst: *mut BurstParams) -> u64 {
    match handle::resolve(burst) {
        Ok(h) => h.rdma.map_or(0, |r| r.wr_id),
        Err(e) => {
            status::fail("rdma_get_wr_id", e);
            0
        }
    }
}

/// `get_tx_packet_burst` for a RECEIVE request: it takes no buffer (the
/// port's receives are posted into its RX queue's), only readies it.
pub(crate) fn arm_receive(h: &mut BurstParams) -> daqiri::Result<()> {
    let request = h.rdma.as_mut().expect("a RECEIVE request");
    if request.armed {
        return Err(Error::invalid("this RECEIVE request is readied already: post it with send_tx_burst"));
    }
    request.armed = true;
    Ok(())
}

/// `set_packet_lengths` on a RECEIVE request: its messages are as long as
/// what arrives (up to the RX region's buf_size), so only the index is checked.
pub(crate) fn receive_length(h: &BurstParams, idx: i32) -> daqiri::Result<()> {
    let packets = h.hdr.hdr.num_pkts;
    if u32::try_from(idx).is_ok_and(|i| i < packets) {
        Ok(())
    } else {
        Err(Error::invalid(format!("packet {idx} of a RECEIVE request of {packets}")))
    }
}

/// `send_tx_burst` of an RDMA request: posts it to its connection, where
/// the program takes it back as a completion. On failure the handle is
/// freed, as every failed send's is.
pub(crate) fn post(h: &mut BurstParams) -> daqiri::Result<()> {
    let posted = with_engine(|engine| {
        let request = h.rdma.expect("an RDMA request");
        let conn = resolve(engine, h.conn_id, None)?;
        let mut table = taken(engine);
        let claimed = table
            .get_mut(&(conn.port, conn.index))
            .ok_or_else(|| Error::invalid(format!("connection {:#x} was not taken by this program", h.conn_id)))?;
        if request.is_receive() {
            if !request.armed {
                return Err(Error::invalid("this RECEIVE request is not readied: call get_tx_packet_burst first"));
            }
            claimed.receives.push_back(handle::post(h));
            return Ok(());
        }
        let burst = h
            .burst
            .take()
            .ok_or_else(|| Error::invalid("this SEND request has no packets: call get_tx_packet_burst first"))?;
        let packets = burst.num_packets() as u64;
        // Sent under the table's lock: no completion is counted before the request is queued.
        engine.send_tx_burst(burst).map_err(|refused| refused.error)?;
        claimed.sends.push_back((handle::post(h), packets));
        Ok(())
    });
    if posted.is_err() {
        handle::release(h);
    }
    posted
}

/// The next completion of connection `conn_id`: a SEND request whose work
/// requests all finished, else a RECEIVE request filled with the next
/// burst its RX queue delivered. `NOT_READY` when neither is.
pub(crate) fn next_completion(conn_id: usize, server: bool) -> daqiri::Result<&'static mut BurstParams> {
    with_engine(|engine| {
        let conn = resolve(engine, conn_id, Some(server))?;
        let now = engine.rdma_connection(conn.port, usize::from(conn.index))?;
        let mut table = taken(engine);
        let claimed = table
            .get_mut(&(conn.port, conn.index))
            .ok_or_else(|| Error::invalid(format!("connection {conn_id:#x} was not taken by this program")))?;
        if let Some(&(address, packets)) = claimed.sends.front()
            && now.finished - claimed.finished_seen >= packets
        {
            claimed.sends.pop_front();
            claimed.finished_seen += packets;
            let failed = (now.failed - claimed.failed_seen).min(packets);
            claimed.failed_seen += failed;
            let h = handle::complete(address);
            if failed > 0 {
                tracing::warn!(conn_id, failed, "an RDMA SEND request completed with failed work requests");
                h.transport.status = status::code(Status::GenericFailure);
            }
            return Ok(h);
        }
        if claimed.receives.is_empty() {
            return Err(nothing_yet());
        }
        let (rx, _) = queues(engine, conn);
        let Some(burst) = engine.get_rx_burst(conn.port, rx)? else {
            return Err(nothing_yet());
        };
        let address = claimed.receives.pop_front().expect("checked above");
        let h = handle::complete(address);
        fill(h, burst);
        Ok(h)
    })
}

fn nothing_yet() -> Error {
    Error::new(Status::NotReady, "no request of this connection has completed")
}

/// A RECEIVE request's completion: the messages `burst` holds.
fn fill(h: &mut BurstParams, burst: Burst) {
    h.describe(&burst);
    h.burst = Some(burst);
}
