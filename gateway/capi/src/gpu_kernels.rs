//! DAQIRI's exported GPU reorder kernels, `packet_reorder_copy_payload_by_sequence`
//! and `packet_gather_copy_payload`, which DAQIRI's programs (its benchmark
//! pipeline among them) launch on their own CUDA streams; ours run the
//! engine's kernels (reorder.cu's `by_sequence_*`). Declared for C in
//! `daqiri/gpu_kernels.h`; CUDA builds only (the `cuda` feature).
//!
//! DAQIRI's signatures return nothing, so a refused call (an argument out
//! of range, no driver) launches nothing and leaves its reason in the log
//! and in `daqiri_gw_last_error()`.

use std::ffi::c_void;

use daqiri::Error;
use daqiri::gpu::{SequenceLayout, launch_by_sequence, launch_gather};

use crate::args::data_types;
use crate::status::status_of;

fn required(what: &str, present: bool) -> daqiri::Result<()> {
    if present { Ok(()) } else { Err(Error::invalid(format!("{what} is null or zero: nothing launched"))) }
}

/// Places packets into the slots of `out` by the sequence number each
/// carries, converting samples as the data types say, on `stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn packet_reorder_copy_payload_by_sequence(
    out: *mut c_void,
    input: *const *const c_void,
    input_payload_len: u32,
    output_payload_len: u32,
    payload_byte_offset: u32,
    num_pkts: u32,
    seq_bit_offset: u16,
    seq_bit_width: u8,
    batch_bit_offset: u16,
    batch_bit_width: u8,
    has_batch_number: u8,
    packets_per_batch: u32,
    max_slot_idx: u32,
    input_data_type: u8,
    output_data_type: u8,
    input_endianness: u8,
    batch_id_out: *mut u64,
    stream: *mut c_void,
) {
    let launched = (|| {
        required("out", !out.is_null())?;
        required("in", !input.is_null())?;
        required("num_pkts", num_pkts != 0)?;
        required("input_payload_len", input_payload_len != 0)?;
        required("output_payload_len", output_payload_len != 0)?;
        required("packets_per_batch", packets_per_batch != 0)?;
        let types = data_types(input_data_type, output_data_type, input_endianness)?;
        let layout = SequenceLayout {
            payload_offset: payload_byte_offset,
            in_len: input_payload_len,
            out_len: output_payload_len,
            seq_bits: (seq_bit_offset, seq_bit_width),
            batch_bits: (has_batch_number != 0).then_some((batch_bit_offset, batch_bit_width)),
            packets_per_batch,
            max_slot: max_slot_idx,
        };
        // SAFETY: DAQIRI's contract for this call: a live stream, a device
        // table of packet addresses and an output the slots fit in.
        unsafe {
            launch_by_sequence(
                stream.cast(),
                input as u64,
                num_pkts,
                out as u64,
                &layout,
                types.as_ref(),
                batch_id_out as u64,
            )
        }
    })();
    status_of("packet_reorder_copy_payload_by_sequence", launched);
}

/// Copies each packet's payload to the slot of its arrival index, on `stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn packet_gather_copy_payload(
    out: *mut c_void,
    input: *const *const c_void,
    payload_len: u32,
    payload_byte_offset: u32,
    num_pkts: u32,
    stream: *mut c_void,
) {
    let launched = (|| {
        required("out", !out.is_null())?;
        required("in", !input.is_null())?;
        required("payload_len", payload_len != 0)?;
        required("num_pkts", num_pkts != 0)?;
        // SAFETY: DAQIRI's contract for this call, as above.
        unsafe { launch_gather(stream.cast(), input as u64, num_pkts, out as u64, payload_len, payload_byte_offset) }
    })();
    status_of("packet_gather_copy_payload", launched);
}
