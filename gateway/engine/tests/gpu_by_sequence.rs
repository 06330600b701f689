//! The kernels libdaqiri exports as DAQIRI's (`daqiri::gpu::launch_by_sequence`,
//! `launch_gather`) against the CPU oracle, on the GPU machine: sequence
//! fields of odd widths and offsets, payloads at unaligned offsets, null
//! entries, packets past `max_slot`, batch ids from a field and from the
//! sequence number. Run by `tests/gpu/run.sh` (skipped without a GPU).
#![cfg(feature = "cuda")]
#![allow(unsafe_code)]

use daqiri::config::model::{DataTypes, Endianness, InputType, OutputType};
use daqiri::gpu::{DeviceBuffer, SequenceLayout, launch_by_sequence, launch_gather, new_stream};
use daqiri::reorder::convert::{convert, output_len};

mod common;
use common::Random;

/// Writes `value` into `width` bits from bit `offset`, most significant first.
fn put_bits(packet: &mut [u8], offset: usize, width: usize, value: u32) {
    for i in 0..width {
        let bit = offset + i;
        let set = (value >> (width - 1 - i)) & 1 == 1;
        let mask = 0x80u8 >> (bit % 8);
        packet[bit / 8] = if set { packet[bit / 8] | mask } else { packet[bit / 8] & !mask };
    }
}

struct Case {
    types: Option<DataTypes>,
    slots: u32,
    payload_offset: usize,
    in_len: usize,
    seq_bits: (u16, u8),
    batch_bits: Option<(u16, u8)>,
}

fn check(case: &Case) {
    let stride = case.payload_offset + case.in_len + 3;
    let out_slot = case.types.as_ref().map_or(case.in_len, |t| output_len(t, case.in_len).expect("whole samples"));
    let mut random = Random(0x9e37_79b9_7f4a_7c15 ^ u64::from(case.slots) << 8 ^ case.payload_offset as u64);
    // Slots in shuffled order, one packet per slot of batch 5, plus one past max_slot.
    let max_slot = case.slots - 2;
    let mut order: Vec<u32> = (0..case.slots).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (random.next() % (i as u64 + 1)) as usize);
    }
    let mut packets: Vec<u8> = (0..order.len() * stride).map(|_| random.next() as u8).collect();
    for (p, &slot) in order.iter().enumerate() {
        let packet = &mut packets[p * stride..][..stride];
        put_bits(packet, usize::from(case.seq_bits.0), usize::from(case.seq_bits.1), 5 * case.slots + slot);
        if let Some((offset, width)) = case.batch_bits {
            put_bits(packet, usize::from(offset), usize::from(width), 77);
        }
    }
    let input = DeviceBuffer::from_host(0, &packets).expect("packets on GPU 0");
    // Every 5th packet is a null entry: skipped, its slot left as it was (0xEE).
    let addresses: Vec<u8> = (0..order.len())
        .flat_map(|p| if p % 5 == 4 { 0 } else { input.slice(p * stride, stride).ptr().address() }.to_ne_bytes())
        .collect();
    let table = DeviceBuffer::from_host(0, &addresses).expect("table on GPU 0");
    let output = DeviceBuffer::from_host(0, &vec![0xEE; case.slots as usize * out_slot]).expect("output");
    let batch = DeviceBuffer::zeroed(0, 8).expect("batch id");
    let stream = new_stream(0).expect("a stream on GPU 0");
    let layout = SequenceLayout {
        payload_offset: case.payload_offset as u32,
        in_len: case.in_len as u32,
        out_len: out_slot as u32,
        seq_bits: case.seq_bits,
        batch_bits: case.batch_bits,
        packets_per_batch: case.slots,
        max_slot,
    };
    let address = |b: &DeviceBuffer| b.slice(0, b.len()).ptr().address();
    // SAFETY: the table holds packet addresses of `input` (or 0), each
    // `stride` bytes; `output` has `slots` slots; the stream is synchronised
    // before any of them is dropped.
    unsafe {
        launch_by_sequence(
            stream.cu_stream(),
            address(&table),
            order.len() as u32,
            address(&output),
            &layout,
            case.types.as_ref(),
            address(&batch),
        )
    }
    .expect("launch");
    stream.synchronize().expect("kernel ran");
    let got = output.to_host().expect("output back");
    let mut expected = vec![0xEEu8; got.len()];
    for (p, &slot) in order.iter().enumerate() {
        if p % 5 == 4 || slot > max_slot {
            continue;
        }
        let payload = &packets[p * stride + case.payload_offset..][..case.in_len];
        let out = &mut expected[slot as usize * out_slot..][..out_slot];
        match &case.types {
            Some(types) => convert(types, payload, out),
            None => out.copy_from_slice(payload),
        }
    }
    for slot in 0..case.slots as usize {
        let range = slot * out_slot..(slot + 1) * out_slot;
        assert!(got[range.clone()] == expected[range.clone()], "{:?}: slot {slot} differs", case.types);
    }
    let batch_id = u64::from_ne_bytes(batch.to_host().expect("batch id back").try_into().expect("8 bytes"));
    // Packet 0 is never a null entry (p % 5 == 4 are).
    assert_eq!(batch_id, if case.batch_bits.is_some() { 77 } else { 5 });
}

#[test]
fn packets_land_in_the_slot_their_sequence_number_names() {
    let types = |input, output, endianness| Some(DataTypes { input_type: input, output_type: output, endianness });
    for (types, payload_offset, in_len) in [
        (None, 64, 4096),
        (None, 13, 1000),
        (types(InputType::Int4, OutputType::Fp16, Endianness::Host), 64, 4096),
        (types(InputType::Int8, OutputType::Bf16, Endianness::Host), 9, 1024),
        (types(InputType::Int16, OutputType::Fp32, Endianness::Network), 64, 2048),
        (types(InputType::Int32, OutputType::Fp64, Endianness::Network), 7, 512),
        (types(InputType::Int16, OutputType::Int32, Endianness::Host), 64, 2048),
    ] {
        check(&Case { types: types.clone(), slots: 300, payload_offset, in_len, seq_bits: (0, 32), batch_bits: None });
        // A 20-bit sequence number from bit 4, a batch number field after it.
        check(&Case { types, slots: 64, payload_offset, in_len, seq_bits: (4, 20), batch_bits: Some((24, 8)) });
    }
}

#[test]
fn gather_places_packets_in_arrival_order() {
    let (count, offset, len) = (97usize, 11usize, 1500usize);
    let stride = offset + len;
    let mut random = Random(42);
    let packets: Vec<u8> = (0..count * stride).map(|_| random.next() as u8).collect();
    let input = DeviceBuffer::from_host(0, &packets).expect("packets");
    let addresses: Vec<u8> =
        (0..count).flat_map(|p| input.slice(p * stride, stride).ptr().address().to_ne_bytes()).collect();
    let table = DeviceBuffer::from_host(0, &addresses).expect("table");
    let output = DeviceBuffer::zeroed(0, count * len).expect("output");
    let stream = new_stream(0).expect("stream");
    // SAFETY: as in `check`.
    unsafe {
        launch_gather(
            stream.cu_stream(),
            table.slice(0, table.len()).ptr().address(),
            count as u32,
            output.slice(0, output.len()).ptr().address(),
            len as u32,
            offset as u32,
        )
    }
    .expect("launch");
    stream.synchronize().expect("kernel ran");
    let got = output.to_host().expect("output back");
    for p in 0..count {
        assert_eq!(&got[p * len..][..len], &packets[p * stride + offset..][..len], "packet {p}");
    }
}

#[test]
fn a_slot_narrower_than_the_converted_payload_is_refused() {
    let layout = SequenceLayout {
        payload_offset: 0,
        in_len: 1024,
        out_len: 1024,
        seq_bits: (0, 32),
        batch_bits: None,
        packets_per_batch: 8,
        max_slot: 7,
    };
    let types = DataTypes { input_type: InputType::Int8, output_type: OutputType::Fp32, endianness: Endianness::Host };
    // SAFETY: refused before anything is read or launched.
    let refused = unsafe { launch_by_sequence(std::ptr::null_mut(), 0, 1, 0, &layout, Some(&types), 0) };
    let error = refused.expect_err("a 4096-byte conversion into 1024-byte slots");
    assert!(error.detail().contains("output_payload_len 1024"), "{}", error.detail());
}
