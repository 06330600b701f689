//! Connections through `rdma_cm`: the event channel, ids that listen,
//! bind, resolve and connect, and the work requests posted on their
//! queue pairs.

use std::io;
use std::net::SocketAddr;
use std::ptr::{NonNull, null_mut};

use rdma_sys as sys;

use super::{CompletionQueue, ProtectionDomain, last_error, post_receive_on, qp_to_error};
use crate::burst::RemoteMemory;

/// `rdma_addrinfo.ai_flags`: a passive endpoint (rdma_cma.h; a macro,
/// which the bindings leave out).
const RAI_PASSIVE: i32 = 1;

/// `sockaddr_in`/`sockaddr_in6` of `addr`, as rdma_cm takes it.
fn sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin6) };
        }
    }
    storage
}

/// An `rdma_cm` event channel, non-blocking, so a worker polls it.
#[derive(Debug)]
pub(crate) struct EventChannel(NonNull<sys::rdma_event_channel>);

// SAFETY: the channel is used by one thread at a time (the task that owns it).
unsafe impl Send for EventChannel {}
// SAFETY: as above; shared references only read the pointer.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: no arguments; the result is checked.
        let channel = NonNull::new(unsafe { sys::rdma_create_event_channel() }).ok_or_else(|| {
            last_error("rdma_create_event_channel (is an RDMA device present, and /dev/infiniband/rdma_cm readable?)")
        })?;
        // SAFETY: the channel is valid; its fd is an ordinary descriptor.
        let fd = unsafe { channel.as_ref().fd };
        // SAFETY: fcntl on a descriptor the channel owns.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) } != 0 {
            let e = last_error("fcntl O_NONBLOCK on the rdma_cm channel");
            // SAFETY: the channel was just created and holds no ids.
            unsafe { sys::rdma_destroy_event_channel(channel.as_ptr()) };
            return Err(e);
        }
        Ok(Self(channel))
    }

    /// The next event, if one is waiting. It is acknowledged before this
    /// returns; a connect request's new id is then the caller's.
    pub(crate) fn next(&self) -> io::Result<Option<CmEvent>> {
        let mut event: *mut sys::rdma_cm_event = null_mut();
        // SAFETY: the channel is valid; `event` receives an event we ack below.
        if unsafe { sys::rdma_get_cm_event(self.0.as_ptr(), &mut event) } != 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
        }
        // SAFETY: `event` is the valid event just returned.
        let (kind, id, status) = unsafe { ((*event).event, (*event).id, (*event).status) };
        // SAFETY: acknowledged once; nothing reads the event after this.
        unsafe { sys::rdma_ack_cm_event(event) };
        let request = (kind == sys::rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST)
            .then(|| NonNull::new(id).map(CmId))
            .flatten();
        Ok(Some(CmEvent { kind, id, status, request }))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id on the channel was destroyed first (field order of the owners).
        unsafe { sys::rdma_destroy_event_channel(self.0.as_ptr()) };
    }
}

/// One `rdma_cm` event.
#[derive(Debug)]
pub(crate) struct CmEvent {
    pub(crate) kind: u32,
    /// The id it concerns (compare with [`CmId::is`]).
    pub(crate) id: *mut sys::rdma_cm_id,
    pub(crate) status: i32,
    /// A connect request's new id, now owned.
    pub(crate) request: Option<CmId>,
}

/// An `rdma_cm` id: a listener, or one accepted connection with its queue pair.
#[derive(Debug)]
pub(crate) struct CmId(NonNull<sys::rdma_cm_id>);

// SAFETY: one owner drives the id; rdma_cm ids are not tied to a thread.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl CmId {
    /// An id listening on `addr` for connections of `qp_type` (RC or UC).
    pub(crate) fn listen(channel: &EventChannel, addr: SocketAddr, qp_type: u32) -> io::Result<Self> {
        let id = Self::bound_to(channel, addr, qp_type)?;
        // SAFETY: the id is bound.
        if unsafe { sys::rdma_listen(id.0.as_ptr(), 8) } != 0 {
            return Err(last_error(&format!("rdma_listen {addr}")));
        }
        Ok(id)
    }

    /// A client's id for connections of `qp_type`, bound to `local` (an
    /// RDMA device's address), any port.
    pub(crate) fn bound(channel: &EventChannel, local: std::net::IpAddr, qp_type: u32) -> io::Result<Self> {
        Self::bound_to(channel, SocketAddr::new(local, 0), qp_type)
    }

    /// An id on `channel` bound to `addr`. RC ids are made in the TCP port
    /// space, as rdma_create_id makes them; a UC id needs its type when it
    /// is made, which librdmacm offers only through rdma_create_ep
    /// (rdma_create_id2 is private), in the IB port space: made there
    /// passive (bound, not resolved) and moved onto our channel.
    fn bound_to(channel: &EventChannel, addr: SocketAddr, qp_type: u32) -> io::Result<Self> {
        let mut storage = sockaddr(addr);
        if qp_type != sys::ibv_qp_type::IBV_QPT_UC {
            let id = Self::create(channel)?;
            // SAFETY: the id is valid; `storage` holds a sockaddr of addr's family.
            if unsafe { sys::rdma_bind_addr(id.0.as_ptr(), (&raw mut storage).cast()) } != 0 {
                return Err(last_error(&format!("rdma_bind_addr {addr} (no RDMA device has this address?)")));
            }
            return Ok(id);
        }
        // SAFETY: all-zero is a valid addrinfo; the fields rdma_create_ep reads are set.
        let mut info: sys::rdma_addrinfo = unsafe { std::mem::zeroed() };
        info.ai_flags = RAI_PASSIVE;
        info.ai_family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        info.ai_qp_type = qp_type as i32;
        info.ai_port_space = sys::rdma_port_space::RDMA_PS_IB as i32;
        info.ai_src_addr = (&raw mut storage).cast();
        info.ai_src_len = if addr.is_ipv4() { size_of::<libc::sockaddr_in>() } else { size_of::<libc::sockaddr_in6>() }
            as libc::socklen_t;
        let mut id: *mut sys::rdma_cm_id = null_mut();
        // SAFETY: `info` describes a passive endpoint at `storage`, which
        // outlives the call; no domain and no queue pair are asked for.
        if unsafe { sys::rdma_create_ep(&mut id, &mut info, null_mut(), null_mut()) } != 0 {
            return Err(last_error(&format!("rdma_create_ep (UC) at {addr} (no RDMA device has this address?)")));
        }
        let id = NonNull::new(id).map(Self).ok_or_else(|| io::Error::other("rdma_create_ep returned no id"))?;
        id.migrate(channel)?;
        Ok(id)
    }

    /// Moves the id's events onto `channel` (every event of it so far is
    /// acknowledged: [`EventChannel::next`] acknowledges each at once).
    pub(crate) fn migrate(&self, channel: &EventChannel) -> io::Result<()> {
        // SAFETY: both are valid; rdma_migrate_id waits for unacknowledged events, of which there are none.
        if unsafe { sys::rdma_migrate_id(self.0.as_ptr(), channel.0.as_ptr()) } != 0 {
            return Err(last_error("rdma_migrate_id"));
        }
        Ok(())
    }

    fn create(channel: &EventChannel) -> io::Result<Self> {
        let mut id: *mut sys::rdma_cm_id = null_mut();
        // SAFETY: the channel is valid; `id` receives the new id.
        if unsafe { sys::rdma_create_id(channel.0.as_ptr(), &mut id, null_mut(), sys::rdma_port_space::RDMA_PS_TCP) }
            != 0
        {
            return Err(last_error("rdma_create_id"));
        }
        NonNull::new(id).map(Self).ok_or_else(|| io::Error::other("rdma_create_id returned no id"))
    }

    /// Starts resolving `remote` to a device path; ADDR_RESOLVED (or an error event) follows.
    pub(crate) fn resolve_addr(&self, remote: SocketAddr, timeout_ms: i32) -> io::Result<()> {
        let mut storage = sockaddr(remote);
        // SAFETY: the id is bound; no source address (the bound one is used).
        if unsafe { sys::rdma_resolve_addr(self.0.as_ptr(), null_mut(), (&raw mut storage).cast(), timeout_ms) } != 0 {
            return Err(last_error(&format!("rdma_resolve_addr {remote}")));
        }
        Ok(())
    }

    /// Starts resolving the route; ROUTE_RESOLVED (or an error event) follows.
    pub(crate) fn resolve_route(&self, timeout_ms: i32) -> io::Result<()> {
        // SAFETY: the id's address is resolved.
        if unsafe { sys::rdma_resolve_route(self.0.as_ptr(), timeout_ms) } != 0 {
            return Err(last_error("rdma_resolve_route"));
        }
        Ok(())
    }

    /// Starts connecting (its queue pair created); ESTABLISHED (or an error event) follows.
    pub(crate) fn connect(&self) -> io::Result<()> {
        let mut param = connection_parameters();
        // SAFETY: the id's route is resolved and it has its queue pair.
        if unsafe { sys::rdma_connect(self.0.as_ptr(), &mut param) } != 0 {
            return Err(last_error("rdma_connect"));
        }
        Ok(())
    }

    /// The device context the id is bound to (`None` for a wildcard address).
    pub(crate) fn verbs(&self) -> Option<NonNull<sys::ibv_context>> {
        // SAFETY: the id is valid.
        NonNull::new(unsafe { self.0.as_ref().verbs })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rdma_cm_id {
        self.0.as_ptr()
    }

    /// The id's queue pair (null until one is created).
    fn qp(&self) -> *mut sys::ibv_qp {
        // SAFETY: the id is valid.
        unsafe { self.0.as_ref().qp }
    }

    /// The device port the id is bound to.
    pub(crate) fn port_num(&self) -> u8 {
        // SAFETY: the id is valid.
        unsafe { self.0.as_ref().port_num }
    }

    /// Whether `raw` is this id.
    pub(crate) fn is(&self, raw: *mut sys::rdma_cm_id) -> bool {
        self.0.as_ptr() == raw
    }

    /// The peer's address of a connected id.
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        // SAFETY: the id is valid; the peer's address lies inside it.
        let addr: *const libc::sockaddr = unsafe { sys::rdma_get_peer_addr(self.0.as_ref()) };
        // SAFETY: the id's address storage is large enough for the family it names.
        unsafe {
            match i32::from((*addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*addr.cast::<libc::sockaddr_in>();
                    Some(SocketAddr::from((sin.sin_addr.s_addr.to_ne_bytes(), u16::from_be(sin.sin_port))))
                }
                libc::AF_INET6 => {
                    let sin6 = &*addr.cast::<libc::sockaddr_in6>();
                    Some(SocketAddr::from((sin6.sin6_addr.s6_addr, u16::from_be(sin6.sin6_port))))
                }
                _ => None,
            }
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the id is valid; its queue pair (if any) goes first.
        unsafe {
            if !self.0.as_ref().qp.is_null() {
                sys::rdma_destroy_qp(self.0.as_ptr());
            }
            sys::rdma_destroy_id(self.0.as_ptr());
        }
    }
}

/// Creates `id`'s queue pair on `pd`: sends complete on `send_cq`, receives on `recv_cq`.
pub(crate) fn create_queue_pair(
    id: &CmId,
    pd: &ProtectionDomain,
    (send_cq, recv_cq): (&CompletionQueue, &CompletionQueue),
    qp_type: u32,
    (send_depth, recv_depth): (u32, u32),
) -> io::Result<()> {
    // SAFETY: all-zero is a valid init attribute block; the fields we need are set.
    let mut attr: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    attr.send_cq = send_cq.0.as_ptr();
    attr.recv_cq = recv_cq.0.as_ptr();
    attr.qp_type = qp_type;
    attr.sq_sig_all = 1;
    attr.cap.max_send_wr = send_depth;
    attr.cap.max_recv_wr = recv_depth;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    // SAFETY: the id is valid and has no queue pair yet; pd and cq are live.
    if unsafe { sys::rdma_create_qp(id.as_ptr(), pd.0.as_ptr(), &mut attr) } != 0 {
        return Err(last_error(&format!("rdma_create_qp with {send_depth} send and {recv_depth} receive slots")));
    }
    Ok(())
}

/// Posts one receive of `len` bytes at `addr` (in `lkey`'s registration), tagged `wr_id`.
pub(crate) fn post_receive(id: &CmId, wr_id: u64, addr: u64, len: u32, lkey: u32) -> io::Result<()> {
    post_receive_on(id.qp(), wr_id, Some((addr, len, lkey)))
}

/// What both ends ask of a connection: DAQIRI's, seven transport retries
/// and an RNR retry that never gives up (a receiver short of posted
/// buffers slows its sender, it does not lose its messages).
fn connection_parameters() -> sys::rdma_conn_param {
    // SAFETY: all-zero connection parameters are valid; the counts are set below.
    let mut param: sys::rdma_conn_param = unsafe { std::mem::zeroed() };
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    param
}

/// Accepts a connect request on `id` (its queue pair created and receives posted).
pub(crate) fn accept(id: &CmId) -> io::Result<()> {
    let mut param = connection_parameters();
    // SAFETY: the id came from a connect request and has its queue pair.
    if unsafe { sys::rdma_accept(id.as_ptr(), &mut param) } != 0 {
        return Err(last_error("rdma_accept"));
    }
    Ok(())
}

/// Posts one signaled SEND of `len` bytes at `addr` (in `lkey`'s
/// registration), tagged `wr_id`, with `immediate` if given (host order);
/// or, with `remote` memory of the peer, an RDMA WRITE of them there (with
/// immediate where one is given), or an RDMA READ of `len` bytes from
/// there into them.
pub(crate) fn post_send(
    id: &CmId,
    wr_id: u64,
    (addr, len, lkey): (u64, u32, u32),
    immediate: Option<u32>,
    remote: Option<RemoteMemory>,
) -> io::Result<()> {
    use sys::ibv_wr_opcode as op;
    let mut sge = sys::ibv_sge { addr, length: len, lkey };
    // SAFETY: all-zero is a valid work request; its fields are set below.
    let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = match (remote, immediate) {
        (None, None) => op::IBV_WR_SEND,
        (None, Some(_)) => op::IBV_WR_SEND_WITH_IMM,
        (Some(RemoteMemory::Write(..)), None) => op::IBV_WR_RDMA_WRITE,
        (Some(RemoteMemory::Write(..)), Some(_)) => op::IBV_WR_RDMA_WRITE_WITH_IMM,
        (Some(RemoteMemory::Read(..)), _) => op::IBV_WR_RDMA_READ,
    };
    if let Some(immediate) = immediate.filter(|_| !matches!(remote, Some(RemoteMemory::Read(..)))) {
        wr.imm_data_invalidated_rkey_union.imm_data = immediate.to_be();
    }
    if let Some(RemoteMemory::Write(remote_addr, rkey) | RemoteMemory::Read(remote_addr, rkey)) = remote {
        wr.wr.rdma = sys::rdma_t { remote_addr, rkey };
    }
    wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    let mut bad: *mut sys::ibv_send_wr = null_mut();
    // SAFETY: the id has a queue pair; the buffer lies in a live registration
    // and stays lent to the device until its completion.
    let rc = unsafe { sys::ibv_post_send(id.qp(), &mut wr, &mut bad) };
    if rc != 0 { Err(io::Error::from_raw_os_error(rc)) } else { Ok(()) }
}

/// Refuses a connect request on `id` (then dropped, which destroys it).
pub(crate) fn reject(id: &CmId) {
    // SAFETY: the id came from a connect request; no private data.
    unsafe { sys::rdma_reject(id.as_ptr(), std::ptr::null(), 0) };
}

/// Moves `id`'s queue pair to the error state (see [`qp_to_error`]).
pub(crate) fn to_error(id: &CmId) {
    qp_to_error(id.qp());
}

/// Starts disconnecting `id`; the peer and our channel see DISCONNECTED.
pub(crate) fn disconnect(id: &CmId) {
    // SAFETY: the id is valid; disconnecting an id never connected only fails.
    unsafe { sys::rdma_disconnect(id.as_ptr()) };
}
