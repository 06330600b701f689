//! The RDMA objects a RoCE port owns, each freed on drop in the order the
//! verbs require: the only place this backend calls rdma-core. rdma-sys
//! gives the raw bindings; nothing on crates.io wraps `rdma_cm` and verbs
//! with owned handles over memory that is not its own, so these do.

#![allow(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::ptr::{NonNull, null_mut};

use rdma_sys as sys;

use crate::memory::Region;

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

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
pub(super) struct EventChannel(NonNull<sys::rdma_event_channel>);

// SAFETY: the channel is used by one thread at a time (the task that owns it).
unsafe impl Send for EventChannel {}
// SAFETY: as above; shared references only read the pointer.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    pub(super) fn new() -> io::Result<Self> {
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
    pub(super) fn next(&self) -> io::Result<Option<CmEvent>> {
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
pub(super) struct CmEvent {
    pub(super) kind: u32,
    /// The id it concerns (compare with [`CmId::is`]).
    pub(super) id: *mut sys::rdma_cm_id,
    pub(super) status: i32,
    /// A connect request's new id, now owned.
    pub(super) request: Option<CmId>,
}

/// An `rdma_cm` id: a listener, or one accepted connection with its queue pair.
#[derive(Debug)]
pub(super) struct CmId(NonNull<sys::rdma_cm_id>);

// SAFETY: one owner drives the id; rdma_cm ids are not tied to a thread.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl CmId {
    /// An id listening on `addr` (reliable or unreliable connected queue pairs).
    pub(super) fn listen(channel: &EventChannel, addr: SocketAddr) -> io::Result<Self> {
        let id = Self::create(channel)?;
        let mut storage = sockaddr(addr);
        // SAFETY: the id is valid; `storage` holds a sockaddr of addr's family.
        if unsafe { sys::rdma_bind_addr(id.0.as_ptr(), (&raw mut storage).cast()) } != 0 {
            return Err(last_error(&format!("rdma_bind_addr {addr} (no RDMA device has this address?)")));
        }
        // SAFETY: the id is bound.
        if unsafe { sys::rdma_listen(id.0.as_ptr(), 8) } != 0 {
            return Err(last_error(&format!("rdma_listen {addr}")));
        }
        Ok(id)
    }

    /// A client's id, bound to `local` (an RDMA device's address), any port.
    pub(super) fn bound(channel: &EventChannel, local: std::net::IpAddr) -> io::Result<Self> {
        let id = Self::create(channel)?;
        let mut storage = sockaddr(SocketAddr::new(local, 0));
        // SAFETY: the id is valid; `storage` holds a sockaddr of local's family.
        if unsafe { sys::rdma_bind_addr(id.0.as_ptr(), (&raw mut storage).cast()) } != 0 {
            return Err(last_error(&format!("rdma_bind_addr {local} (no RDMA device has this address?)")));
        }
        Ok(id)
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
    pub(super) fn resolve_addr(&self, remote: SocketAddr, timeout_ms: i32) -> io::Result<()> {
        let mut storage = sockaddr(remote);
        // SAFETY: the id is bound; no source address (the bound one is used).
        if unsafe { sys::rdma_resolve_addr(self.0.as_ptr(), null_mut(), (&raw mut storage).cast(), timeout_ms) } != 0 {
            return Err(last_error(&format!("rdma_resolve_addr {remote}")));
        }
        Ok(())
    }

    /// Starts resolving the route; ROUTE_RESOLVED (or an error event) follows.
    pub(super) fn resolve_route(&self, timeout_ms: i32) -> io::Result<()> {
        // SAFETY: the id's address is resolved.
        if unsafe { sys::rdma_resolve_route(self.0.as_ptr(), timeout_ms) } != 0 {
            return Err(last_error("rdma_resolve_route"));
        }
        Ok(())
    }

    /// Starts connecting (its queue pair created); ESTABLISHED (or an error event) follows.
    pub(super) fn connect(&self) -> io::Result<()> {
        let mut param = connection_parameters();
        // SAFETY: the id's route is resolved and it has its queue pair.
        if unsafe { sys::rdma_connect(self.0.as_ptr(), &mut param) } != 0 {
            return Err(last_error("rdma_connect"));
        }
        Ok(())
    }

    /// The device context the id is bound to (`None` for a wildcard address).
    pub(super) fn verbs(&self) -> Option<NonNull<sys::ibv_context>> {
        // SAFETY: the id is valid.
        NonNull::new(unsafe { self.0.as_ref().verbs })
    }

    pub(super) fn as_ptr(&self) -> *mut sys::rdma_cm_id {
        self.0.as_ptr()
    }

    /// Whether `raw` is this id.
    pub(super) fn is(&self, raw: *mut sys::rdma_cm_id) -> bool {
        self.0.as_ptr() == raw
    }

    /// The peer's address of a connected id.
    pub(super) fn peer(&self) -> Option<SocketAddr> {
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

/// A protection domain on one device.
#[derive(Debug)]
pub(super) struct ProtectionDomain(NonNull<sys::ibv_pd>);

// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for ProtectionDomain {}
// SAFETY: as above.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    pub(super) fn new(device: NonNull<sys::ibv_context>) -> io::Result<Self> {
        // SAFETY: `device` is a live context (the listener's).
        NonNull::new(unsafe { sys::ibv_alloc_pd(device.as_ptr()) }).map(Self).ok_or_else(|| last_error("ibv_alloc_pd"))
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: every MR and QP of the domain was freed first.
        unsafe { sys::ibv_dealloc_pd(self.0.as_ptr()) };
    }
}

/// A memory registration: the buffers of one region, for the device.
#[derive(Debug)]
pub(super) struct MemoryRegistration(NonNull<sys::ibv_mr>);

// SAFETY: as for the domain.
unsafe impl Send for MemoryRegistration {}
// SAFETY: as above.
unsafe impl Sync for MemoryRegistration {}

impl MemoryRegistration {
    /// Registers the host memory of `region` (`None` if it has none) with
    /// `flags` (`ibv_access_flags` bits). The engine drops its drivers and
    /// tasks, and so this registration, before its regions.
    pub(super) fn of_region(pd: &ProtectionDomain, region: &Region, flags: u32) -> Option<io::Result<Self>> {
        let base = region.backing().host_base()?;
        let len = region.buf_size() * region.num_bufs() as usize;
        // SAFETY: the region's mapping outlives the registration (above); the domain is live.
        let mr = unsafe { sys::ibv_reg_mr(pd.0.as_ptr(), base.as_ptr().cast(), len, flags as i32) };
        Some(
            NonNull::new(mr)
                .map(Self)
                .ok_or_else(|| last_error(&format!("ibv_reg_mr of {len} bytes (memlock limit: ulimit -l)"))),
        )
    }

    pub(super) fn lkey(&self) -> u32 {
        // SAFETY: the registration is valid.
        unsafe { self.0.as_ref().lkey }
    }
}

impl Drop for MemoryRegistration {
    fn drop(&mut self) {
        // SAFETY: no queue pair that could still use it is alive (owners drop them first).
        unsafe { sys::ibv_dereg_mr(self.0.as_ptr()) };
    }
}

/// A completion queue.
#[derive(Debug)]
pub(super) struct CompletionQueue(NonNull<sys::ibv_cq>);

// SAFETY: each completion queue is polled by one task; verbs lock it anyway.
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    pub(super) fn new(device: NonNull<sys::ibv_context>, entries: u32) -> io::Result<Self> {
        // SAFETY: a live context; no completion channel, no vector.
        NonNull::new(unsafe { sys::ibv_create_cq(device.as_ptr(), entries as i32, null_mut(), null_mut(), 0) })
            .map(Self)
            .ok_or_else(|| last_error(&format!("ibv_create_cq of {entries} entries")))
    }

    /// Fills `into` with completions; how many.
    pub(super) fn poll(&self, into: &mut [sys::ibv_wc]) -> io::Result<usize> {
        // SAFETY: `into` has room for its length in completions.
        let n = unsafe { sys::ibv_poll_cq(self.0.as_ptr(), into.len() as i32, into.as_mut_ptr()) };
        usize::try_from(n).map_err(|_| io::Error::other("ibv_poll_cq failed"))
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: the queue pairs using it were destroyed first.
        unsafe { sys::ibv_destroy_cq(self.0.as_ptr()) };
    }
}

/// Creates `id`'s queue pair on `pd`: sends complete on `send_cq`, receives on `recv_cq`.
pub(super) fn create_queue_pair(
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
pub(super) fn post_receive(id: &CmId, wr_id: u64, addr: *mut u8, len: u32, lkey: u32) -> io::Result<()> {
    let mut sge = sys::ibv_sge { addr: addr as u64, length: len, lkey };
    // SAFETY: all-zero is a valid work request; its fields are set below.
    let mut wr: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    let mut bad: *mut sys::ibv_recv_wr = null_mut();
    // SAFETY: the id has a queue pair; the buffer lies in a live registration
    // and stays lent to the device until its completion.
    let rc = unsafe { sys::ibv_post_recv(id.0.as_ref().qp, &mut wr, &mut bad) };
    if rc != 0 { Err(io::Error::from_raw_os_error(rc)) } else { Ok(()) }
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
pub(super) fn accept(id: &CmId) -> io::Result<()> {
    let mut param = connection_parameters();
    // SAFETY: the id came from a connect request and has its queue pair.
    if unsafe { sys::rdma_accept(id.as_ptr(), &mut param) } != 0 {
        return Err(last_error("rdma_accept"));
    }
    Ok(())
}

/// Posts one signaled SEND of `len` bytes at `addr` (in `lkey`'s
/// registration), tagged `wr_id`, with `immediate` if given (host order).
pub(super) fn post_send(
    id: &CmId,
    wr_id: u64,
    (addr, len, lkey): (*const u8, u32, u32),
    immediate: Option<u32>,
) -> io::Result<()> {
    let mut sge = sys::ibv_sge { addr: addr as u64, length: len, lkey };
    // SAFETY: all-zero is a valid work request; its fields are set below.
    let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
    if let Some(immediate) = immediate {
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        wr.imm_data_invalidated_rkey_union.imm_data = immediate.to_be();
    }
    wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    let mut bad: *mut sys::ibv_send_wr = null_mut();
    // SAFETY: the id has a queue pair; the buffer lies in a live registration
    // and stays lent to the device until its completion.
    let rc = unsafe { sys::ibv_post_send(id.0.as_ref().qp, &mut wr, &mut bad) };
    if rc != 0 { Err(io::Error::from_raw_os_error(rc)) } else { Ok(()) }
}

/// Refuses a connect request on `id` (then dropped, which destroys it).
pub(super) fn reject(id: &CmId) {
    // SAFETY: the id came from a connect request; no private data.
    unsafe { sys::rdma_reject(id.as_ptr(), std::ptr::null(), 0) };
}

/// Moves `id`'s queue pair to the error state: the device stops using its
/// buffers and completes every outstanding work request as flushed.
pub(super) fn to_error(id: &CmId) {
    // SAFETY: all-zero attributes with the state set; only the state is modified.
    unsafe {
        let qp = id.0.as_ref().qp;
        if qp.is_null() {
            return;
        }
        let mut attr: sys::ibv_qp_attr = std::mem::zeroed();
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        sys::ibv_modify_qp(qp, &mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32);
    }
}

/// Starts disconnecting `id`; the peer and our channel see DISCONNECTED.
pub(super) fn disconnect(id: &CmId) {
    // SAFETY: the id is valid; disconnecting an id never connected only fails.
    unsafe { sys::rdma_disconnect(id.as_ptr()) };
}

/// The immediate a completed receive carried, in host order.
pub(super) fn immediate(wc: &sys::ibv_wc) -> Option<u32> {
    if wc.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 == 0 {
        return None;
    }
    // SAFETY: with IBV_WC_WITH_IMM set, the union holds the immediate (both members are u32).
    Some(u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }))
}

/// A zeroed completion array.
pub(super) fn completions<const N: usize>() -> [sys::ibv_wc; N] {
    // SAFETY: all-zero is a valid ibv_wc.
    unsafe { std::mem::zeroed() }
}

/// Receives write into local memory; nothing remote reads or writes it.
pub(super) const IBV_ACCESS_LOCAL_WRITE: sys::ibv_access_flags = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE;
pub(super) use sys::ibv_qp_type::IBV_QPT_RC;
pub(super) use sys::ibv_wc;
pub(super) use sys::ibv_wc_opcode::{IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM};
pub(super) use sys::ibv_wc_status::IBV_WC_SUCCESS;
pub(super) use sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
pub(super) use sys::rdma_cm_event_type as event;
