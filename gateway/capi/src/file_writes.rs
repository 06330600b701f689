//! Asynchronous file writes: DAQIRI's `daqiri_write_raw_to_file_async`,
//! `daqiri_write_pcap_to_file_async` and the `FileWriteHandle` calls.
//!
//! The burst moves from its handle to a writer thread (the engine's
//! `FileWriteHandle`) and comes back when the program sees the write end
//! (poll or wait). Meanwhile calls on the burst answer `NOT_READY` naming
//! the write, and a program that frees it early frees nothing the writer
//! reads: the packets go back when the write ends. A write handle is an id
//! looked up in a table, so a destroyed or foreign one is an error, not a
//! crash.

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use daqiri::writer::{FileWriteHandle, PcapResolution, PcapWriter, WriteSummary};
use daqiri::{Error, Status};

use crate::handle::{self, BurstParams};
use crate::status::{SUCCESS, fail, status_of};
use crate::writers::{pcap_path, raw_writer, udp_local};

/// `daqiri_gw_file_write_status` (c_api.h): DAQIRI's `FileWriteStatus`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct FileWriteStatus {
    /// Packets written.
    pub completed_packets: u32,
    /// Packets not written (the write failed before them).
    pub failed_packets: u32,
    /// Bytes written to storage.
    pub bytes_written: u64,
}

/// The opaque handle C holds: an id in [`WRITES`], never dereferenced.
#[repr(C)]
pub struct FileWrite {
    _opaque: [u8; 0],
}

/// One write, from submission to destroy.
struct Write {
    /// The burst handle it came from and the lending id (see `handle::lend`).
    from: (usize, u64),
    packets: u32,
    state: State,
}

enum State {
    Running(FileWriteHandle),
    Ended(daqiri::Result<WriteSummary>),
}

static WRITES: LazyLock<Mutex<HashMap<usize, Write>>> = LazyLock::new(Mutex::default);
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

fn writes() -> MutexGuard<'static, HashMap<usize, Write>> {
    WRITES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a write of the burst behind `burst` and stores its handle in `*out`.
fn submit(
    call: &str,
    burst: *mut BurstParams,
    out: *mut *mut FileWrite,
    start: impl FnOnce(daqiri::Burst) -> daqiri::Result<FileWriteHandle>,
) -> i32 {
    if out.is_null() {
        return fail(call, Error::new(Status::NullPtr, "handle (the FileWriteHandle** out-parameter) is null"));
    }
    let submitted = handle::resolve(burst).and_then(|h| {
        let packets = h.burst()?.num_packets() as u32;
        let (address, id, lent) = handle::lend(h)?;
        // No writer thread: its packets went back with the burst; the
        // handle is left empty, to be freed.
        let state = State::Running(start(lent).inspect_err(|_| h.lent_to = 0)?);
        let key = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        writes().insert(key, Write { from: (address, id), packets, state });
        // SAFETY: `out` is non-null (checked above) and points to the
        // program's FileWriteHandle* variable, as the call's contract says.
        unsafe { *out = key as *mut FileWrite };
        Ok(())
    });
    status_of(call, submitted)
}

/// As `daqiri_gw_write_raw_to_file`, on a writer thread.
///
/// # Safety
/// `absolute_path` and `file_prefix` are NUL-terminated strings; `handle`
/// points to a writable `daqiri_gw_file_write*`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_write_raw_to_file_async(
    burst: *mut BurstParams,
    absolute_path: *const c_char,
    file_prefix: *const c_char,
    packet_data_offset: usize,
    handle: *mut *mut FileWrite,
) -> i32 {
    let call = "daqiri_write_raw_to_file_async";
    match raw_writer(absolute_path, file_prefix, packet_data_offset) {
        Ok(writer) => submit(call, burst, handle, |b| writer.write_async(b)),
        Err(e) => fail(call, e),
    }
}

/// As `daqiri_gw_write_pcap_to_file`, on a writer thread.
///
/// # Safety
/// As [`daqiri_gw_write_raw_to_file_async`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_write_pcap_to_file_async(
    burst: *mut BurstParams,
    absolute_path: *const c_char,
    file_prefix: *const c_char,
    handle: *mut *mut FileWrite,
) -> i32 {
    let call = "daqiri_write_pcap_to_file_async";
    let target = pcap_path(absolute_path, file_prefix)
        .and_then(|path| Ok((path, handle::resolve(burst).and_then(|h| udp_local(h.burst()?))?)));
    match target {
        Ok((path, Some(local))) => {
            submit(call, burst, handle, |b| PcapWriter::append_as_udp_async(&path, PcapResolution::Micros, b, local))
        }
        Ok((path, None)) => submit(call, burst, handle, |b| PcapWriter::append_async(&path, PcapResolution::Micros, b)),
        Err(e) => fail(call, e),
    }
}

/// Whether the write ended (waiting for it when `block`): `None` while it
/// runs. An ended write has given its burst back.
fn settle(write: &mut Write, block: bool) -> Option<&daqiri::Result<WriteSummary>> {
    if let State::Running(running) = &write.state {
        if !block && !running.is_finished() {
            return None;
        }
        let State::Running(running) = std::mem::replace(&mut write.state, State::Ended(Ok(WriteSummary::default())))
        else {
            unreachable!("matched above")
        };
        let (burst, result) = running.wait();
        handle::give_back(write.from.0, write.from.1, burst);
        write.state = State::Ended(result);
    }
    match &write.state {
        State::Ended(result) => Some(result),
        State::Running(_) => None,
    }
}

/// Polls or waits on a write, filling `*status` when given. A wait blocks
/// with the write out of the table, so other threads' writes are not held
/// up by the table's lock meanwhile (a write handle is its program
/// thread's, as a burst is).
fn check(call: &str, handle: *mut FileWrite, status: *mut FileWriteStatus, block: bool) -> i32 {
    let key = handle as usize;
    let Some(mut write) = writes().remove(&key) else {
        return fail(call, unknown(handle));
    };
    let code = report(call, &mut write, status, block);
    writes().insert(key, write);
    code
}

/// The write's status code, settling it first (waiting when `block`).
fn report(call: &str, write: &mut Write, status: *mut FileWriteStatus, block: bool) -> i32 {
    let packets = write.packets;
    let (code, summary) = match settle(write, block) {
        None => return fail(call, Error::new(Status::NotReady, "the write is still running")),
        Some(Ok(summary)) => (SUCCESS, *summary),
        Some(Err(e)) => (fail(call, e.clone()), WriteSummary::default()),
    };
    if !status.is_null() {
        let completed = summary.packets.min(u64::from(packets)) as u32;
        let report = FileWriteStatus {
            completed_packets: completed,
            failed_packets: packets - completed,
            bytes_written: summary.bytes,
        };
        // SAFETY: non-null, and points to the program's FileWriteStatus.
        unsafe { *status = report };
    }
    code
}

fn unknown(handle: *mut FileWrite) -> Error {
    Error::invalid(format!(
        "{handle:p} is no file write of this library, or was destroyed: pass what daqiri_write_*_to_file_async returned"
    ))
}

/// `SUCCESS` once the write ended well, `NOT_READY` while it runs, or the
/// write's error; `status` (may be null) gets the counts.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_file_write_poll(handle: *mut FileWrite, status: *mut FileWriteStatus) -> i32 {
    check("daqiri_file_write_poll", handle, status, false)
}

/// Waits for the write to end; then as [`daqiri_gw_file_write_poll`].
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_file_write_wait(handle: *mut FileWrite, status: *mut FileWriteStatus) -> i32 {
    check("daqiri_file_write_wait", handle, status, true)
}

/// Waits for the write if it still runs, gives its burst back and forgets
/// the handle (using it again is an error).
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_file_write_destroy(handle: *mut FileWrite) -> i32 {
    let call = "daqiri_file_write_destroy";
    let removed = writes().remove(&(handle as usize));
    let Some(mut write) = removed else { return fail(call, unknown(handle)) };
    settle(&mut write, true);
    SUCCESS
}
