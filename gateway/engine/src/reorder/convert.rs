//! `data_types` conversions on the CPU: every input type (int4, int8,
//! int16, int32; host or network byte order) to every output type (fp16,
//! bf16, fp32, fp64, int32, written in host byte order). DAQIRI converts
//! only on the GPU; this is the bit-exact oracle its kernels are held to:
//! an integer becomes an `f32` first (round to nearest even, as C's cast),
//! then fp16 or bf16 by round to nearest even, as `__float2half_rn` and
//! `__float2bfloat16_rn` do; fp64 and int32 come straight from the integer.

use daqiri_config::model::{DataTypes, Endianness, InputType, OutputType};

/// Bytes of output for `input_len` bytes of input, or `None` when the input
/// is not a whole number of samples.
pub fn output_len(types: &DataTypes, input_len: usize) -> Option<usize> {
    let out = types.output_type.bytes() as usize;
    match types.input_type {
        InputType::Int4 => Some(input_len * 2 * out),
        other => {
            let size = other.bits() as usize / 8;
            (input_len % size == 0).then_some(input_len / size * out)
        }
    }
}

/// Converts `input` into `output`, which must be [`output_len`] bytes.
pub fn convert(types: &DataTypes, input: &[u8], output: &mut [u8]) {
    assert_eq!(Some(output.len()), output_len(types, input.len()), "output length does not fit the input");
    let network = types.endianness == Endianness::Network;
    // One monomorphised loop per pair, so the compiler can vectorise each.
    match types.output_type {
        OutputType::Fp16 => by_input(types.input_type, network, input, output, |v| f16_bits(v as f32).to_ne_bytes()),
        OutputType::Bf16 => by_input(types.input_type, network, input, output, |v| bf16_bits(v as f32).to_ne_bytes()),
        OutputType::Fp32 => by_input(types.input_type, network, input, output, |v| (v as f32).to_ne_bytes()),
        OutputType::Fp64 => by_input(types.input_type, network, input, output, |v| f64::from(v).to_ne_bytes()),
        OutputType::Int32 => by_input(types.input_type, network, input, output, |v: i32| v.to_ne_bytes()),
    }
}

fn by_input<const OUT: usize>(
    input_type: InputType,
    network: bool,
    input: &[u8],
    output: &mut [u8],
    encode: impl Fn(i32) -> [u8; OUT],
) {
    match (input_type, network) {
        (InputType::Int4, _) => {
            // Two signed nibbles per byte, high nibble first.
            for (byte, out) in input.iter().zip(output.chunks_exact_mut(2 * OUT)) {
                let high = i32::from((*byte as i8) >> 4);
                let low = i32::from(((*byte << 4) as i8) >> 4);
                out[..OUT].copy_from_slice(&encode(high));
                out[OUT..].copy_from_slice(&encode(low));
            }
        }
        (InputType::Int8, _) => samples::<1, OUT>(input, output, |b| i32::from(b[0] as i8), &encode),
        (InputType::Int16, false) => samples::<2, OUT>(input, output, |b| i32::from(i16::from_ne_bytes(b)), &encode),
        (InputType::Int16, true) => samples::<2, OUT>(input, output, |b| i32::from(i16::from_be_bytes(b)), &encode),
        (InputType::Int32, false) => samples::<4, OUT>(input, output, i32::from_ne_bytes, &encode),
        (InputType::Int32, true) => samples::<4, OUT>(input, output, i32::from_be_bytes, &encode),
    }
}

fn samples<const IN: usize, const OUT: usize>(
    input: &[u8],
    output: &mut [u8],
    decode: impl Fn([u8; IN]) -> i32,
    encode: &impl Fn(i32) -> [u8; OUT],
) {
    for (i, o) in input.chunks_exact(IN).zip(output.chunks_exact_mut(OUT)) {
        o.copy_from_slice(&encode(decode(i.try_into().expect("chunks_exact"))));
    }
}

/// `f32` to IEEE binary16 bits, round to nearest even (`__float2half_rn`);
/// too large becomes infinity. Written out rather than taken from the
/// `half` crate so the tests can hold it against `half` independently.
pub fn f16_bits(value: f32) -> u16 {
    let x = value.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exponent = ((x >> 23) & 0xff) as i32;
    let mantissa = x & 0x7f_ffff;
    if exponent == 0xff {
        let nan = if mantissa != 0 { 0x200 | (mantissa >> 13) as u16 } else { 0 };
        return sign | 0x7c00 | nan;
    }
    let e = exponent - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal in binary16 (or zero): the implicit bit joins the mantissa.
        if e < -10 {
            return sign;
        }
        let m = mantissa | 0x80_0000;
        let shift = (14 - e) as u32;
        return sign | round_shift(m, shift) as u16;
    }
    // A carry out of the mantissa moves into the exponent, as it should (up to infinity).
    sign | round_shift(((e as u32) << 23) | mantissa, 13) as u16
}

/// `f32` to bfloat16 bits, round to nearest even (`__float2bfloat16_rn`).
pub fn bf16_bits(value: f32) -> u16 {
    let x = value.to_bits();
    if value.is_nan() {
        return ((x >> 16) | 0x40) as u16;
    }
    round_shift(x, 16) as u16
}

/// `value >> shift`, rounded to nearest, ties to even.
fn round_shift(value: u32, shift: u32) -> u32 {
    let half = 1u32 << (shift - 1);
    let rest = value & ((1u32 << shift) - 1);
    let kept = value >> shift;
    if rest > half || (rest == half && kept & 1 == 1) { kept + 1 } else { kept }
}
