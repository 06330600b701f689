//! Which slots of a reorder aggregate no packet filled: what DAQIRI's
//! `get_reorder_missing_info()` tells, read from the burst that carries it.

/// The empty slots of one aggregate, as a bitmap of the filled ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingSlots<'a> {
    slots: u32,
    /// One bit per slot, set where a packet was placed.
    filled: &'a [u64],
}

impl<'a> MissingSlots<'a> {
    /// The aggregate's `slots` slots, of which those set in `filled` hold a packet.
    pub(crate) fn new(slots: u32, filled: &'a [u64]) -> Self {
        debug_assert!(filled.len() * 64 >= slots as usize, "one bit per slot");
        Self { slots, filled }
    }

    /// Slots in the aggregate (packets per batch, or fewer where the output
    /// buffer holds fewer).
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// How many slots are empty (zero-filled).
    pub fn count(&self) -> u32 {
        self.iter().count() as u32
    }

    /// Whether slot `slot` is empty; slots past the aggregate are not.
    pub fn is_missing(&self, slot: u32) -> bool {
        slot < self.slots && self.filled[slot as usize / 64] & (1 << (slot % 64)) == 0
    }

    /// The empty slots, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        let (slots, filled) = (self.slots, self.filled);
        (0..slots).filter(move |&s| filled[s as usize / 64] & (1 << (s % 64)) == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_slots_are_the_unset_bits_below_the_slot_count() {
        // Slots 0..70: all filled but 3, 64 and 69.
        let filled = [!(1u64 << 3), !((1 << 0) | (1 << 5)) & ((1 << 6) - 1)];
        let missing = MissingSlots::new(70, &filled);
        assert_eq!(missing.iter().collect::<Vec<_>>(), [3, 64, 69]);
        assert_eq!(missing.count(), 3);
        assert!(missing.is_missing(64) && !missing.is_missing(65) && !missing.is_missing(70));
    }
}
