//! GPU reorder kernels against the CPU oracle (`daqiri::reorder::convert`),
//! on the GPU machine: every data_types pair, payloads aligned for the
//! 16-byte path and not, shuffled slots and missing ones. Run by
//! `tests/gpu/run.sh`, which skips them (and says so) where there is no GPU.
#![cfg(feature = "cuda")]

use daqiri::config::model::{DataTypes, Endianness, InputType, OutputType};
use daqiri::gpu::{DeviceBuffer, GpuReorder, Slots};
use daqiri::reorder::convert::{convert, output_len};

mod common;
use common::Random;

const INPUTS: [InputType; 4] = [InputType::Int4, InputType::Int8, InputType::Int16, InputType::Int32];
const OUTPUTS: [OutputType; 5] =
    [OutputType::Fp16, OutputType::Bf16, OutputType::Fp32, OutputType::Fp64, OutputType::Int32];
const ORDERS: [Endianness; 2] = [Endianness::Host, Endianness::Network];

/// One batch on the GPU: `slots` packets of `in_len` payload bytes at
/// `stride` apart (after `lead` bytes), placed in shuffled order with
/// every `missing`-th slot absent; the output must equal the CPU's.
fn check(types: Option<DataTypes>, slots: usize, in_len: usize, (lead, stride): (usize, usize), missing: usize) {
    let mut random = Random(0x2545_f491_4f6c_dd1d ^ (in_len as u64) << 20 ^ slots as u64);
    let input: Vec<u8> = (0..lead + slots * stride).map(|_| random.next() as u8).collect();
    let device_input = DeviceBuffer::from_host(0, &input).expect("input on GPU 0");
    // Packet p arrived p-th and belongs in slot order[p].
    let mut order: Vec<usize> = (0..slots).collect();
    for i in (1..slots).rev() {
        order.swap(i, (random.next() % (i as u64 + 1)) as usize);
    }
    let mut sources = vec![None; slots];
    for (p, &slot) in order.iter().enumerate() {
        if missing == 0 || slot % missing != missing - 1 {
            sources[slot] = Some(device_input.slice(lead + p * stride, in_len));
        }
    }
    let out_slot = types.as_ref().map_or(in_len, |t| output_len(t, in_len).expect("whole samples"));
    let output = DeviceBuffer::zeroed(0, slots * out_slot).expect("output on GPU 0");
    let mut gpu = GpuReorder::new(0).expect("reorder kernels on GPU 0");
    let event = gpu
        .launch(types.as_ref(), Slots { sources: &sources, in_len }, output.slice(0, output.len()), out_slot)
        .expect("launch");
    event.synchronize().expect("kernel ran");
    let got = output.to_host().expect("output back");
    let mut expected = vec![0u8; slots * out_slot];
    for (p, &slot) in order.iter().enumerate() {
        if sources[slot].is_none() {
            continue;
        }
        let payload = &input[lead + p * stride..][..in_len];
        let out = &mut expected[slot * out_slot..][..out_slot];
        match &types {
            Some(types) => convert(types, payload, out),
            None => out.copy_from_slice(payload),
        }
    }
    for slot in 0..slots {
        let range = slot * out_slot..(slot + 1) * out_slot;
        assert!(
            got[range.clone()] == expected[range.clone()],
            "{types:?}, {in_len} B payloads at {lead}+{stride}k: slot {slot} differs from the CPU oracle \
             (first bytes: GPU {:02x?}, CPU {:02x?})",
            &got[range.start..range.start + 16.min(out_slot)],
            &expected[range.start..range.start + 16.min(out_slot)],
        );
    }
}

#[test]
fn gpu_every_pair_matches_the_cpu_oracle_bit_for_bit() {
    for input in INPUTS {
        for output in OUTPUTS {
            for order in ORDERS {
                let types = DataTypes { input_type: input, output_type: output, endianness: order };
                // Aligned, whole 16-byte words: the vector path.
                check(Some(types.clone()), 64, 1024, (0, 1024), 7);
                // Payload offsets and lengths that are not: the per-sample path.
                let in_len = if input == InputType::Int32 { 1020 } else { 1022 };
                check(Some(types.clone()), 37, in_len, (44, 1090), 5);
                // More slots than a launch passes by value: the pinned table.
                check(Some(types), 1100, 64, (0, 64), 13);
            }
        }
    }
}

#[test]
fn gpu_copy_places_payloads_unchanged() {
    check(None, 128, 8192, (0, 8192), 9);
    check(None, 33, 1001, (3, 1500), 4);
    // The slot addresses by value up to 1,024 slots, from the pinned table past it.
    check(None, 1024, 64, (0, 64), 10);
    check(None, 1025, 64, (0, 64), 10);
    check(None, 3000, 40, (8, 72), 17);
}

#[test]
fn gpu_every_int16_value_converts_as_the_cpu_does() {
    // One slot holding all 65,536 int16 patterns, for each output and order.
    for output in OUTPUTS {
        for order in ORDERS {
            let types = DataTypes { input_type: InputType::Int16, output_type: output, endianness: order };
            let input: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
            let device = DeviceBuffer::from_host(0, &input).expect("input");
            let out_len = output_len(&types, input.len()).unwrap();
            let out = DeviceBuffer::zeroed(0, out_len).expect("output");
            let mut gpu = GpuReorder::new(0).expect("kernels");
            let sources = [Some(device.slice(0, input.len()))];
            let slots = Slots { sources: &sources, in_len: input.len() };
            gpu.launch(Some(&types), slots, out.slice(0, out_len), out_len).expect("launch").synchronize().unwrap();
            let mut expected = vec![0u8; out_len];
            convert(&types, &input, &mut expected);
            assert!(out.to_host().unwrap() == expected, "{output:?} ({order:?}) differs from the CPU oracle");
        }
    }
}

#[test]
fn gpu_refuses_an_output_too_small() {
    let input = DeviceBuffer::zeroed(0, 4096).expect("input");
    let out = DeviceBuffer::zeroed(0, 1000).expect("output");
    let mut gpu = GpuReorder::new(0).expect("kernels");
    let sources = [Some(input.slice(0, 1024))];
    let err = gpu.launch(None, Slots { sources: &sources, in_len: 1024 }, out.slice(0, 1000), 1024).unwrap_err();
    assert!(err.to_string().contains("do not fit an output of 1000 bytes"), "{err}");
}
