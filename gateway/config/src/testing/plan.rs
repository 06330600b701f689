//! One reorder plan of a [`TestConfig`](super::TestConfig).

use crate::model::{
    BitField, DataTypes, Endianness, InputType, MissingAction, OutputType, ReorderConfig, ReorderMethod, ReorderType,
    SeqBatchNumber, SeqPacketsPerBatch,
};

/// A CPU plan `name` over `flow_ids`, placing into `output_region`, until
/// the builder's methods say otherwise; a method must be given.
pub fn plan(name: &str, flow_ids: &[u32], output_region: &str) -> PlanBuilder {
    PlanBuilder(ReorderConfig {
        name: name.to_owned(),
        reorder_type: ReorderType::Cpu,
        memory_region: output_region.to_owned(),
        payload_byte_offset: 0,
        flow_ids: flow_ids.to_vec(),
        data_types: None,
        method: ReorderMethod::default(),
        reorder_engine: None,
        missing_action: None,
        cyclic_sequence: None,
        packet_size: None,
    })
}

/// One plan's settings.
#[derive(Debug, Clone)]
pub struct PlanBuilder(ReorderConfig);

impl PlanBuilder {
    /// `reorder_type`.
    pub fn on(mut self, reorder_type: ReorderType) -> Self {
        self.0.reorder_type = reorder_type;
        self
    }

    /// `payload_byte_offset`: where the data the plan places starts.
    pub fn payload_at(mut self, byte: u32) -> Self {
        self.0.payload_byte_offset = byte;
        self
    }

    /// `method.seq_packets_per_batch`.
    pub fn packets_per_batch(mut self, sequence_number: BitField, packets_per_batch: u32) -> Self {
        self.0.method = ReorderMethod {
            seq_packets_per_batch: Some(SeqPacketsPerBatch { sequence_number, packets_per_batch }),
            seq_batch_number: None,
        };
        self
    }

    /// `method.seq_batch_number`.
    pub fn batch_number(mut self, sequence_number: BitField, batch_number: BitField) -> Self {
        self.0.method = ReorderMethod {
            seq_batch_number: Some(SeqBatchNumber { sequence_number, batch_number }),
            seq_packets_per_batch: None,
        };
        self
    }

    /// `data_types`: samples converted as they are placed.
    pub fn converting(mut self, input_type: InputType, output_type: OutputType, endianness: Endianness) -> Self {
        self.0.data_types = Some(DataTypes { input_type, output_type, endianness });
        self
    }

    /// `missing_action`: what an incomplete aggregate becomes.
    pub fn when_missing(mut self, action: MissingAction) -> Self {
        self.0.missing_action = Some(action);
        self
    }

    pub(super) fn build(self) -> ReorderConfig {
        self.0
    }
}
