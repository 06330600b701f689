//! Sequence checking: the generator writes a network-order `u32` sequence
//! number into each payload (DAQIRI's `sequence_number_offset`); the
//! consumer checks it per flow for loss, reordering and duplicates.

use serde::Serialize;

/// What one flow's sequence numbers looked like.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct SequenceStats {
    /// Packets seen.
    pub received: u64,
    /// First sequence number.
    pub first: Option<u32>,
    /// Highest sequence number (modulo 2^32 wraps).
    pub last: Option<u32>,
    /// Sequence numbers skipped when a later one arrived.
    pub gaps: u64,
    /// Packets older than the highest seen (reordered, duplicated or late).
    pub late: u64,
}

impl SequenceStats {
    /// Records one sequence number.
    pub(crate) fn observe(&mut self, seq: u32) {
        self.received += 1;
        let Some(last) = self.last else {
            self.first = Some(seq);
            self.last = Some(seq);
            return;
        };
        let ahead = seq.wrapping_sub(last);
        if ahead == 0 || ahead > u32::MAX / 2 {
            self.late += 1;
        } else {
            self.gaps += u64::from(ahead - 1);
            self.last = Some(seq);
        }
    }

    /// Every packet arrived once, in order, without a hole.
    pub(crate) fn in_order_without_loss(&self) -> bool {
        self.gaps == 0 && self.late == 0
    }
}

/// Reads the big-endian `u32` at `offset`, if the payload is long enough.
pub(crate) fn read_sequence(payload: &[u8], offset: usize) -> Option<u32> {
    payload.get(offset..offset + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_gaps_and_late_packets() {
        let mut s = SequenceStats::default();
        for seq in [5, 6, 7, 9, 8, 10, 10] {
            s.observe(seq);
        }
        assert_eq!((s.received, s.gaps, s.late, s.first, s.last), (7, 1, 2, Some(5), Some(10)));
        assert!(!s.in_order_without_loss());
    }

    #[test]
    fn handles_wraparound() {
        let mut s = SequenceStats::default();
        for seq in [u32::MAX - 1, u32::MAX, 0, 1] {
            s.observe(seq);
        }
        assert!(s.in_order_without_loss());
        assert_eq!(s.last, Some(1));
    }

    #[test]
    fn reads_network_order() {
        assert_eq!(read_sequence(&[0, 0, 1, 2, 9], 1), Some(0x0001_0209));
        assert_eq!(read_sequence(&[0, 1], 0), None);
    }
}
