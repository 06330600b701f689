//! DAQIRI's S3 raw writer: each packet of a burst to an object of its own,
//! `<prefix>_<index>`, its logical bytes (every segment in order, GPU ones
//! copied to the host) from `packet_data_offset` on, one `PutObject` each.
//! The bytes are staged in the writer's memory before the call returns, so
//! the burst can go back at once; uploads run on the writer's own runtime,
//! at most `max_inflight_uploads` at a time, and an [`S3Upload`] says how
//! they went.
//!
//! Beyond DAQIRI: the staging is bounded across every upload in flight (not
//! per call), so a writer never holds more than `max_staged_bytes`; each
//! request is retried with backoff until `retry_deadline`, so a store that
//! stops answering fails the upload (counted, with the store's reason)
//! instead of hanging it. Credentials come from the environment as AWS's
//! tools read it (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/
//! `AWS_SESSION_TOKEN`, a web-identity token file with `AWS_ROLE_ARN` as
//! Kubernetes service accounts get them, ECS and EC2 instance metadata).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, RetryConfig};

use super::host_packets;
use crate::{Burst, Error, Result, Status};

/// The largest object one `PutObject` may carry (S3's limit).
pub const MAX_SINGLE_PUT_BYTES: u64 = 5 << 30;

/// Where and how an [`S3Writer`] uploads (DAQIRI's `S3WriterConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    /// The bucket objects go to.
    pub bucket: String,
    /// Its region (S3-compatible stores often take any, e.g. `us-east-1`).
    pub region: String,
    /// An S3-compatible store's URL (`http://host:port`); AWS's when empty.
    pub endpoint: Option<String>,
    /// Path-style requests (`endpoint/bucket/key`) instead of a bucket host name.
    pub path_style: bool,
    /// Most `PutObject` requests one upload has in flight.
    pub max_inflight_uploads: u32,
    /// Most bytes the writer holds staged, over every upload in flight.
    pub max_staged_bytes: u64,
    /// How long a request is retried before its object counts as failed.
    pub retry_deadline: Duration,
}

impl S3Config {
    /// DAQIRI's defaults for `bucket` in `region`: 8 uploads in flight, 1 GiB staged.
    pub fn new(bucket: &str, region: &str) -> Self {
        Self {
            bucket: bucket.to_owned(),
            region: region.to_owned(),
            endpoint: None,
            path_style: false,
            max_inflight_uploads: 8,
            max_staged_bytes: 1 << 30,
            retry_deadline: Duration::from_secs(30),
        }
    }
}

/// Uploads bursts' packets as S3 objects (DAQIRI's `S3Writer`).
#[derive(Debug, Clone)]
pub struct S3Writer {
    store: Arc<AmazonS3>,
    runtime: Arc<tokio::runtime::Runtime>,
    staged: Arc<AtomicU64>,
    config: Arc<S3Config>,
}

impl S3Writer {
    /// A writer for `config`; no request is made yet (wrong credentials or
    /// a missing bucket show as failed objects, with the store's reason).
    pub fn new(config: S3Config) -> Result<Self> {
        let refuse = |what: &str| Err(Error::invalid(format!("S3 writer: {what}")));
        if config.bucket.is_empty() {
            return refuse("bucket is empty");
        }
        if config.region.is_empty() {
            return refuse("region is empty");
        }
        if config.max_inflight_uploads == 0 {
            return refuse("max_inflight_uploads is 0; at least one upload must run");
        }
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_virtual_hosted_style_request(!config.path_style)
            .with_retry(RetryConfig { retry_timeout: config.retry_deadline, ..RetryConfig::default() })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(config.retry_deadline)
                    .with_allow_http(config.endpoint.as_deref().is_some_and(|e| e.starts_with("http://"))),
            );
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let store =
            builder.build().map_err(|e| Error::invalid(format!("S3 writer for bucket {}: {e}", config.bucket)))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3-upload")
            .enable_all()
            .build()
            .map_err(|e| Error::io(Status::InternalError, "cannot start the S3 writer's threads", e))?;
        Ok(Self {
            store: Arc::new(store),
            runtime: Arc::new(runtime),
            staged: Arc::default(),
            config: Arc::new(config),
        })
    }

    /// The writer's config.
    pub fn config(&self) -> &S3Config {
        &self.config
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
            let path = Path::parse(&key).map_err(|e| {
                Error::invalid(format!("S3 object prefix \"{prefix}\" makes no valid key ({key}): {e}"))
            })?;
            let len = pieces.iter().map(|p| p.len() as u64).sum::<u64>().saturating_sub(packet_data_offset as u64);
            if len > MAX_SINGLE_PUT_BYTES {
                return Err(Error::new(
                    Status::NotSupported,
                    format!("packet {index} makes a {len}-byte object; one PutObject carries at most 5 GiB"),
                ));
            }
            total += len;
            objects.push((path, index, pieces));
        }
        self.reserve(total)?;
        let staged: Vec<(Path, Bytes)> = objects
            .into_iter()
            .map(|(path, _, pieces)| {
                let mut bytes = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
                let mut skip = packet_data_offset;
                for piece in pieces {
                    let cut = skip.min(piece.len());
                    skip -= cut;
                    bytes.extend_from_slice(&piece[cut..]);
                }
                (path, Bytes::from(bytes))
            })
            .collect();
        Ok(self.upload(staged))
    }

    /// Counts `bytes` as staged, or refuses them when over the bound.
    fn reserve(&self, bytes: u64) -> Result<()> {
        let limit = self.config.max_staged_bytes;
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
        let (store, staged, task) = (Arc::clone(&self.store), Arc::clone(&self.staged), Arc::clone(&progress));
        let inflight = self.config.max_inflight_uploads as usize;
        self.runtime.spawn(async move {
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
        S3Upload { progress, objects: total, _runtime: Arc::clone(&self.runtime) }
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
