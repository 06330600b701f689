//! One object written as a stream of bytes: a multipart upload, its parts
//! sent as they fill, a bounded number in flight.
//!
//! By hand over object_store's `MultipartUpload` rather than its
//! `WriteMultipart`: a capture reports the bytes the store has acknowledged
//! while the object is still open, which `WriteMultipart` does not tell.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use object_store::{MultipartUpload, ObjectStore};
use tokio::task::JoinHandle;

use super::{S3Bucket, object_path};
use crate::{Error, Result, Status};

/// S3's smallest part but the last.
const MIN_PART_BYTES: usize = 5 << 20;
/// S3's most parts in one object.
const MAX_PARTS: usize = 10_000;

/// An object being written (see [`S3Bucket::stream`]). Writes block while
/// `max_inflight_uploads` parts are in flight: the writer's pace is the
/// store's. Its calls block: call them from a plain thread, not from async
/// code. Dropped without [`finish`](Self::finish), the upload is aborted.
#[derive(Debug)]
pub struct S3ObjectStream {
    bucket: S3Bucket,
    key: String,
    upload: Option<Box<dyn MultipartUpload>>,
    part_bytes: usize,
    buffer: Vec<u8>,
    inflight: VecDeque<JoinHandle<std::result::Result<(), object_store::Error>>>,
    parts: usize,
    written: u64,
    acknowledged: Arc<AtomicU64>,
}

impl S3ObjectStream {
    pub(super) fn start(bucket: &S3Bucket, key: &str, part_bytes: usize) -> Result<Self> {
        if part_bytes < MIN_PART_BYTES {
            return Err(Error::invalid(format!(
                "S3 part size {part_bytes} bytes is below S3's smallest part, {MIN_PART_BYTES} bytes"
            )));
        }
        let path = object_path(key)?;
        let store = Arc::clone(&bucket.store);
        let upload = bucket
            .runtime
            .block_on(async move { store.put_multipart(&path).await })
            .map_err(|e| bucket.failed(key, "multipart upload start", &e))?;
        Ok(Self {
            bucket: bucket.clone(),
            key: key.to_owned(),
            upload: Some(upload),
            part_bytes,
            buffer: Vec::with_capacity(part_bytes),
            inflight: VecDeque::new(),
            parts: 0,
            written: 0,
            acknowledged: Arc::default(),
        })
    }

    /// `s3://bucket/key`.
    pub fn url(&self) -> String {
        self.bucket.url(&self.key)
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Bytes of parts the store has acknowledged (not yet an object: that
    /// takes [`finish`](Self::finish)).
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged.load(Ordering::Relaxed)
    }

    /// Most bytes this stream holds at once: a part filling and those in flight.
    pub fn memory_bound(part_bytes: usize, config: &super::S3Config) -> u64 {
        part_bytes as u64 * (u64::from(config.max_inflight_uploads) + 1)
    }

    /// Appends bytes; sends a part each time one fills. Fails (and the
    /// object with it) when a part failed after its retries, with the store's reason.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let take = (self.part_bytes - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            self.written += take as u64;
            if self.buffer.len() == self.part_bytes {
                self.send_part()?;
            }
        }
        Ok(())
    }

    /// Sends the last part, waits for every part and completes the object;
    /// returns its size. On failure the upload is aborted, nothing appears.
    pub fn finish(mut self) -> Result<u64> {
        if !self.buffer.is_empty() || self.parts == 0 {
            self.send_part()?;
        }
        while !self.inflight.is_empty() {
            self.wait_oldest()?;
        }
        let mut upload = self.upload.take().expect("taken only here and by drop");
        let completed = self.bucket.runtime.block_on(async move { upload.complete().await });
        completed.map_err(|e| self.bucket.failed(&self.key, "multipart upload completion", &e))?;
        Ok(self.written)
    }

    /// Starts the buffer's upload as the next part; waits first while the
    /// most parts are in flight.
    fn send_part(&mut self) -> Result<()> {
        if self.parts == MAX_PARTS {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "{}: S3 objects have at most {MAX_PARTS} parts of {} bytes; rotate sooner",
                    self.url(),
                    self.part_bytes
                ),
            ));
        }
        while self.inflight.len() >= self.bucket.config.max_inflight_uploads as usize {
            self.wait_oldest()?;
        }
        let part = std::mem::replace(&mut self.buffer, Vec::with_capacity(self.part_bytes));
        let len = part.len() as u64;
        let upload = self.upload.as_mut().expect("open until finish or drop");
        let sent = upload.put_part(bytes::Bytes::from(part).into());
        let acknowledged = Arc::clone(&self.acknowledged);
        self.inflight.push_back(self.bucket.runtime.spawn(async move {
            sent.await?;
            acknowledged.fetch_add(len, Ordering::Relaxed);
            Ok(())
        }));
        self.parts += 1;
        Ok(())
    }

    fn wait_oldest(&mut self) -> Result<()> {
        let Some(part) = self.inflight.pop_front() else { return Ok(()) };
        match self.bucket.runtime.block_on(part) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.bucket.failed(&self.key, "part upload", &e)),
            Err(e) => {
                Err(Error::new(Status::InternalError, format!("{}: a part's upload task ended: {e}", self.url())))
            }
        }
    }
}

impl Drop for S3ObjectStream {
    /// An object not finished is aborted, so its parts do not linger
    /// (best effort: a store that is gone keeps them until its lifecycle rule).
    fn drop(&mut self) {
        if let Some(mut upload) = self.upload.take() {
            for part in self.inflight.drain(..) {
                part.abort();
            }
            let url = self.url();
            // Spawned, not waited on: a drop may happen on any thread.
            self.bucket.runtime.spawn(async move {
                if let Err(e) = upload.abort().await {
                    tracing::warn!("S3: cannot abort the unfinished upload of {url}: {e}");
                }
            });
        }
    }
}
