//! The RDMA objects a RoCE port owns, each freed on drop in the order the
//! verbs require: the only place this backend calls rdma-core. rdma-sys
//! gives the raw bindings; nothing on crates.io wraps `rdma_cm` and verbs
//! with owned handles over memory that is not its own, so these do.
//!
//! Here: what every port shares (domain, registrations, completion
//! queues, work requests); [`cm`] connects through `rdma_cm`;
//! [`queue_pair`] brings a queue pair up by hand for an instrument.

#![allow(unsafe_code)]

mod cm;
mod queue_pair;

use std::io;
use std::os::fd::AsRawFd;
use std::ptr::{NonNull, null_mut};

use daqiri_config::model::{MemoryAccess, TransportMode};
use rdma_sys as sys;

use crate::memory::{BufToken, Region};

pub(super) use cm::{
    CmEvent, CmId, EventChannel, accept, create_queue_pair, disconnect, post_receive, post_send, reject, to_error,
};
pub(super) use queue_pair::{DevicePort, QueuePair, Rtr};

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
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
    /// Registers `region` with the access its config lists: host memory by
    /// its address, GPU memory (`device`) as the dma-buf its driver exports.
    /// It sits at the device address `iova` where given (a ring a sender
    /// writes from address 0), else where the CPU or the GPU addresses it
    /// (see [`buffer_address`]). The engine drops its drivers and tasks, and
    /// so this registration, before its regions.
    pub(super) fn of_region(pd: &ProtectionDomain, region: &Region, iova: Option<u64>) -> io::Result<Self> {
        let len = region.buf_size() * region.num_bufs() as usize;
        let flags = access_flags(region.access()) as i32;
        if let Some(base) = region.backing().host_base() {
            // SAFETY: the region's mapping outlives the registration (above); the domain is live.
            let mr = unsafe {
                match iova {
                    None => sys::ibv_reg_mr(pd.0.as_ptr(), base.as_ptr().cast(), len, flags),
                    Some(iova) => sys::ibv_reg_mr_iova(pd.0.as_ptr(), base.as_ptr().cast(), len, iova, flags),
                }
            };
            let what = || format!("ibv_reg_mr of {len} bytes (memlock limit: ulimit -l)");
            return NonNull::new(mr).map(Self).ok_or_else(|| last_error(&what()));
        }
        let Some(exported) = region.backing().dma_buf() else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "memory neither the CPU nor a GPU driver addresses",
            ));
        };
        let fd = exported.map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.message))?;
        let device_base = region.backing().device_base().map_or(0, |base| base.address());
        // SAFETY: the dma-buf covers the region's pages from offset 0 (and
        // the registration keeps its own reference to it); the domain is live.
        let mr = unsafe {
            sys::ibv_reg_dmabuf_mr(pd.0.as_ptr(), 0, len, iova.unwrap_or(device_base), fd.as_raw_fd(), flags)
        };
        NonNull::new(mr).map(Self).ok_or_else(|| {
            last_error(&format!(
                "ibv_reg_dmabuf_mr of {len} bytes of GPU memory (the RDMA device or its driver registers no dma-buf?)"
            ))
        })
    }

    pub(super) fn lkey(&self) -> u32 {
        // SAFETY: the registration is valid.
        unsafe { self.0.as_ref().lkey }
    }

    /// The key a peer names in its RDMA WRITEs and READs.
    pub(super) fn rkey(&self) -> u32 {
        // SAFETY: the registration is valid.
        unsafe { self.0.as_ref().rkey }
    }
}

/// The address a work request names a buffer of `region` by, where
/// [`MemoryRegistration::of_region`] registered it: its host address, or
/// for GPU memory its address on the GPU.
pub(super) fn buffer_address(region: &Region, token: &BufToken) -> u64 {
    match region.backing().host_base() {
        Some(_) => region.bytes(token).as_ptr() as u64,
        None => region.device_segment(token, 0, region.buf_size()).map_or(0, |slice| slice.ptr().address()),
    }
}

/// The device access a region's `access` list grants: the device always
/// writes receives locally; `rdma_write` and `rdma_read` open it to peers.
fn access_flags(access: &[MemoryAccess]) -> u32 {
    use sys::ibv_access_flags as flag;
    access.iter().fold(flag::IBV_ACCESS_LOCAL_WRITE.0, |flags, a| {
        flags
            | match a {
                MemoryAccess::Local => 0,
                MemoryAccess::RdmaWrite => flag::IBV_ACCESS_REMOTE_WRITE.0,
                MemoryAccess::RdmaRead => flag::IBV_ACCESS_REMOTE_READ.0,
            }
    })
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

/// Posts one receive on `qp`, tagged `wr_id`: into `buffer` (address,
/// length, local key), or with no buffer at all, for a WRITE with
/// immediate, which lands where its sender wrote and consumes the receive
/// only for its completion.
fn post_receive_on(qp: *mut sys::ibv_qp, wr_id: u64, buffer: Option<(u64, u32, u32)>) -> io::Result<()> {
    let mut sge = buffer.map(|(addr, length, lkey)| sys::ibv_sge { addr, length, lkey });
    // SAFETY: all-zero is a valid work request; its fields are set below.
    let mut wr: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    if let Some(sge) = &mut sge {
        wr.sg_list = sge;
        wr.num_sge = 1;
    }
    let mut bad: *mut sys::ibv_recv_wr = null_mut();
    // SAFETY: the caller's queue pair is live; a buffer lies in a live
    // registration and stays lent to the device until its completion.
    let rc = unsafe { sys::ibv_post_recv(qp, &mut wr, &mut bad) };
    if rc != 0 { Err(io::Error::from_raw_os_error(rc)) } else { Ok(()) }
}

/// Moves `qp` to the error state: the device stops using its buffers and
/// completes every outstanding work request as flushed.
fn qp_to_error(qp: *mut sys::ibv_qp) {
    if qp.is_null() {
        return;
    }
    // SAFETY: all-zero attributes with the state set; only the state is
    // modified, on the caller's live queue pair.
    unsafe {
        let mut attr: sys::ibv_qp_attr = std::mem::zeroed();
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        sys::ibv_modify_qp(qp, &mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32);
    }
}

/// The immediate a completed receive carried, in host order.
pub(super) fn immediate(wc: &sys::ibv_wc) -> Option<u32> {
    if wc.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 == 0 {
        return None;
    }
    // SAFETY: with IBV_WC_WITH_IMM set, the union holds the immediate (both members are u32).
    Some(u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }))
}

/// The queue pair type of `transport`.
pub(super) fn qp_type(transport: TransportMode) -> sys::ibv_qp_type::Type {
    match transport {
        TransportMode::Rc => IBV_QPT_RC,
        TransportMode::Uc => IBV_QPT_UC,
    }
}

/// What a completion's status means, in rdma-core's words.
pub(super) fn status_text(status: sys::ibv_wc_status::Type) -> String {
    // SAFETY: returns a static C string for any status value.
    unsafe { std::ffi::CStr::from_ptr(sys::ibv_wc_status_str(status)) }.to_string_lossy().into_owned()
}

/// A zeroed completion array.
pub(super) fn completions<const N: usize>() -> [sys::ibv_wc; N] {
    // SAFETY: all-zero is a valid ibv_wc.
    unsafe { std::mem::zeroed() }
}

pub(super) use sys::ibv_qp_type::{IBV_QPT_RC, IBV_QPT_UC};
pub(super) use sys::ibv_wc;
pub(super) use sys::ibv_wc_opcode::{IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM};
pub(super) use sys::ibv_wc_status::IBV_WC_SUCCESS;
pub(super) use sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
pub(super) use sys::rdma_cm_event_type as event;
