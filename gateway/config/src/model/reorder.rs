//! Reorder configs: aggregate the packets of a batch into one output buffer
//! in sequence order, optionally converting the sample type.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `rx.reorder_configs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReorderConfig {
    /// Unique per interface.
    pub name: String,
    /// `gpu` or `cpu`.
    pub reorder_type: ReorderType,
    /// Output region for the aggregate.
    pub memory_region: String,
    /// Bytes skipped at the start of each packet.
    #[serde(default)]
    pub payload_byte_offset: u32,
    /// Flows this plan applies to.
    pub flow_ids: Vec<u32>,
    /// Optional sample conversion (DAQIRI: gpu only; here cpu too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_types: Option<DataTypes>,
    /// How sequence and batch are read from the packet.
    pub method: ReorderMethod,
    /// DAQIRI's `reorder_engine`: software (`sw`, the default) or the
    /// NIC's own reorder (`hw`, mlx5 steering; refused by this build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_engine: Option<ReorderEngine>,
    /// What an aggregate with empty slots becomes when its timeout (or the
    /// window, or shutdown) closes it: delivered flagged `REORDER_TIMEOUT`
    /// (`passthrough`, the default) or discarded (`drop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_action: Option<MissingAction>,
    /// Upstream's acknowledgement, required by `reorder_engine: hw`, that
    /// the sampled value cycles over the output ring (default `false`). A
    /// software plan reads nothing from it: batch ids always wrap around
    /// their id space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cyclic_sequence: Option<bool>,
    /// Bytes of each packet's slot in the NIC's ring, for `reorder_engine:
    /// hw` (required there; upstream warns below 4000). Default 0; a
    /// software plan sizes its slots from the packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_size: Option<u32>,
}

impl ReorderConfig {
    /// `missing_action`, with its default.
    pub fn missing_action(&self) -> MissingAction {
        self.missing_action.unwrap_or_default()
    }

    /// `cyclic_sequence`, with upstream's default.
    pub fn cyclic_sequence(&self) -> bool {
        self.cyclic_sequence.unwrap_or(false)
    }

    /// `reorder_engine`, with its default.
    pub fn reorder_engine(&self) -> ReorderEngine {
        self.reorder_engine.unwrap_or(ReorderEngine::Software)
    }
}

/// `missing_action`: what an incomplete aggregate becomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MissingAction {
    /// Delivered, empty slots zero-filled, flagged `REORDER_TIMEOUT`.
    #[default]
    Passthrough,
    /// Discarded: only complete aggregates are delivered.
    Drop,
}

/// `reorder_engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReorderEngine {
    /// The plan runs in the gateway (CPU or GPU, as `reorder_type` says).
    #[serde(rename = "sw")]
    Software,
    /// The NIC places packets in order itself.
    #[serde(rename = "hw")]
    Hardware,
}

/// `reorder_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ReorderType {
    Gpu,
    Cpu,
}

/// `method`: exactly one of the two keys must be present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReorderMethod {
    /// Sequence number plus an explicit batch number field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_batch_number: Option<SeqBatchNumber>,
    /// Sequence number with a fixed number of packets per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_packets_per_batch: Option<SeqPacketsPerBatch>,
}

/// `method.seq_batch_number`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeqBatchNumber {
    /// Where the sequence number sits.
    pub sequence_number: BitField,
    /// Where the batch number sits.
    pub batch_number: BitField,
}

/// `method.seq_packets_per_batch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeqPacketsPerBatch {
    /// Where the sequence number sits.
    pub sequence_number: BitField,
    /// Packets in one batch (> 0, divides 2^bit_width).
    pub packets_per_batch: u32,
}

/// A bit field inside the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BitField {
    /// Offset from the start of the packet, in bits.
    pub bit_offset: u32,
    /// Width in bits, 1..32.
    pub bit_width: u32,
}

/// `data_types`: sample conversion during reorder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataTypes {
    /// On-wire element type.
    #[serde(alias = "input")]
    pub input_type: InputType,
    /// Output element type.
    #[serde(alias = "output")]
    pub output_type: OutputType,
    /// Input byte order (default host).
    #[serde(default, alias = "input_endianness")]
    pub endianness: Endianness,
}

/// `data_types.input_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum InputType {
    Int4,
    Int8,
    Int16,
    Int32,
}

impl InputType {
    /// Bits per sample on the wire.
    pub const fn bits(self) -> u32 {
        match self {
            InputType::Int4 => 4,
            InputType::Int8 => 8,
            InputType::Int16 => 16,
            InputType::Int32 => 32,
        }
    }
}

/// `data_types.output_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum OutputType {
    Fp16,
    Bf16,
    Fp32,
    Fp64,
    Int32,
}

impl OutputType {
    /// Bytes per output sample.
    pub const fn bytes(self) -> u32 {
        match self {
            OutputType::Fp16 | OutputType::Bf16 => 2,
            OutputType::Fp32 | OutputType::Int32 => 4,
            OutputType::Fp64 => 8,
        }
    }
}

/// `data_types.endianness`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Endianness {
    #[default]
    Host,
    Network,
}
