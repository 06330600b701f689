//! Bit fields read as DAQIRI reads them: big-endian, bit by bit, from the
//! first byte of the packet as delivered.

use daqiri_config::model::BitField;

/// The field's value, or `None` when the packet ends before the field does.
/// Bit `i` of the field is bit `7 - (k % 8)` of byte `k / 8`, with
/// `k = bit_offset + i`, most significant bit first.
pub(crate) fn read(data: &[u8], field: BitField) -> Option<u32> {
    let (offset, width) = (field.bit_offset as usize, field.bit_width as usize);
    let end = offset + width;
    let bytes = data.get(offset / 8..end.div_ceil(8))?;
    // A field of at most 32 bits spans at most 5 bytes: one u64 holds them.
    let window = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    let unused_low_bits = end.div_ceil(8) * 8 - end;
    Some(((window >> unused_low_bits) & ((1u64 << width) - 1)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one bit at a time.
    fn by_bits(data: &[u8], offset: u32, width: u32) -> u32 {
        (0..width).fold(0, |acc, i| {
            let k = (offset + i) as usize;
            (acc << 1) | u32::from((data[k / 8] >> (7 - k % 8)) & 1)
        })
    }

    #[test]
    fn every_offset_and_width_matches_the_bitwise_definition() {
        let data: Vec<u8> = (0..16u32).map(|i| (i.wrapping_mul(0x9d) ^ 0x5a) as u8).collect();
        for width in 1..=32 {
            for offset in 0..=(data.len() as u32 * 8 - width) {
                let field = BitField { bit_offset: offset, bit_width: width };
                assert_eq!(read(&data, field), Some(by_bits(&data, offset, width)), "offset {offset} width {width}");
            }
        }
    }

    #[test]
    fn a_field_past_the_end_is_none() {
        assert_eq!(read(&[0xff; 4], BitField { bit_offset: 1, bit_width: 32 }), None);
        assert_eq!(read(&[0x12, 0x34, 0x56, 0x78], BitField { bit_offset: 0, bit_width: 32 }), Some(0x1234_5678));
    }
}
