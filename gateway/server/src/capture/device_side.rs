//! Where a capture's bytes sit in GPU memory, for the GDS path.

/// Where a queue's packets (or a plan's aggregates) keep bytes in GPU memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceSide {
    pub(super) gpu: u32,
    /// Most device bytes one packet (or aggregate) holds.
    pub(super) bytes: usize,
}
