//! Sample encoders: how one output type is written from integer samples,
//! portably here; [`super::fp16_x86`] adds F16C's. [`super::convert`]
//! picks one per conversion.

/// Writes samples of one output type: `decode` reads one sample of `IN`
/// bytes as an integer, `encode` writes it.
pub(super) trait Encoder {
    fn encode<const IN: usize>(&self, input: &[u8], output: &mut [u8], decode: impl Fn([u8; IN]) -> i32);

    /// int4 input: two signed nibbles per byte, high nibble first.
    fn encode_int4(&self, input: &[u8], output: &mut [u8]) {
        // Unpacked a block at a time into bytes and encoded as int8 is:
        // one loop doing both does not vectorise.
        const BLOCK: usize = 64;
        let mut nibbles = [0u8; 2 * BLOCK];
        let per_byte = output.len() / input.len().max(1);
        for (bytes, out) in input.chunks(BLOCK).zip(output.chunks_mut(BLOCK * per_byte)) {
            for (byte, pair) in bytes.iter().zip(nibbles.as_chunks_mut::<2>().0) {
                *pair = [nibble(byte >> 4) as u8, nibble(byte & 0xf) as u8];
            }
            self.encode::<1>(&nibbles[..2 * bytes.len()], out, |b| i32::from(b[0] as i8));
        }
    }
}

/// The signed value of the low four bits of `n`.
pub(super) fn nibble(n: u8) -> i8 {
    ((n << 4) as i8) >> 4
}

/// An encoder of one sample at a time into `OUT` bytes.
pub(super) struct Each<F>(pub(super) F);

impl<const OUT: usize, F: Fn(i32) -> [u8; OUT]> Encoder for Each<F> {
    fn encode<const IN: usize>(&self, input: &[u8], output: &mut [u8], decode: impl Fn([u8; IN]) -> i32) {
        for (i, o) in input.as_chunks::<IN>().0.iter().zip(output.as_chunks_mut::<OUT>().0) {
            *o = (self.0)(decode(*i));
        }
    }
}

/// An integer to binary16 bits as `__float2half_rn((float)v)`: to `f32`,
/// then round to nearest even. Written for integers only and without
/// branches, so a packet's loop vectorises: an integer is 0 or at least 1
/// in magnitude, so no binary16 subnormal occurs, and the one special case
/// is overflow to infinity.
pub(super) fn f16_from_int(v: i32) -> u16 {
    let x = (v as f32).to_bits();
    let sign = (x >> 16) & 0x8000;
    let magnitude = x & 0x7fff_ffff;
    // Exponent bias 127 becomes 15; 13 mantissa bits go, rounding to
    // nearest even. A carry out of the mantissa moves into the exponent.
    let rebiased = magnitude.wrapping_sub((127 - 15) << 23);
    let rounded = (rebiased + 0xfff + ((rebiased >> 13) & 1)) >> 13;
    let bits = if magnitude == 0 { 0 } else { rounded.min(0x7c00) };
    (sign | bits) as u16
}

/// An integer to bfloat16 bits as `__float2bfloat16_rn((float)v)`: the high
/// half of the `f32`, rounded to nearest even (no integer is NaN).
pub(super) fn bf16_from_int(v: i32) -> u16 {
    let x = (v as f32).to_bits();
    ((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable fp16 path, which a CPU with F16C never takes in `convert`.
    #[test]
    fn portable_fp16_matches_half_for_every_int16_and_int32_edges() {
        let edges = [i32::MIN, i32::MAX, 65504, 65519, 65520, -65520, 2049, 2051, (1 << 24) + 1];
        for v in (i32::from(i16::MIN)..=i32::from(i16::MAX)).chain(edges) {
            assert_eq!(f16_from_int(v), half::f16::from_f32(v as f32).to_bits(), "{v}");
            assert_eq!(bf16_from_int(v), half::bf16::from_f32(v as f32).to_bits(), "{v}");
        }
    }

    #[test]
    fn portable_int4_to_fp16_matches_half_for_every_byte() {
        let input: Vec<u8> = (0..=255).collect();
        let mut output = vec![0u8; input.len() * 4];
        Each(|v| f16_from_int(v).to_ne_bytes()).encode_int4(&input, &mut output);
        for (byte, out) in input.iter().zip(output.chunks(4)) {
            let expect = |n: u8| half::f16::from_f32(f32::from(nibble(n))).to_bits().to_ne_bytes();
            assert_eq!(out, [expect(byte >> 4), expect(byte & 0xf)].concat(), "{byte:#x}");
        }
    }
}
