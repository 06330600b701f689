//! A capture request and its checks.

use serde::Deserialize;
use utoipa::ToSchema;

use super::error::CaptureError;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CaptureFormat {
    /// Classic pcap v2.4, Ethernet (socket datagrams as synthesised frames).
    Pcap,
    /// One file per packet, `<name>_<index>`.
    Raw,
    /// Written through GPUDirect Storage (cuFile), for queues and plans in
    /// GPU memory: a pcap file of packets, or one raw file per aggregate
    /// with `reorder`. Needs a gateway built with the `cuda` feature.
    Gds,
}

impl CaptureFormat {
    /// The name the API takes.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::Raw => "raw",
            CaptureFormat::Gds => "gds",
        }
    }
}

/// `POST /api/v1/captures` body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaptureRequest {
    /// Output format.
    pub format: CaptureFormat,
    /// Interface name.
    pub interface: String,
    /// Only this RX queue.
    #[serde(default)]
    pub queue: Option<u16>,
    /// Only this flow id.
    #[serde(default)]
    pub flow: Option<u32>,
    /// Only the aggregates of this reorder plan (by name), one raw file per
    /// batch: `<name>_<batch id>` (format raw or gds).
    #[serde(default)]
    pub reorder: Option<String>,
    /// Stop after this many packets.
    #[serde(default)]
    pub max_packets: Option<u64>,
    /// Stop after this many bytes written.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Stop after this many seconds.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Bytes kept of each packet (pcap).
    #[serde(default)]
    pub snaplen: Option<u32>,
    /// Start a new pcap file (or S3 object) once the current one reaches this many bytes.
    #[serde(default)]
    pub rotate_bytes: Option<u64>,
    /// Keep at most this many files when rotating (oldest deleted).
    #[serde(default)]
    pub rotate_files: Option<u32>,
    /// File name (no directory): `<name>.pcap`, `<name>_<n>.pcap`, `<name>_<index>`.
    pub name: String,
    /// Where the files go: the capture directory when absent, or
    /// `s3://<bucket>[/<prefix>]`, objects `<prefix>/<file name>` in that
    /// bucket of the gateway's S3 store (`--capture-s3-endpoint`).
    #[serde(default)]
    pub destination: Option<String>,
}

/// Where a capture's files go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    /// The gateway's capture directory.
    Directory,
    /// Objects `<prefix><file name>` in a bucket (`prefix` empty or ending in `/`).
    S3 { bucket: String, prefix: String },
}

impl Destination {
    /// `s3://bucket[/prefix]`, checked: a bucket name as S3 allows them, a
    /// prefix of plain path segments.
    fn parse(text: &str) -> Result<Self, CaptureError> {
        let invalid = |why: String| Err(CaptureError::Invalid("destination", why));
        let Some(rest) = text.strip_prefix("s3://") else {
            return invalid(format!(
                "\"{text}\" is no destination this gateway writes to: give s3://<bucket>[/<prefix>], or leave it out for the capture directory"
            ));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !bucket_ok {
            return invalid(format!(
                "\"{bucket}\" is no S3 bucket name: 3-63 of a-z 0-9 - ., beginning and ending with a letter or digit"
            ));
        }
        let prefix = prefix.trim_end_matches('/');
        let segment_ok = |s: &str| {
            !s.is_empty() && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.=".contains(c))
        };
        if !prefix.is_empty() && !prefix.split('/').all(segment_ok) {
            return invalid(format!(
                "\"{prefix}\" is no object prefix this gateway writes under: segments of A-Z a-z 0-9 - _ . = between single '/'"
            ));
        }
        let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        Ok(Destination::S3 { bucket: bucket.to_owned(), prefix })
    }

    /// How the API shows it: `s3://bucket/prefix`, or none for the directory.
    pub(crate) fn url(&self) -> Option<String> {
        match self {
            Destination::Directory => None,
            Destination::S3 { bucket, prefix } => Some(format!("s3://{bucket}/{prefix}")),
        }
    }
}

/// A checked request.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub format: CaptureFormat,
    pub queue: Option<u16>,
    pub flow: Option<u32>,
    /// Position and name of the reorder plan whose aggregates are captured.
    pub reorder: Option<(u16, String)>,
    pub max_packets: Option<u64>,
    pub max_bytes: Option<u64>,
    pub duration: Option<std::time::Duration>,
    pub snaplen: u32,
    pub rotate_bytes: Option<u64>,
    pub rotate_files: Option<u32>,
    pub name: String,
    pub destination: Destination,
}

impl CaptureRequest {
    /// Checks the request against the interface's reorder `plans`.
    pub(crate) fn validate(&self, plans: &[String]) -> Result<Plan, CaptureError> {
        let name = self.name.as_str();
        let plain = !name.is_empty()
            && name.len() <= 128
            && name != "."
            && name != ".."
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !plain {
            return Err(CaptureError::Invalid(
                "name",
                format!("\"{name}\" is not a plain file name: use 1-128 of A-Z a-z 0-9 - _ . (no '/')"),
            ));
        }
        let positive = |field: &'static str, value: Option<u64>| match value {
            Some(0) => Err(CaptureError::Invalid(field, format!("{field} must be at least 1"))),
            _ => Ok(()),
        };
        positive("max_packets", self.max_packets)?;
        positive("max_bytes", self.max_bytes)?;
        positive("rotate_bytes", self.rotate_bytes)?;
        positive("rotate_files", self.rotate_files.map(u64::from))?;
        positive("snaplen", self.snaplen.map(u64::from))?;
        if let Some(Err(why)) = self.duration_s.map(|d| crate::seconds::check(d, 0.0)) {
            return Err(CaptureError::Invalid("duration_s", format!("duration_s: {why}")));
        }
        let destination = match &self.destination {
            None => Destination::Directory,
            Some(text) => Destination::parse(text)?,
        };
        // Snap length shapes pcap records, rotation the files or objects a
        // capture streams into: pcap files, and a raw capture's S3 objects
        // (raw files and aggregates are one per record).
        let pcap_file = match self.format {
            CaptureFormat::Pcap => true,
            CaptureFormat::Gds => self.reorder.is_none(),
            CaptureFormat::Raw => false,
        };
        let streamed = pcap_file
            || (self.format == CaptureFormat::Raw && self.reorder.is_none() && destination != Destination::Directory);
        let writes = if self.reorder.is_some() {
            "one file or object per aggregate"
        } else if streamed {
            "its records' raw bytes back to back"
        } else {
            "one raw file per packet"
        };
        let shaping = [
            ("rotate_bytes", self.rotate_bytes.is_some() && !streamed),
            ("rotate_files", self.rotate_files.is_some() && !pcap_file),
            ("snaplen", self.snaplen.is_some() && !pcap_file),
        ];
        if let Some((field, _)) = shaping.iter().find(|(_, refused)| *refused) {
            let applies = if *field == "rotate_bytes" {
                "pcap files and raw captures to S3"
            } else {
                "pcap files (format pcap, or gds without reorder)"
            };
            return Err(CaptureError::Invalid(
                field,
                format!("{field} applies to {applies}; this capture writes {writes}"),
            ));
        }
        if self.rotate_files.is_some() && self.rotate_bytes.is_none() {
            return Err(CaptureError::Invalid(
                "rotate_files",
                "rotate_files needs rotate_bytes (when to start the next file)".into(),
            ));
        }
        if destination != Destination::Directory {
            if self.format == CaptureFormat::Gds {
                return Err(CaptureError::Invalid(
                    "destination",
                    "format gds writes through GPUDirect Storage to a local file system; an S3 destination takes pcap or raw".into(),
                ));
            }
            if self.rotate_files.is_some() {
                return Err(CaptureError::Invalid(
                    "rotate_files",
                    "a capture to S3 keeps every object it wrote (expire old ones with the bucket's lifecycle rules); give rotate_bytes alone".into(),
                ));
            }
        }
        let reorder = match &self.reorder {
            None => None,
            Some(_) if self.format == CaptureFormat::Pcap => {
                return Err(CaptureError::Invalid(
                    "reorder",
                    "a reorder capture writes each aggregate as one raw file; set format: raw (or gds)".into(),
                ));
            }
            Some(_) if self.flow.is_some() => {
                return Err(CaptureError::Invalid(
                    "flow",
                    "an aggregate holds a plan's flows together; give reorder or flow, not both".into(),
                ));
            }
            Some(name) => match plans.iter().position(|p| p == name) {
                Some(index) => Some((index as u16, name.clone())),
                None => {
                    let valid = if plans.is_empty() { "this interface has none".to_owned() } else { plans.join(", ") };
                    return Err(CaptureError::Invalid(
                        "reorder",
                        format!("no reorder plan \"{name}\" on interface \"{}\"; valid: {valid}", self.interface),
                    ));
                }
            },
        };
        Ok(Plan {
            format: self.format,
            queue: self.queue,
            flow: self.flow,
            reorder,
            max_packets: self.max_packets,
            max_bytes: self.max_bytes,
            duration: self.duration_s.map(std::time::Duration::from_secs_f64),
            snaplen: self.snaplen.unwrap_or(daqiri::writer::DEFAULT_SNAPLEN),
            rotate_bytes: self.rotate_bytes,
            rotate_files: self.rotate_files,
            name: name.to_owned(),
            destination,
        })
    }
}
