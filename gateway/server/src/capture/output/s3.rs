//! Captures to S3: a pcap or raw capture streamed into objects (multipart,
//! `--capture-s3-part-mb` parts; one per pcap file, raw records back to
//! back), a reorder plan's aggregates as one object each. A record counts
//! once the store holds it as an object: an aggregate when its `PutObject`
//! is acknowledged, a streamed record when its object is completed (at
//! rotation or at the end). An object a failure
//! leaves open is aborted; the objects completed before it stay whole.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use daqiri::writer::{PcapResolution, S3Bucket, S3Config, S3ObjectStream, pcap_global_header, pcap_record_header};

use super::{Capture, Pending, missing_slots_json, output_of, raw_file_name, stream_file_name};
use crate::capture::CaptureError;
use crate::capture::request::CaptureFormat;
use crate::capture::ring::{MemoryBudget, Record, Reservation};

/// The gateway's S3 store (`--capture-s3-*`), where captures with an
/// `s3://bucket/prefix` destination go; credentials from the environment.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub(crate) struct S3Settings {
    /// The S3-compatible store captures with an `s3://bucket/prefix`
    /// destination go to (`http(s)://host:port`); AWS S3 when not given.
    /// Credentials come from the environment as AWS's tools read them
    /// (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, a web-identity token).
    #[arg(long = "capture-s3-endpoint")]
    pub endpoint: Option<String>,
    /// The S3 store's region.
    #[arg(long = "capture-s3-region", default_value = "us-east-1")]
    pub region: String,
    /// Path-style requests (`endpoint/bucket/key`), as most S3-compatible stores want.
    #[arg(long = "capture-s3-path-style")]
    pub path_style: bool,
    /// MiB of one part of a pcap capture's streamed object (at least S3's 5);
    /// a capture holds its parts in flight and one filling in capture memory.
    #[arg(long = "capture-s3-part-mb", default_value_t = 8, value_parser = clap::value_parser!(u64).range(5..=5120))]
    pub part_mb: u64,
    /// Parts (or raw objects) of one capture uploading at once.
    #[arg(long = "capture-s3-inflight", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub inflight: u32,
    /// Seconds an S3 request is retried before the capture fails with the store's reason.
    #[arg(long = "capture-s3-retry-s", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub retry_s: u64,
}

impl S3Settings {
    /// Bytes of one part of a pcap capture's streamed object.
    fn part_bytes(&self) -> usize {
        (self.part_mb << 20) as usize
    }
}

impl Default for S3Settings {
    /// The command line's defaults, read from clap so they are said once.
    fn default() -> Self {
        use clap::{Args, FromArgMatches};
        let command = Self::augment_args(clap::Command::new("defaults"));
        Self::from_arg_matches(&command.get_matches_from(["defaults"])).expect("every option has a default")
    }
}

/// The buckets captures went to, connected once each.
#[derive(Debug)]
pub(crate) struct S3Stores {
    settings: S3Settings,
    buckets: Mutex<HashMap<String, S3Bucket>>,
}

impl S3Stores {
    pub(crate) fn new(settings: S3Settings) -> Self {
        Self { settings, buckets: Mutex::default() }
    }

    pub(crate) fn settings(&self) -> &S3Settings {
        &self.settings
    }

    /// The bucket's connection (made on first use; no request yet).
    pub(crate) fn bucket(&self, name: &str) -> daqiri::Result<S3Bucket> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bucket) = buckets.get(name) {
            return Ok(bucket.clone());
        }
        let settings = &self.settings;
        let config = S3Config {
            endpoint: settings.endpoint.clone(),
            path_style: settings.path_style,
            max_inflight_uploads: settings.inflight,
            retry_deadline: Duration::from_secs(settings.retry_s),
            ..S3Config::new(name, &settings.region)
        };
        let bucket = S3Bucket::connect(config)?;
        buckets.insert(name.to_owned(), bucket.clone());
        Ok(bucket)
    }

    /// An object a capture named `name` would write that exists already
    /// under `prefix` (captures never overwrite); the store's refusal
    /// (no bucket, wrong credentials, no answer) refuses the capture.
    pub(crate) fn existing_output(
        &self,
        bucket: &str,
        prefix: &str,
        name: &str,
    ) -> Result<Option<String>, CaptureError> {
        let store = self.bucket(bucket).map_err(|e| CaptureError::Invalid("destination", e.message))?;
        let keys = store
            .list(prefix.trim_end_matches('/'))
            .map_err(|e| CaptureError::Store(format!("cannot list {}: {}", store.url(prefix), e.message)))?;
        Ok(keys
            .into_iter()
            .find(|key| key.strip_prefix(prefix).is_some_and(|file| output_of(name, file)))
            .map(|key| store.url(&key)))
    }
}

/// A capture's objects.
#[derive(Debug)]
pub(crate) enum S3Output {
    /// Its records streamed into objects: one per pcap file, or raw records
    /// back to back (`<name>.raw`, numbered when rotating).
    Stream {
        bucket: S3Bucket,
        prefix: String,
        /// The object being written (none between a completed one and the
        /// next record), and the records in it.
        stream: Option<Box<S3ObjectStream>>,
        open: Pending,
        /// Records of objects completed since the last commit.
        sealed: Pending,
        /// Bytes of the completed objects.
        completed_bytes: u64,
        /// The number of the next object to start.
        next_index: u32,
        part_bytes: usize,
        /// The capture memory its parts take, given back when it ends.
        _memory: Reservation,
    },
    /// One object per record: a reorder plan's aggregates.
    Objects { bucket: S3Bucket, prefix: String, next: u64, uploaded: u64 },
}

impl S3Output {
    pub(super) fn open(
        session: &dyn Capture,
        stores: &S3Stores,
        budget: &Arc<MemoryBudget>,
        bucket: &str,
        prefix: &str,
    ) -> anyhow::Result<Self> {
        let store = stores.bucket(bucket)?;
        let prefix = prefix.to_owned();
        if session.plan().reorder.is_some() {
            return Ok(S3Output::Objects { bucket: store, prefix, next: 0, uploaded: 0 });
        }
        let part_bytes = stores.settings().part_bytes();
        let bound = S3ObjectStream::memory_bound(part_bytes, store.config());
        let memory = Reservation::take(budget, bound).ok_or_else(|| {
            daqiri::Error::new(
                daqiri::Status::NoSpaceAvailable,
                format!(
                    "no room in the capture memory (--capture-memory-mb) for this capture's S3 parts: {} MiB ({} in flight and one filling, --capture-s3-part-mb {})",
                    bound >> 20,
                    store.config().max_inflight_uploads,
                    part_bytes >> 20
                ),
            )
        })?;
        let mut output = S3Output::Stream {
            bucket: store,
            prefix,
            stream: None,
            open: Pending::default(),
            sealed: Pending::default(),
            completed_bytes: 0,
            next_index: 1,
            part_bytes,
            _memory: memory,
        };
        output.start_object(session)?;
        Ok(output)
    }

    /// Starts the next streamed object (a pcap one with its global header).
    fn start_object(&mut self, session: &dyn Capture) -> anyhow::Result<()> {
        let S3Output::Stream { bucket, prefix, stream, next_index, part_bytes, .. } = self else { return Ok(()) };
        let plan = session.plan();
        let pcap = plan.format == CaptureFormat::Pcap;
        let key = format!("{prefix}{}", stream_file_name(plan, *next_index));
        *next_index += 1;
        let mut object = bucket.stream(&key, *part_bytes)?;
        if pcap {
            object.write(&pcap_global_header(PcapResolution::Micros, plan.snaplen))?;
        }
        *stream = Some(Box::new(object));
        Ok(())
    }

    /// Completes the open object: its records become durable, and it is
    /// listed among the capture's files (which exist in the bucket).
    fn complete_object(&mut self, session: &dyn Capture) -> anyhow::Result<()> {
        let S3Output::Stream { stream, open, sealed, completed_bytes, .. } = self else { return Ok(()) };
        if let Some(object) = stream.take() {
            let url = object.url();
            *completed_bytes += (*object).finish()?;
            sealed.add(std::mem::take(open));
            session.listing().add_file(PathBuf::from(url));
        }
        Ok(())
    }

    pub(super) fn write(&mut self, session: &dyn Capture, record: &Record) -> anyhow::Result<u64> {
        match self {
            S3Output::Objects { bucket, prefix, next, uploaded } => {
                let key = format!("{prefix}{}", raw_file_name(session.plan(), record, *next));
                // The missing-slots object goes first, as beside a file: a
                // listed aggregate always has its description.
                if let Some(info) = missing_slots_json(record) {
                    let info_key = format!("{key}.missing.json");
                    bucket.put(&info_key, info.into_bytes())?;
                    session.listing().add_missing_slot_file(bucket.url(&info_key).into());
                }
                bucket.put(&key, record.bytes.clone())?;
                *next += 1;
                *uploaded += record.bytes.len() as u64;
                session.listing().add_file(bucket.url(&key).into());
                Ok(record.bytes.len() as u64)
            }
            S3Output::Stream { stream, .. } => {
                // The next object starts with its first record, so a store
                // that refuses it finds the objects before it counted.
                if stream.is_none() {
                    self.start_object(session)?;
                }
                let S3Output::Stream { stream: Some(object), open, .. } = self else {
                    anyhow::bail!("the capture's S3 object is closed");
                };
                let plan = session.plan();
                let written = if plan.format == CaptureFormat::Pcap {
                    let incl = record.bytes.len().min(plan.snaplen as usize);
                    let header =
                        pcap_record_header(PcapResolution::Micros, record.time, incl as u32, record.bytes.len() as u32);
                    object.write(&header)?;
                    object.write(&record.bytes[..incl])?;
                    header.len() + incl
                } else {
                    object.write(&record.bytes)?;
                    record.bytes.len()
                } as u64;
                open.add(Pending { packets: 1, bytes: written });
                // As a pcap file rotates: once its records reach rotate_bytes,
                // completed at once so its records count before the next write.
                if plan.rotate_bytes.is_some_and(|limit| open.bytes >= limit) {
                    self.complete_object(session)?;
                }
                Ok(written)
            }
        }
    }

    /// Whether records are durable and wait to be counted: an aggregate's
    /// at once, streamed records once their object completed.
    pub(super) fn commit_due(&self) -> bool {
        match self {
            S3Output::Objects { .. } => true,
            S3Output::Stream { sealed, .. } => sealed.packets > 0,
        }
    }

    /// What of `pending` is durable: an aggregate as soon as written; a
    /// streamed record once its object is complete.
    pub(super) fn durable(&mut self, pending: Pending) -> Pending {
        match self {
            S3Output::Objects { .. } => pending,
            S3Output::Stream { sealed, .. } => std::mem::take(sealed),
        }
    }

    pub(super) fn close(&mut self, session: &dyn Capture) -> anyhow::Result<()> {
        self.complete_object(session)
    }

    /// Bytes the store acknowledged: completed objects, and the open one's parts.
    pub(super) fn uploaded(&self) -> u64 {
        match self {
            S3Output::Objects { uploaded, .. } => *uploaded,
            S3Output::Stream { stream, completed_bytes, .. } => {
                completed_bytes + stream.as_ref().map_or(0, |object| object.acknowledged())
            }
        }
    }
}
