//! Every `data_types` pair on the CPU against a reference computed another
//! way: samples decoded by arithmetic rather than shifts and byte-order
//! calls, fp16 and bf16 rounded by the `half` crate.

use daqiri::config::model::{DataTypes, Endianness, InputType, OutputType};
use daqiri::reorder::convert::{convert, output_len};

const INPUTS: [InputType; 4] = [InputType::Int4, InputType::Int8, InputType::Int16, InputType::Int32];
const OUTPUTS: [OutputType; 5] =
    [OutputType::Fp16, OutputType::Bf16, OutputType::Fp32, OutputType::Fp64, OutputType::Int32];
const ORDERS: [Endianness; 2] = [Endianness::Host, Endianness::Network];

/// Input bytes for `input` that cover its edges and a spread of values.
fn input_bytes(input: InputType) -> Vec<u8> {
    match input {
        // Every byte: every pair of nibbles, -8 and 7 included.
        InputType::Int4 | InputType::Int8 => (0..=255u8).collect(),
        // Every 16-bit pattern.
        InputType::Int16 => (0..=u16::MAX).flat_map(|v| v.to_le_bytes()).collect(),
        InputType::Int32 => {
            let edges = [
                i32::MIN,
                i32::MAX,
                0,
                -1,
                1,
                65504,
                65519,
                65520,
                -65520,
                (1 << 24) + 1,
                -(1 << 24) - 3,
                (1 << 30) + 65,
                0x7fff_ff80,
            ];
            let mut state = 0x2545_f491_4f6c_dd1du64;
            let random = (0..100_000).map(move |_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as i32 >> (state % 31)
            });
            edges.into_iter().chain(random).flat_map(|v| v.to_le_bytes()).collect()
        }
    }
}

/// The samples of `bytes`, decoded by arithmetic.
fn samples(input: InputType, order: Endianness, bytes: &[u8]) -> Vec<i64> {
    let signed = |value: u64, bits: u32| {
        let value = value as i64;
        if value >= 1 << (bits - 1) { value - (1 << bits) } else { value }
    };
    let width = match input {
        InputType::Int4 => {
            return bytes.iter().flat_map(|&b| [signed(u64::from(b / 16), 4), signed(u64::from(b % 16), 4)]).collect();
        }
        InputType::Int8 => 1,
        InputType::Int16 => 2,
        InputType::Int32 => 4,
    };
    bytes
        .chunks(width)
        .map(|chunk| {
            let value = match order {
                // This machine is little-endian: host order is least significant byte first.
                Endianness::Host => chunk.iter().rev().fold(0u64, |acc, &b| acc * 256 + u64::from(b)),
                Endianness::Network => chunk.iter().fold(0u64, |acc, &b| acc * 256 + u64::from(b)),
            };
            signed(value, 8 * width as u32)
        })
        .collect()
}

fn expected(output: OutputType, sample: i64) -> Vec<u8> {
    let as_f32 = sample as f32;
    match output {
        OutputType::Fp16 => half::f16::from_f32(as_f32).to_bits().to_le_bytes().to_vec(),
        OutputType::Bf16 => half::bf16::from_f32(as_f32).to_bits().to_le_bytes().to_vec(),
        OutputType::Fp32 => as_f32.to_le_bytes().to_vec(),
        OutputType::Fp64 => (sample as f64).to_le_bytes().to_vec(),
        OutputType::Int32 => (sample as i32).to_le_bytes().to_vec(),
    }
}

#[test]
fn every_input_output_and_byte_order_matches_the_reference() {
    const { assert!(cfg!(target_endian = "little"), "the reference assumes a little-endian host") };
    for input in INPUTS {
        let bytes = input_bytes(input);
        for output in OUTPUTS {
            for order in ORDERS {
                let types = DataTypes { input_type: input, output_type: output, endianness: order };
                let mut out = vec![0u8; output_len(&types, bytes.len()).unwrap()];
                convert(&types, &bytes, &mut out);
                let size = output.bytes() as usize;
                for (i, (sample, got)) in samples(input, order, &bytes).into_iter().zip(out.chunks(size)).enumerate() {
                    assert_eq!(
                        got,
                        expected(output, sample),
                        "{input:?} -> {output:?} ({order:?}), sample {i} = {sample}"
                    );
                }
                // Lengths that end part-way through a vector of samples convert the same.
                let unit = (input.bits() as usize / 8).max(1);
                for cut in [1, 3, 15, 17, 33, 65] {
                    let head = &bytes[..cut * unit];
                    let out_head = &out[..output_len(&types, head.len()).unwrap()];
                    let mut got = vec![0u8; out_head.len()];
                    convert(&types, head, &mut got);
                    assert_eq!(got, out_head, "{input:?} -> {output:?} ({order:?}), first {} input bytes", head.len());
                }
            }
        }
    }
}

#[test]
fn int4_is_signed_high_nibble_first() {
    let types = DataTypes { input_type: InputType::Int4, output_type: OutputType::Int32, endianness: Endianness::Host };
    let mut out = [0u8; 16];
    convert(&types, &[0x87, 0x0f], &mut out);
    let values: Vec<i32> = out.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(values, [-8, 7, 0, -1]);
}

#[test]
fn fp16_rounds_to_nearest_even_and_overflows_to_infinity() {
    let types = DataTypes { input_type: InputType::Int32, output_type: OutputType::Fp16, endianness: Endianness::Host };
    // 2049 is halfway between 2048 and 2050: even mantissa wins (2048); 2051 rounds up to 2052.
    let input: Vec<u8> = [2049i32, 2051, 65519, 65520].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = [0u8; 8];
    convert(&types, &input, &mut out);
    let bits: Vec<u16> = out.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    assert_eq!(bits, [0x6800, 0x6802, 0x7bff, 0x7c00]);
}

#[test]
fn partial_samples_have_no_output_length() {
    let types = DataTypes { input_type: InputType::Int16, output_type: OutputType::Fp32, endianness: Endianness::Host };
    assert_eq!(output_len(&types, 7), None);
    assert_eq!(output_len(&types, 8), Some(16));
}
