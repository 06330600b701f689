//! DAQIRI's S3 raw writer: each packet of a burst to an object of its own,
//! `<prefix>_<index>`, its logical bytes (every segment in order, GPU ones
//! copied to the host) from `packet_data_offset` on, one `PutObject` each.
//! The bytes are staged in the writer's memory before the call returns, so
//! the burst can go back at once; uploads run on the bucket's threads, at
//! most `max_inflight_uploads` at a time, and an [`S3Upload`] says how
//! they went.
//!
//! Beyond DAQIRI: the staging is bounded across every upload in flight (not
//! per call), so a writer never holds more than `max_staged_bytes`; a store
//! that stops answering fails the upload by `retry_deadline` (counted, with
//! the store's reason) instead of hanging it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path;

use super::{S3Bucket, S3Config, object_path};
use crate::writer::{after_offset, host_packets};
use crate::{Burst, Error, Result, Status};

/// The largest object one `PutObject` may carry (S3's limit).
pub const MAX_SINGLE_PUT_BYTES: u64 = 5 << 30;

/// Uploads bursts' packets as S3 objects (DAQIRI's `S3Writer`).
#[derive(Debug, Clone)]
pub struct S3Writer {
    bucket: S3Bucket,
    staged: Arc<AtomicU64>,
}

impl S3Writer {
    /// A writer for `config`; no request is made yet (wrong credentials or
    /// a missing bucket show as failed objects, with the store's reason).
    pub fn new(config: S3Config) -> Result<Self> {
        Ok(Self { bucket: S3Bucket::connect(config)?, staged: Arc::default() })
    }

    /// The writer's config.
    pub fn config(&self) -> &S3Config {
        self.bucket.config()
    }

    /// Stages every packet of `burst` (from `packet_data_offset` on) and
    /// starts their uploads to `<prefix>_<index>`; the burst is not needed
    /// after this returns. Refused whole, nothing uploaded: an empty or
    /// unrepresentable prefix (`INVALID_PARAMETER`), an object over 5 GiB
    /// (`NOT_SUPPORTED`), more bytes than `max_staged_bytes` leaves room
    /// for (`NO_SPACE_AVAILABLE`), a GPU segment without CUDA.
    pub fn write_raw_objects(&self, burst: &Burst, prefix: &str, packet_data_offset: usize) -> Result<S3Upload> {
        if prefix.is_empty() {
            return Err(Error::invalid("S3 object prefix is empty"));
        }
        let packets = host_packets(burst, "S3 writer")?;
        let mut objects = Vec::with_capacity(packets.len());
        let mut total = 0u64;
        for (index, pieces) in packets.iter().enumerate() {
            let key = format!("{prefix}_{index}");
            let path = object_path(&key)?;
            let len = pieces.iter().map(|p| p.len() as u64).sum::<u64>().saturating_sub(packet_data_offset as u64);
            if len > MAX_SINGLE_PUT_BYTES {
                return Err(Error::new(
                    Status::NotSupported,
                    format!("packet {index} makes a {len}-byte object; one PutObject carries at most 5 GiB"),
                ));
            }
            total += len;
            objects.push((path, len, pieces));
        }
        self.reserve(total)?;
        let staged: Vec<(Path, Bytes)> = objects
            .into_iter()
            .map(|(path, len, pieces)| {
                let mut bytes = Vec::with_capacity(len as usize);
                after_offset(pieces, packet_data_offset).for_each(|piece| bytes.extend_from_slice(piece));
                (path, Bytes::from(bytes))
            })
            .collect();
        Ok(self.upload(staged))
    }

    /// Counts `bytes` as staged, or refuses them when over the bound.
    fn reserve(&self, bytes: u64) -> Result<()> {
        let limit = self.config().max_staged_bytes;
        self.staged
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&after| after <= limit)
            })
            .map(drop)
            .map_err(|held| {
                Error::new(
                    Status::NoSpaceAvailable,
                    format!(
                        "S3 writer: {bytes} bytes to stage, {held} staged by uploads in flight, max_staged_bytes {limit}; wait for uploads to end"
                    ),
                )
            })
    }

    fn upload(&self, objects: Vec<(Path, Bytes)>) -> S3Upload {
        let progress = Arc::new(Progress::default());
        let total = objects.len() as u32;
        let (store, staged, task) = (Arc::clone(&self.bucket.store), Arc::clone(&self.staged), Arc::clone(&progress));
        let inflight = self.config().max_inflight_uploads as usize;
        self.bucket.runtime.spawn(async move {
            futures::stream::iter(objects)
                .map(|(path, bytes)| {
                    let store = Arc::clone(&store);
                    async move {
                        let len = bytes.len() as u64;
                        let sent = store.put(&path, bytes.into()).await;
                        (path, len, sent)
                    }
                })
                .buffer_unordered(inflight)
                .for_each(|(path, len, sent)| {
                    staged.fetch_sub(len, Ordering::AcqRel);
                    task.record(&path, len, sent.map(drop));
                    futures::future::ready(())
                })
                .await;
            task.finish();
        });
        S3Upload { progress, objects: total, _runtime: Arc::clone(&self.bucket.runtime) }
    }
}

/// How an upload stands (DAQIRI's `S3WriteStatus`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct S3UploadStatus {
    /// Objects the store acknowledged.
    pub completed_objects: u32,
    /// Objects that failed after their retries.
    pub failed_objects: u32,
    /// Bytes of the acknowledged objects.
    pub bytes_uploaded: u64,
}

/// One [`S3Writer::write_raw_objects`] call's uploads (DAQIRI's
/// `S3WriteHandle`). It keeps the writer's threads alive, so dropping the
/// writer does not stop it; dropping it does not cancel the uploads.
#[derive(Debug)]
pub struct S3Upload {
    progress: Arc<Progress>,
    objects: u32,
    _runtime: Arc<tokio::runtime::Runtime>,
}

impl S3Upload {
    /// Objects this upload has.
    pub fn objects(&self) -> u32 {
        self.objects
    }

    /// Counts so far.
    pub fn status(&self) -> S3UploadStatus {
        self.progress.status()
    }

    /// Whether every object was acknowledged or failed.
    pub fn is_finished(&self) -> bool {
        *self.progress.finished.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every object was acknowledged or failed; an error
    /// (`GENERIC_FAILURE`) when any failed, naming the first and the store's reason.
    pub fn wait(&self) -> Result<S3UploadStatus> {
        let finished = self.progress.finished.lock().unwrap_or_else(|e| e.into_inner());
        drop(self.progress.ended.wait_while(finished, |f| !*f).unwrap_or_else(|e| e.into_inner()));
        self.outcome()
    }

    /// The counts once finished, or the first failure.
    pub fn outcome(&self) -> Result<S3UploadStatus> {
        let status = self.status();
        match &*self.progress.first_failure.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(reason) => Err(Error::new(
                Status::GenericFailure,
                format!("{} of {} S3 objects failed; the first: {reason}", status.failed_objects, self.objects),
            )),
            None => Ok(status),
        }
    }
}

#[derive(Debug, Default)]
struct Progress {
    completed: AtomicU32,
    failed: AtomicU32,
    bytes: AtomicU64,
    first_failure: Mutex<Option<String>>,
    finished: Mutex<bool>,
    ended: Condvar,
}

impl Progress {
    fn record(&self, path: &Path, len: u64, sent: std::result::Result<(), object_store::Error>) {
        match sent {
            Ok(()) => {
                self.bytes.fetch_add(len, Ordering::Relaxed);
                self.completed.fetch_add(1, Ordering::Release);
            }
            Err(e) => {
                self.first_failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(format!("{path}: {e}"));
                self.failed.fetch_add(1, Ordering::Release);
            }
        }
    }

    fn finish(&self) {
        *self.finished.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.ended.notify_all();
    }

    fn status(&self) -> S3UploadStatus {
        S3UploadStatus {
            completed_objects: self.completed.load(Ordering::Acquire),
            failed_objects: self.failed.load(Ordering::Acquire),
            bytes_uploaded: self.bytes.load(Ordering::Relaxed),
        }
    }
}
