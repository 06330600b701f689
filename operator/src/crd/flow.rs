//! `DaqiriFlow`: a match on one port's traffic, steered to a queue (or
//! spread over several by RSS), optionally reordered and captured.

use daqiri_config::model::{Endianness, InputType, MissingAction, OutputType, ReorderType};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::ResourceStatus;

/// One RX flow of a `DaqiriPort`.
#[derive(CustomResource, KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "daqiri.nvidia.com",
    version = "v1alpha1",
    kind = "DaqiriFlow",
    namespaced,
    status = "ResourceStatus",
    shortname = "dqflow",
    shortname = "dqf",
    category = "daqiri",
    printcolumn = r#"{"name":"Port","type":"string","jsonPath":".spec.port"}"#,
    printcolumn = r#"{"name":"Flow ID","type":"integer","jsonPath":".spec.id"}"#,
    printcolumn = r#"{"name":"Queue","type":"integer","jsonPath":".spec.queue"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"RX pps","type":"number","jsonPath":".status.rxPacketsPerSecond"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    cel
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.queue) != has(self.queues)").message("give queue (one queue) or queues (RSS over several), not both"))]
pub struct DaqiriFlowSpec {
    /// Name of the `DaqiriPort` (same namespace) whose traffic this flow matches.
    #[schemars(length(min = 1, max = 253))]
    pub port: String,
    /// Flow id: tags every matched packet and labels its metrics (`daqiri_flow_id`).
    pub id: u32,
    /// What to match; all given fields must match.
    #[serde(rename = "match")]
    pub matches: FlowMatchSpec,
    /// The RX queue id matched packets go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u16>,
    /// RX queue ids to spread matched packets over (RSS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub queues: Option<Vec<u16>>,
    /// Reorder the flow's packets into batches, optionally converting samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<ReorderSpec>,
    /// A capture of this flow that runs as long as the flow exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CapturePolicy>,
}

/// Match fields.
#[derive(KubeSchema, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.udpSrc) || has(self.udpDst) || has(self.ipv4Len) || has(self.ethernet)").message("match at least one of udpSrc, udpDst, ipv4Len, ethernet"))]
pub struct FlowMatchSpec {
    /// UDP source port or inclusive range, e.g. `5000` or `5000-5009`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\d{1,5}(-\d{1,5})?$"))]
    pub udp_src: Option<String>,
    /// UDP destination port or inclusive range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\d{1,5}(-\d{1,5})?$"))]
    pub udp_dst: Option<String>,
    /// IPv4 total length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_len: Option<u16>,
    /// Ethernet addresses (raw ports only): alone, any frame with them
    /// matches, and over several queues it spreads by MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethernet: Option<EthernetMatchSpec>,
}

/// Ethernet addresses to match, as `aa:bb:cc:dd:ee:ff`.
#[derive(KubeSchema, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.src) || has(self.dst)").message("give src, dst or both"))]
pub struct EthernetMatchSpec {
    /// Source MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"))]
    pub src: Option<String>,
    /// Destination MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"))]
    pub dst: Option<String>,
}

/// How to reorder the flow's packets.
#[derive(KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.packetsPerBatch) != has(self.batchNumber)").message("give packetsPerBatch or batchNumber, not both"))]
pub struct ReorderSpec {
    /// Where the reorder runs.
    #[serde(rename = "type")]
    pub kind: ReorderType,
    /// The port's memory region that receives reordered batches.
    pub memory_region: String,
    /// Payload bytes before the sequence fields.
    #[serde(default)]
    pub payload_byte_offset: u32,
    /// Sequence number bit field.
    pub sequence_number: BitFieldSpec,
    /// Fixed packets per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub packets_per_batch: Option<u32>,
    /// Batch number bit field, when batches are numbered in the packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_number: Option<BitFieldSpec>,
    /// Sample conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_types: Option<DataTypesSpec>,
    /// A batch with empty slots when its timeout closes it: delivered
    /// zero-filled and flagged (`passthrough`, the default) or discarded (`drop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_action: Option<MissingAction>,
}

/// A bit field of the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BitFieldSpec {
    /// Offset in bits from the reorder's payload offset.
    pub bit_offset: u32,
    /// Width in bits.
    #[schemars(range(min = 1, max = 64))]
    pub bit_width: u32,
}

/// Input and output sample types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataTypesSpec {
    /// Samples as they arrive.
    pub input_type: InputType,
    /// Samples as they are written.
    pub output_type: OutputType,
    /// Byte order of the input.
    #[serde(default)]
    pub endianness: Endianness,
}

/// A standing capture: started once the flow runs, kept running.
#[derive(KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.rotateFiles) || has(self.rotateBytes)").message("rotateFiles needs rotateBytes"))]
#[x_kube(validation = Rule::new("!has(self.destination) || self.destination.matches('^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$')").message("destination is s3://<bucket>[/<prefix>]"))]
#[x_kube(validation = Rule::new("!has(self.destination) || !has(self.rotateFiles)").message("a capture to S3 keeps its objects: rotateFiles applies to files only (expire objects with the bucket's lifecycle rules)"))]
pub struct CapturePolicy {
    /// `pcap` or `raw`.
    #[schemars(regex(pattern = "^(pcap|raw)$"))]
    pub format: String,
    /// Bytes kept of each packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snaplen: Option<u32>,
    /// Start a new file at this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_bytes: Option<u64>,
    /// Keep this many files (oldest deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_files: Option<u32>,
    /// `s3://bucket[/prefix]`: objects in the gateways' S3 store (the
    /// chart's `gateway.captures.s3`) instead of their capture directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub destination: Option<String>,
}
