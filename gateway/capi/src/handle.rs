//! `BurstParams`: the handle C holds for a burst, and the pool handles come from.
//!
//! Handles are made in chunks that are never freed, so any pointer C hands
//! back can be checked before it is used: one that is not in a chunk is not
//! ours, and a freed one is found freed. That turns DAQIRI's undefined
//! cases (a double free, a free after `send_tx_burst`, a burst used after
//! its free) into a status and a message. Freed handles queue up behind
//! every other spare one before reuse, so a stale pointer is caught unless
//! the program has since taken more bursts than the pool holds spares.

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

use crossbeam_queue::SegQueue;
use daqiri::{Burst, Error, Status};

use crate::rdma_request::TransportFields;

/// The fields DAQIRI's programs read (`burst->hdr.hdr.num_pkts`, ...);
/// c_api.h declares the same layout.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct BurstFields {
    /// Port the burst came from or goes to.
    pub port_id: u16,
    /// Queue id on that port.
    pub q_id: u16,
    /// Packets in the burst (1 for a reorder aggregate).
    pub num_pkts: u32,
    /// Segments per packet.
    pub num_segs: u32,
    /// Packets the burst can hold; for a reorder aggregate, the source packets in it.
    pub max_pkt: u32,
    /// `DAQIRI_BURST_FLAG_*`.
    pub burst_flags: u32,
}

/// `burst->hdr`: DAQIRI nests the fields one level further.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct BurstHeader {
    /// The fields.
    pub hdr: BurstFields,
}

/// Which calls a handle is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// From `get_rx_burst`.
    Rx,
    /// From `create_tx_burst_params` (or `create_burst_params`).
    Tx,
}

const FREE: u8 = 0;
const LIVE: u8 = 1;
/// An RDMA request posted to its connection: the library holds it until
/// `get_rx_burst` hands it back as its completion (rdma.rs).
const POSTED: u8 = 2;

/// One burst handle. C sees `hdr`, `transport` and `event` (c_api.h ends
/// the struct there); the rest is ours.
#[repr(C)]
#[derive(Debug)]
pub struct BurstParams {
    /// What the program reads.
    pub hdr: BurstHeader,
    /// What the program reads of an RDMA request or completion (the rest
    /// of `transport_hdr`, whose first fields are `hdr.hdr`'s).
    pub transport: TransportFields,
    /// The CUDA event a GPU reorder aggregate completes with; null otherwise.
    pub event: *mut c_void,
    state: AtomicU8,
    pub(crate) role: Role,
    /// The connection a TX burst is for (`set_connection_id`); 0 when unset.
    pub(crate) conn_id: usize,
    /// What `rdma_set_header` made of the burst: an RDMA request.
    pub(crate) rdma: Option<crate::rdma_request::Request>,
    /// The engine's burst: an RX burst's packets, or a TX burst's once
    /// `get_tx_packet_burst` filled it.
    pub(crate) burst: Option<Burst>,
    /// While an asynchronous file write holds the burst: that write's
    /// lending id (0 when none), so it gives the burst back only to the
    /// handle it came from, and only if the program has not freed it since.
    pub(crate) lent_to: u64,
}

// c_api.h's daqiri_gw_burst: `transport_hdr` starts with `hdr.hdr`'s fields
// and 4 reserved bytes, then [`TransportFields`]; `event` follows it.
const _: () = assert!(std::mem::offset_of!(BurstParams, transport) == 24);
const _: () = assert!(std::mem::offset_of!(BurstParams, event) == 152);

// SAFETY: the raw pointer is a CUDA event handle, usable from any thread;
// everything else is Send already.
unsafe impl Send for BurstParams {}

impl BurstParams {
    const fn spare() -> Self {
        Self {
            hdr: BurstHeader {
                hdr: BurstFields { port_id: 0, q_id: 0, num_pkts: 0, num_segs: 0, max_pkt: 0, burst_flags: 0 },
            },
            transport: TransportFields::NONE,
            event: std::ptr::null_mut(),
            state: AtomicU8::new(FREE),
            role: Role::Tx,
            conn_id: 0,
            rdma: None,
            burst: None,
            lent_to: 0,
        }
    }

    /// Writes what C reads of `burst` here: its header and CUDA event.
    pub(crate) fn describe(&mut self, burst: &Burst) {
        let segments = (0..burst.num_packets()).map(|i| burst.packet(i).num_segments()).max().unwrap_or(0);
        let reordered = burst.reorder_plan().is_some();
        self.hdr.hdr = BurstFields {
            port_id: burst.port_id(),
            q_id: burst.queue_id(),
            num_pkts: burst.num_packets() as u32,
            num_segs: segments as u32,
            max_pkt: if reordered { burst.source_packets() } else { burst.capacity() as u32 },
            burst_flags: burst.flags(),
        };
        self.event = cuda_event(burst);
    }

    /// The burst, or why there is none yet.
    pub(crate) fn burst(&self) -> daqiri::Result<&Burst> {
        self.burst.as_ref().ok_or_else(|| no_packets(self.role, self.lent_to))
    }

    /// The burst, mutably.
    pub(crate) fn burst_mut(&mut self) -> daqiri::Result<&mut Burst> {
        let (role, lent_to) = (self.role, self.lent_to);
        self.burst.as_mut().ok_or_else(|| no_packets(role, lent_to))
    }
}

#[cfg(feature = "cuda")]
fn cuda_event(burst: &Burst) -> *mut c_void {
    burst.cuda_event().map_or(std::ptr::null_mut(), |event| event.cu_event().cast())
}

#[cfg(not(feature = "cuda"))]
fn cuda_event(_burst: &Burst) -> *mut c_void {
    std::ptr::null_mut()
}

fn no_packets(role: Role, lent_to: u64) -> Error {
    match role {
        _ if lent_to != 0 => Error::new(
            Status::NotReady,
            "this burst is being written to a file (daqiri_write_*_to_file_async): poll or wait on its FileWriteHandle first",
        ),
        Role::Tx => Error::invalid("this TX burst has no packets yet: call get_tx_packet_burst first"),
        Role::Rx => Error::invalid("this burst holds no packets"),
    }
}

/// Handles per chunk.
const CHUNK: usize = 256;
/// Most chunks: a million handles, far beyond the bursts any config's
/// metadata pools let a program hold at once.
const MAX_CHUNKS: usize = 4096;

/// Spare handles, oldest freed first.
static SPARE: SegQueue<usize> = SegQueue::new();
/// Each chunk's first address, in the order they were made; read on every
/// handle lookup, so plain atomics rather than a shared list.
static CHUNK_STARTS: [AtomicUsize; MAX_CHUNKS] = [const { AtomicUsize::new(0) }; MAX_CHUNKS];
static CHUNKS_MADE: AtomicUsize = AtomicUsize::new(0);
/// Held while a chunk is added.
static GROWING: Mutex<()> = Mutex::new(());

/// A handle for `role`, fields cleared; `None` once the program holds
/// every handle the pool can make.
pub(crate) fn acquire(role: Role) -> Option<&'static mut BurstParams> {
    loop {
        if let Some(address) = SPARE.pop() {
            let handle = at(address);
            handle.role = role;
            handle.state.store(LIVE, Ordering::Release);
            return Some(handle);
        }
        if !grow() {
            return None;
        }
    }
}

/// Why no handle was given: the program holds them all.
pub(crate) fn exhausted() -> Error {
    Error::new(
        Status::NoFreeBurstBuffers,
        format!("the program holds {} bursts, every handle there is: free bursts it is done with", CHUNK * MAX_CHUNKS),
    )
}

/// Returns a handle to the pool, releasing its burst; false when it was
/// already free (a double free, which changes nothing).
pub(crate) fn release(handle: &mut BurstParams) -> bool {
    if handle.state.swap(FREE, Ordering::AcqRel) != LIVE {
        return false;
    }
    handle.burst = None;
    handle.lent_to = 0;
    handle.hdr = BurstHeader::default();
    handle.transport = TransportFields::NONE;
    handle.event = std::ptr::null_mut();
    handle.conn_id = 0;
    handle.rdma = None;
    SPARE.push(std::ptr::from_mut(handle) as usize);
    true
}

/// The live handle behind `pointer`, or an error naming what is wrong with
/// it: null, not a burst of this library, or already freed.
pub(crate) fn resolve(pointer: *mut BurstParams) -> daqiri::Result<&'static mut BurstParams> {
    if pointer.is_null() {
        return Err(Error::new(Status::NullPtr, "the burst is a null pointer"));
    }
    let address = pointer as usize;
    let size = std::mem::size_of::<BurstParams>();
    let made = CHUNKS_MADE.load(Ordering::Acquire);
    let ours = CHUNK_STARTS[..made].iter().any(|start| {
        let offset = address.wrapping_sub(start.load(Ordering::Relaxed));
        offset < CHUNK * size && offset.is_multiple_of(size)
    });
    if !ours {
        return Err(Error::invalid(format!(
            "{pointer:p} is not a burst of this library: pass what get_rx_burst or create_tx_burst_params returned"
        )));
    }
    let handle = at(address);
    match handle.state.load(Ordering::Acquire) {
        LIVE => Ok(handle),
        POSTED => Err(Error::invalid(
            "this RDMA request is posted: it comes back from get_rx_burst(conn_id) once the device completes it",
        )),
        _ => Err(Error::invalid(
            "this burst was already freed (or handed to send_tx_burst, which frees it): it must not be used again",
        )),
    }
}

/// Takes a live handle from the program's hands until [`complete`]: its address.
pub(crate) fn post(handle: &mut BurstParams) -> usize {
    handle.state.store(POSTED, Ordering::Release);
    std::ptr::from_mut(handle) as usize
}

/// Gives the program back the posted handle at `address`, as a completion.
pub(crate) fn complete(address: usize) -> &'static mut BurstParams {
    let handle = at(address);
    let was = handle.state.swap(LIVE, Ordering::AcqRel);
    debug_assert_eq!(was, POSTED, "only a posted handle completes");
    handle
}

/// Frees a posted handle whose completion will never come (its connection
/// was replaced, or the engine stopped), with whatever it holds.
pub(crate) fn discard(address: usize) {
    release(complete(address));
}

/// Lends the handle's burst to an asynchronous write: takes it out and
/// marks the handle, returning the burst and the lending id.
pub(crate) fn lend(handle: &mut BurstParams) -> daqiri::Result<(usize, u64, Burst)> {
    static LENDS: AtomicU64 = AtomicU64::new(1);
    let burst = handle.burst.take().ok_or_else(|| no_packets(handle.role, handle.lent_to))?;
    let id = LENDS.fetch_add(1, Ordering::Relaxed);
    handle.lent_to = id;
    Ok((std::ptr::from_mut(handle) as usize, id, burst))
}

/// Gives a lent burst back to the handle at `address` if that handle is
/// still live and still lent to `id`; otherwise the program freed it
/// meanwhile, and the burst is dropped, its packets going back now.
pub(crate) fn give_back(address: usize, id: u64, burst: Burst) {
    let handle = at(address);
    if handle.state.load(Ordering::Acquire) == LIVE && handle.lent_to == id {
        handle.burst = Some(burst);
        handle.lent_to = 0;
    }
}

/// The handle at a checked address.
fn at(address: usize) -> &'static mut BurstParams {
    // SAFETY: `address` is an element of a chunk (from SPARE, or checked
    // against CHUNKS by resolve); chunks are leaked, so it lives for the
    // program. Exclusive use is the C contract: one thread works on a burst
    // at a time, as in DAQIRI.
    unsafe { &mut *(address as *mut BurstParams) }
}

/// Adds a chunk of spare handles; false when every chunk is made.
fn grow() -> bool {
    let _growing = GROWING.lock().unwrap_or_else(|e| e.into_inner());
    if !SPARE.is_empty() {
        return true;
    }
    let made = CHUNKS_MADE.load(Ordering::Relaxed);
    if made == MAX_CHUNKS {
        return false;
    }
    let chunk: &'static mut [BurstParams] = Box::leak((0..CHUNK).map(|_| BurstParams::spare()).collect());
    CHUNK_STARTS[made].store(chunk.as_ptr() as usize, Ordering::Relaxed);
    // Published after its start: a lookup that sees the count sees the chunk.
    CHUNKS_MADE.store(made + 1, Ordering::Release);
    for handle in chunk {
        SPARE.push(std::ptr::from_mut(handle) as usize);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_handle_is_refused_and_a_second_free_changes_nothing() {
        let handle = acquire(Role::Tx).unwrap();
        let pointer = std::ptr::from_mut(handle);
        assert!(resolve(pointer).is_ok());
        assert!(release(resolve(pointer).unwrap()));
        let error = resolve(pointer).unwrap_err();
        assert_eq!(error.status, Status::InvalidParameter);
        assert!(error.detail().contains("already freed"), "{}", error.detail());
        assert!(!release(at(pointer as usize)));
    }

    #[test]
    fn pointers_that_are_not_handles_are_refused_by_name() {
        let mut local = BurstParams::spare();
        let error = resolve(&mut local).unwrap_err();
        assert!(error.detail().contains("not a burst of this library"), "{}", error.detail());
        assert_eq!(resolve(std::ptr::null_mut()).unwrap_err().status, Status::NullPtr);
        let handle = acquire(Role::Rx).unwrap();
        let inside = (std::ptr::from_mut(handle) as usize + 4) as *mut BurstParams;
        assert!(resolve(inside).is_err());
        release(handle);
    }
}
