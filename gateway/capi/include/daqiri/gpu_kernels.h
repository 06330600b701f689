/*
 * daqiri-gateway: the GPU reorder kernels libdaqiri exports as DAQIRI's
 * does, for programs that launch them on their own streams (Apache-2.0).
 * In CUDA builds of libdaqiri only (package.sh --features cuda). `stream`
 * is a cudaStream_t (or CUstream); `in` a device table of packet
 * addresses. A call that cannot launch returns without launching and
 * leaves its reason in daqiri_gw_last_error().
 */
#ifndef DAQIRI_GW_GPU_KERNELS_H
#define DAQIRI_GW_GPU_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Data type codes: 0 the payload as it is; inputs 1 int4, 2 int8, 3 int16,
 * 4 int32; outputs 4 int32, 5 fp16, 6 bf16, 7 fp32, 8 fp64. Endianness of
 * the input: 0 host, 1 network. */
void packet_reorder_copy_payload_by_sequence(void *out, const void *const *const in, uint32_t input_payload_len,
                                             uint32_t output_payload_len, uint32_t payload_byte_offset,
                                             uint32_t num_pkts, uint16_t seq_bit_offset, uint8_t seq_bit_width,
                                             uint16_t batch_bit_offset, uint8_t batch_bit_width,
                                             uint8_t has_batch_number, uint32_t packets_per_batch,
                                             uint32_t max_slot_idx, uint8_t input_data_type,
                                             uint8_t output_data_type, uint8_t input_endianness,
                                             uint64_t *batch_id_out, void *stream);

void packet_gather_copy_payload(void *out, const void *const *const in, uint32_t payload_len,
                                uint32_t payload_byte_offset, uint32_t num_pkts, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DAQIRI_GW_GPU_KERNELS_H */
