//! C's integer arguments as the engine's indices, or an error naming them.

use daqiri::config::model::{DataTypes, Endianness, InputType, OutputType};
use daqiri::{Burst, Error};

/// A packet index as a burst's, or why not.
pub(crate) fn packet_index(burst: &Burst, idx: i32) -> daqiri::Result<usize> {
    usize::try_from(idx).ok().filter(|&i| i < burst.num_packets()).ok_or_else(|| {
        Error::invalid(format!("packet index {idx} is outside the burst's {} packets", burst.num_packets()))
    })
}

/// A segment index as a burst's, or why not.
pub(crate) fn segment_index(seg: i32) -> daqiri::Result<usize> {
    usize::try_from(seg).ok().filter(|&s| s < daqiri::MAX_SEGMENTS).ok_or_else(|| {
        Error::invalid(format!("segment {seg} does not exist: packets have at most {} segments", daqiri::MAX_SEGMENTS))
    })
}

/// A port id.
pub(crate) fn port_id(port: i32) -> daqiri::Result<u16> {
    u16::try_from(port).map_err(|_| Error::invalid(format!("port {port} does not exist")))
}

/// A queue id.
pub(crate) fn queue_id(queue: i32) -> daqiri::Result<u16> {
    u16::try_from(queue).map_err(|_| Error::invalid(format!("queue {queue} does not exist")))
}

/// DAQIRI's data type codes of its GPU reorder calls (gpu_kernels.h): 0
/// leaves the payload as it is.
#[cfg_attr(
    not(feature = "cuda"),
    allow(dead_code, reason = "called by the CUDA build's kernels; tested in every build")
)]
pub(crate) fn data_types(input: u8, output: u8, endianness: u8) -> daqiri::Result<Option<DataTypes>> {
    if input == 0 || output == 0 {
        return Ok(None);
    }
    let input_type = match input {
        1 => InputType::Int4,
        2 => InputType::Int8,
        3 => InputType::Int16,
        4 => InputType::Int32,
        _ => return Err(Error::invalid(format!("input_data_type {input} is not an integer type (1-4)"))),
    };
    let output_type = match output {
        4 => OutputType::Int32,
        5 => OutputType::Fp16,
        6 => OutputType::Bf16,
        7 => OutputType::Fp32,
        8 => OutputType::Fp64,
        _ => return Err(Error::invalid(format!("output_data_type {output} is not an output type (4-8)"))),
    };
    let endianness = match endianness {
        0 => Endianness::Host,
        1 => Endianness::Network,
        _ => return Err(Error::invalid(format!("input_endianness {endianness} is neither host (0) nor network (1)"))),
    };
    Ok(Some(DataTypes { input_type, output_type, endianness }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daqiri_type_codes_name_the_engine_types() {
        assert_eq!(data_types(0, 5, 0).unwrap(), None);
        assert_eq!(data_types(3, 0, 1).unwrap(), None);
        let types = data_types(1, 5, 1).unwrap().unwrap();
        assert_eq!(
            (types.input_type, types.output_type, types.endianness),
            (InputType::Int4, OutputType::Fp16, Endianness::Network)
        );
        let types = data_types(4, 4, 0).unwrap().unwrap();
        assert_eq!((types.input_type, types.output_type), (InputType::Int32, OutputType::Int32));
        assert_eq!(data_types(2, 8, 0).unwrap().unwrap().output_type, OutputType::Fp64);
        for (input, output, order, field) in
            [(5, 5, 0, "input_data_type 5"), (1, 3, 0, "output_data_type 3"), (1, 5, 2, "input_endianness 2")]
        {
            let error = data_types(input, output, order).unwrap_err();
            assert!(error.detail().contains(field), "{}", error.detail());
        }
    }
}
