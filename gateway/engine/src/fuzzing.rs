//! Internal parsers reached without starting an engine, for the fuzz
//! targets in `fuzz/`. Not a stable interface.

use daqiri_config::model::RxConfig;

use crate::flow::FlowTable;
pub use crate::flow::Steering;

/// An interface's software flow table: how the loopback, AF_XDP and DPDK
/// receivers (without rte_flow) read a frame's headers and pick its queue.
#[derive(Debug)]
pub struct SoftwareSteering(FlowTable);

impl SoftwareSteering {
    /// The table of `rx`, which must come from a validated config (its flows
    /// name existing queues).
    pub fn new(rx: &RxConfig) -> Self {
        Self(FlowTable::new(rx))
    }

    /// Where the receivers send `frame`.
    pub fn steer_frame(&self, frame: &[u8]) -> Steering {
        self.0.steer_frame(frame)
    }
}
