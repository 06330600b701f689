//! `data_types` conversions on the CPU: every input type (int4, int8,
//! int16, int32; host or network byte order) to every output type (fp16,
//! bf16, fp32, fp64, int32, written in host byte order). DAQIRI converts
//! only on the GPU; this is the bit-exact oracle its kernels are held to:
//! an integer becomes an `f32` first (round to nearest even, as C's cast),
//! then fp16 or bf16 by round to nearest even, as `__float2half_rn` and
//! `__float2bfloat16_rn` do; fp64 and int32 come straight from the integer.

use daqiri_config::model::{DataTypes, Endianness, InputType, OutputType};

use super::encode::{Each, Encoder, bf16_from_int, f16_from_int};

/// Bytes of output for `input_len` bytes of input, or `None` when the input
/// is not a whole number of samples.
pub fn output_len(types: &DataTypes, input_len: usize) -> Option<usize> {
    let out = types.output_type.bytes() as usize;
    match types.input_type {
        InputType::Int4 => Some(input_len * 2 * out),
        other => {
            let size = other.bits() as usize / 8;
            input_len.is_multiple_of(size).then_some(input_len / size * out)
        }
    }
}

/// Converts `input` into `output`, which must be [`output_len`] bytes.
///
/// Compiled also for AVX2 and SSE4.1 and chosen at run time: the loops
/// below vectorise on the x86-64 baseline (SSE2) too, but packing narrower
/// lanes and unsigned selects need SSE4.1 to stay in vector registers.
/// fp16 goes through F16C where the CPU has it ([`super::fp16_x86`]).
#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1"))]
pub fn convert(types: &DataTypes, input: &[u8], output: &mut [u8]) {
    assert_eq!(Some(output.len()), output_len(types, input.len()), "output length does not fit the input");
    let network = types.endianness == Endianness::Network;
    // One monomorphised loop per pair, so the compiler can vectorise each.
    match types.output_type {
        #[cfg(target_arch = "x86_64")]
        OutputType::Fp16 if super::fp16_x86::available() => {
            by_input(types.input_type, network, input, output, super::fp16_x86::F16c)
        }
        OutputType::Fp16 => by_input(types.input_type, network, input, output, Each(|v| f16_from_int(v).to_ne_bytes())),
        OutputType::Bf16 => {
            by_input(types.input_type, network, input, output, Each(|v| bf16_from_int(v).to_ne_bytes()))
        }
        OutputType::Fp32 => by_input(types.input_type, network, input, output, Each(|v| (v as f32).to_ne_bytes())),
        OutputType::Fp64 => by_input(types.input_type, network, input, output, Each(|v| f64::from(v).to_ne_bytes())),
        OutputType::Int32 => by_input(types.input_type, network, input, output, Each(|v: i32| v.to_ne_bytes())),
    }
}

fn by_input(input_type: InputType, network: bool, input: &[u8], output: &mut [u8], encoder: impl Encoder) {
    match (input_type, network) {
        (InputType::Int4, _) => encoder.encode_int4(input, output),
        (InputType::Int8, _) => encoder.encode::<1>(input, output, |b| i32::from(b[0] as i8)),
        (InputType::Int16, false) => encoder.encode::<2>(input, output, |b| i32::from(i16::from_ne_bytes(b))),
        (InputType::Int16, true) => encoder.encode::<2>(input, output, |b| i32::from(i16::from_be_bytes(b))),
        (InputType::Int32, false) => encoder.encode::<4>(input, output, i32::from_ne_bytes),
        (InputType::Int32, true) => encoder.encode::<4>(input, output, i32::from_be_bytes),
    }
}
