//! What a GPU plan's batch keeps for its kernel: the packets' buffers where
//! they landed. Plain data, in every build (empty where no GPU plan runs).

use crate::memory::BufToken;

/// A packet a GPU plan keeps until its kernel has read it: its buffer and
/// where the frame starts in it (after a NIC's headroom).
#[derive(Debug)]
pub(super) struct HeldPacket {
    pub(super) token: BufToken,
    pub(super) offset: u16,
}

/// A batch ready for its kernel: the output buffer, and per slot the
/// packet placed there.
#[derive(Debug)]
// Only the kernel reads it: a build without CUDA launches none.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) struct HeldBatch {
    pub(super) output: BufToken,
    pub(super) held: Vec<Option<HeldPacket>>,
    /// Payload bytes per packet, and output bytes per slot.
    pub(super) payload_len: usize,
    pub(super) slot_len: usize,
}
