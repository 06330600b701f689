//! DAQIRI's S3 raw writer calls: `daqiri_s3_writer_create`,
//! `daqiri_write_raw_to_s3_objects_async`, `daqiri_s3_write_poll` / `wait`
//! / `destroy`, `daqiri_s3_writer_destroy`, over the engine's `S3Writer`.
//!
//! The packets are staged before the submit returns, so the burst stays
//! the program's (to free at once, as DAQIRI's documentation shows). Writers
//! and writes are ids in tables, never dereferenced: a destroyed or foreign
//! one is `INVALID_PARAMETER`, not a crash. A write keeps its writer's
//! threads, so destroying the writer first does not stop it.

use std::collections::HashMap;
use std::ffi::c_char;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use daqiri::writer::{S3Config, S3Upload, S3UploadStatus, S3Writer};
use daqiri::{Error, Status};

use crate::handle::{self, BurstParams};
use crate::lifecycle::text;
use crate::status::{SUCCESS, fail, status_of};

/// `daqiri_gw_s3_write_status` (c_api.h): DAQIRI's `S3WriteStatus`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct S3WriteStatus {
    /// Objects the store acknowledged.
    pub completed_objects: u32,
    /// Objects that failed after their retries.
    pub failed_objects: u32,
    /// Bytes of the acknowledged objects.
    pub bytes_uploaded: u64,
}

/// The opaque writer C holds: an id in [`WRITERS`].
#[repr(C)]
#[derive(Debug)]
pub struct S3WriterHandle {
    _opaque: [u8; 0],
}

/// The opaque write C holds: an id in [`UPLOADS`].
#[repr(C)]
#[derive(Debug)]
pub struct S3WriteHandle {
    _opaque: [u8; 0],
}

static WRITERS: LazyLock<Mutex<HashMap<usize, S3Writer>>> = LazyLock::new(Mutex::default);
static UPLOADS: LazyLock<Mutex<HashMap<usize, S3Upload>>> = LazyLock::new(Mutex::default);
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

fn table<K: Eq + Hash, V>(table: &'static Mutex<HashMap<K, V>>) -> MutexGuard<'static, HashMap<K, V>> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stores `value` under a fresh id and writes the id to `*out`.
fn register<V, H>(into: &'static Mutex<HashMap<usize, V>>, value: V, out: *mut *mut H) {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    table(into).insert(id, value);
    // SAFETY: the callers checked `out` is non-null; it points to the
    // program's handle variable, as the call's contract says.
    unsafe { *out = id as *mut H };
}

/// DAQIRI's `S3WriterConfig` fields, as C passes them.
///
/// # Safety
/// `bucket`, `region` and `endpoint_override` are NUL-terminated strings
/// (`endpoint_override` may be empty); `writer` points to a writable
/// `daqiri_gw_s3_writer*`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_s3_writer_create(
    bucket: *const c_char,
    region: *const c_char,
    endpoint_override: *const c_char,
    path_style: bool,
    max_inflight_uploads: u32,
    max_staged_bytes: u64,
    writer: *mut *mut S3WriterHandle,
) -> i32 {
    let call = "daqiri_s3_writer_create";
    if writer.is_null() {
        return fail(call, Error::new(Status::NullPtr, "writer (the S3Writer** out-parameter) is null"));
    }
    let made = (|| {
        let mut config = S3Config::new(text("bucket", bucket)?, text("region", region)?);
        let endpoint = text("endpoint_override", endpoint_override)?;
        config.endpoint = (!endpoint.is_empty()).then(|| endpoint.to_owned());
        config.path_style = path_style;
        config.max_inflight_uploads = max_inflight_uploads;
        config.max_staged_bytes = max_staged_bytes;
        S3Writer::new(config)
    })();
    match made {
        Ok(made) => {
            register(&WRITERS, made, writer);
            SUCCESS
        }
        Err(e) => fail(call, e),
    }
}

/// Stages every packet of the burst from `packet_data_offset` on and starts
/// their uploads to `<object_prefix>_<index>`; the burst stays the
/// program's.
///
/// # Safety
/// `object_prefix` is a NUL-terminated string; `handle` points to a
/// writable `daqiri_gw_s3_write*`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_write_raw_to_s3_objects_async(
    writer: *mut S3WriterHandle,
    burst: *mut BurstParams,
    object_prefix: *const c_char,
    packet_data_offset: u64,
    handle: *mut *mut S3WriteHandle,
) -> i32 {
    let call = "daqiri_write_raw_to_s3_objects_async";
    if handle.is_null() {
        return fail(call, Error::new(Status::NullPtr, "handle (the S3WriteHandle** out-parameter) is null"));
    }
    let started = (|| {
        let prefix = text("object_prefix", object_prefix)?;
        let writer = table(&WRITERS).get(&(writer as usize)).cloned().ok_or_else(|| unknown_writer(writer))?;
        let burst = handle::resolve(burst)?;
        let offset = usize::try_from(packet_data_offset)
            .map_err(|_| Error::invalid(format!("packet_data_offset {packet_data_offset} is past any packet")))?;
        writer.write_raw_objects(burst.burst()?, prefix, offset)
    })();
    match started {
        Ok(upload) => {
            register(&UPLOADS, upload, handle);
            SUCCESS
        }
        Err(e) => fail(call, e),
    }
}

/// `SUCCESS` once every object is uploaded, `NOT_READY` while some are in
/// flight, else the first failure; `status` (may be null) gets the counts.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_s3_write_poll(handle: *mut S3WriteHandle, status: *mut S3WriteStatus) -> i32 {
    let call = "daqiri_s3_write_poll";
    let uploads = table(&UPLOADS);
    let Some(upload) = uploads.get(&(handle as usize)) else { return fail(call, unknown_write(handle)) };
    let finished = upload.is_finished();
    report(&upload.status(), status);
    if !finished {
        return fail(call, Error::new(Status::NotReady, "the S3 uploads are still in flight"));
    }
    status_of(call, upload.outcome().map(drop))
}

/// Waits until every object is uploaded or failed; then as
/// [`daqiri_gw_s3_write_poll`]. Other threads' calls are not held up
/// meanwhile.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_s3_write_wait(handle: *mut S3WriteHandle, status: *mut S3WriteStatus) -> i32 {
    let call = "daqiri_s3_write_wait";
    let key = handle as usize;
    // Out of the table while it waits (a write is its program thread's, as a burst is).
    let Some(upload) = table(&UPLOADS).remove(&key) else { return fail(call, unknown_write(handle)) };
    let waited = upload.wait();
    report(&upload.status(), status);
    table(&UPLOADS).insert(key, upload);
    status_of(call, waited.map(drop))
}

/// Waits for the uploads if any are in flight (their staged bytes go only
/// then) and forgets the handle.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_s3_write_destroy(handle: *mut S3WriteHandle) -> i32 {
    let Some(upload) = table(&UPLOADS).remove(&(handle as usize)) else {
        return fail("daqiri_s3_write_destroy", unknown_write(handle));
    };
    let _ = upload.wait();
    SUCCESS
}

/// Forgets the writer; writes already submitted go on.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_s3_writer_destroy(writer: *mut S3WriterHandle) -> i32 {
    match table(&WRITERS).remove(&(writer as usize)) {
        Some(_) => SUCCESS,
        None => fail("daqiri_s3_writer_destroy", unknown_writer(writer)),
    }
}

fn report(counts: &S3UploadStatus, status: *mut S3WriteStatus) {
    if !status.is_null() {
        let counts = S3WriteStatus {
            completed_objects: counts.completed_objects,
            failed_objects: counts.failed_objects,
            bytes_uploaded: counts.bytes_uploaded,
        };
        // SAFETY: non-null, and points to the program's S3WriteStatus.
        unsafe { *status = counts };
    }
}

fn unknown_writer(writer: *mut S3WriterHandle) -> Error {
    Error::invalid(format!(
        "{writer:p} is no S3 writer of this library, or was destroyed: pass what daqiri_s3_writer_create gave"
    ))
}

fn unknown_write(handle: *mut S3WriteHandle) -> Error {
    Error::invalid(format!(
        "{handle:p} is no S3 write of this library, or was destroyed: pass what daqiri_write_raw_to_s3_objects_async gave"
    ))
}
