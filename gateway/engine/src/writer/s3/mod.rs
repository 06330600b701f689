//! S3 object storage: one bucket's connection ([`S3Bucket`]: whole objects,
//! streamed multipart objects, listings, downloads), and DAQIRI's S3 raw
//! writer over it ([`S3Writer`]).
//!
//! Every request runs on the bucket's own small tokio runtime, so callers
//! may be plain threads (a capture's writer, a C program); each is retried
//! with backoff until `retry_deadline`, so a store that stops answering
//! fails the call with its reason instead of hanging it. Credentials come
//! from the environment as AWS's tools read it (`AWS_ACCESS_KEY_ID`/
//! `AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, a web-identity token file
//! with `AWS_ROLE_ARN` as Kubernetes service accounts get them, ECS and EC2
//! instance metadata), and a profile's static keys in `~/.aws/credentials`
//! or `~/.aws/config` (`AWS_PROFILE`) between the first two, as AWS's tools
//! order them.

mod profile;
mod stream;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, RetryConfig};

pub use stream::S3ObjectStream;
pub use writer::{MAX_SINGLE_PUT_BYTES, S3Upload, S3UploadStatus, S3Writer};

use crate::{Error, Result, Status};

/// Where and how an [`S3Writer`] or [`S3Bucket`] uploads (DAQIRI's `S3WriterConfig`).
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
    /// Most requests one upload has in flight (objects, or parts of one object).
    pub max_inflight_uploads: u32,
    /// Most bytes an [`S3Writer`] holds staged, over every upload in flight.
    pub max_staged_bytes: u64,
    /// How long a request is retried before it counts as failed.
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

/// One bucket of an S3 store, and the threads its requests run on.
#[derive(Debug, Clone)]
pub struct S3Bucket {
    store: Arc<AmazonS3>,
    runtime: Arc<tokio::runtime::Runtime>,
    config: Arc<S3Config>,
}

/// An object's bytes as they arrive, and its size.
pub struct S3Download {
    /// The object's size in bytes.
    pub size: u64,
    /// Its bytes, in order; an error ends it (the store's reason).
    pub chunks: BoxStream<'static, std::io::Result<Bytes>>,
}

impl std::fmt::Debug for S3Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Download").field("size", &self.size).finish_non_exhaustive()
    }
}

impl S3Bucket {
    /// A bucket for `config`; no request is made yet (wrong credentials or
    /// a missing bucket show on the first request, with the store's reason).
    pub fn connect(config: S3Config) -> Result<Self> {
        let refuse = |what: &str| Err(Error::invalid(format!("S3: {what}")));
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
        if let Some(keys) = profile::profile_credentials(|name| std::env::var(name).ok())? {
            builder = builder.with_access_key_id(keys.access_key_id).with_secret_access_key(keys.secret_access_key);
            if let Some(token) = keys.session_token {
                builder = builder.with_token(token);
            }
        }
        let store = builder.build().map_err(|e| Error::invalid(format!("S3 bucket {}: {e}", config.bucket)))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3-upload")
            .enable_all()
            .build()
            .map_err(|e| Error::io(Status::InternalError, "cannot start the S3 client's threads", e))?;
        Ok(Self { store: Arc::new(store), runtime: Arc::new(runtime), config: Arc::new(config) })
    }

    /// The bucket's config.
    pub fn config(&self) -> &S3Config {
        &self.config
    }

    /// `s3://<bucket>/<key>`, as logs and APIs name an object.
    pub fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.config.bucket)
    }

    /// Uploads one whole object (one `PutObject`); waits for the store's answer.
    pub fn put(&self, key: &str, bytes: Vec<u8>) -> Result<()> {
        let path = object_path(key)?;
        let store = Arc::clone(&self.store);
        self.runtime
            .block_on(async move { store.put(&path, Bytes::from(bytes).into()).await })
            .map(drop)
            .map_err(|e| self.failed(key, "upload", &e))
    }

    /// Starts a multipart object at `key`, uploaded `part_bytes` at a time
    /// with at most `max_inflight_uploads` parts in flight; it appears in the
    /// bucket only once [`S3ObjectStream::finish`] completes it.
    pub fn stream(&self, key: &str, part_bytes: usize) -> Result<S3ObjectStream> {
        S3ObjectStream::start(self, key, part_bytes)
    }

    /// The keys under `prefix` (every one, following the store's pages).
    pub fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let path = (!prefix.is_empty()).then(|| object_path(prefix)).transpose()?;
        let store = Arc::clone(&self.store);
        self.runtime
            .block_on(async move {
                store.list(path.as_ref()).map_ok(|meta| meta.location.to_string()).try_collect::<Vec<_>>().await
            })
            .map_err(|e| self.failed(prefix, "list", &e))
    }

    /// Reads an object; its bytes stream from the bucket's threads.
    pub fn download(&self, key: &str) -> Result<S3Download> {
        let path = object_path(key)?;
        let store = Arc::clone(&self.store);
        let got = self.runtime.block_on(async move { store.get(&path).await }).map_err(|e| match e {
            object_store::Error::NotFound { .. } => {
                Error::new(Status::InvalidParameter, format!("{} does not exist", self.url(key)))
            }
            e => self.failed(key, "download", &e),
        })?;
        let size = got.meta.size;
        // The body is read on the bucket's runtime, whose connection it is,
        // and handed over through a small channel to whichever runtime reads it.
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        self.runtime.spawn(async move {
            let mut body = got.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(std::io::Error::other);
                let last = chunk.is_err();
                if sender.send(chunk).await.is_err() || last {
                    break;
                }
            }
        });
        let chunks = futures::stream::unfold(receiver, |mut r| async move { r.recv().await.map(|c| (c, r)) });
        Ok(S3Download { size, chunks: chunks.boxed() })
    }

    /// A failed request's error, naming the object and the store's reason.
    fn failed(&self, key: &str, what: &str, e: &object_store::Error) -> Error {
        Error::new(Status::GenericFailure, format!("S3 {what} of {} failed: {e}", self.url(key)))
    }
}

/// An object key as object_store takes it; refused by name when it cannot be one.
fn object_path(key: &str) -> Result<Path> {
    Path::parse(key).map_err(|e| Error::invalid(format!("\"{key}\" is no valid S3 object key: {e}")))
}
