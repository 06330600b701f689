// Drives DAQIRI's GPU reorder kernel for the gateway's gpu_reorder_vs_daqiri
// bench: one batch of packets, in arrival order, placed by sequence number into
// an aggregate as DAQIRI's engine does it (the packet pointers copied to the GPU
// from the host, then one launch), timed over REPS launches beside a device copy
// of the aggregate's size, and the aggregate written out for a byte-for-byte
// comparison. Built against the reference build's libdaqiri.a by
// tests/reference/build.sh (reorder-check); nothing of DAQIRI's is copied here.
//
//   daqiri_reorder_check PACKETS SLOTS STRIDE PAYLOAD_OFFSET PAYLOAD_LEN \
//       OUT_SLOT_LEN IN_TYPE OUT_TYPE ENDIANNESS REPS < packets > aggregate
//
// The packets (PACKETS of STRIDE bytes) come on stdin, each with its sequence
// number as a big-endian u32 at byte 0; slot = sequence % SLOTS, and a slot no
// packet fills stays zero. Types are DAQIRI's config names (int4 ... fp64, or
// "same" for a plain copy). One line on stderr: "launches_per_s=L copy_gbps=C"
// (the device copy of the aggregate: bytes read + written per second).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// DAQIRI's kernel entry point (its src/kernels.h), declared by its signature.
extern "C" void packet_reorder_copy_payload_by_sequence(
    void* out, const void* const* in, uint32_t input_payload_len, uint32_t output_payload_len,
    uint32_t payload_byte_offset, uint32_t num_pkts, uint16_t seq_bit_offset, uint8_t seq_bit_width,
    uint16_t batch_bit_offset, uint8_t batch_bit_width, uint8_t has_batch_number,
    uint32_t packets_per_batch, uint32_t max_slot_idx, uint8_t input_data_type,
    uint8_t output_data_type, uint8_t input_endianness, uint64_t* batch_id_out, cudaStream_t stream);

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// The kernel's type codes: DAQIRI's ReorderDataType order, 0 for "no conversion".
uint8_t type_code(const std::string& name) {
  const char* names[] = {"same", "int4", "int8", "int16", "int32", "fp16", "bf16", "fp32", "fp64"};
  for (uint8_t code = 0; code < sizeof(names) / sizeof(names[0]); ++code) {
    if (name == names[code]) return code;
  }
  std::fprintf(stderr, "unknown data type %s\n", name.c_str());
  std::exit(2);
}

uint32_t number(const char* text) { return static_cast<uint32_t>(std::strtoul(text, nullptr, 10)); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 11) {
    std::fprintf(stderr,
                 "usage: %s PACKETS SLOTS STRIDE PAYLOAD_OFFSET PAYLOAD_LEN OUT_SLOT_LEN IN_TYPE OUT_TYPE "
                 "host|network REPS < packets > aggregate\n",
                 argv[0]);
    return 2;
  }
  const uint32_t packets = number(argv[1]), slots = number(argv[2]), stride = number(argv[3]);
  const uint32_t offset = number(argv[4]), payload = number(argv[5]), out_slot = number(argv[6]);
  const uint8_t in_type = type_code(argv[7]), out_type = type_code(argv[8]);
  const uint8_t network = std::string(argv[9]) == "network" ? 1 : 0;
  const uint32_t reps = number(argv[10]);
  const size_t in_bytes = size_t{packets} * stride, out_bytes = size_t{slots} * out_slot;

  std::vector<uint8_t> host(in_bytes);
  if (std::fread(host.data(), 1, in_bytes, stdin) != in_bytes) {
    std::fprintf(stderr, "expected %zu bytes of packets on stdin\n", in_bytes);
    return 2;
  }
  uint8_t *input = nullptr, *output = nullptr, *copy = nullptr;
  const void** pointers = nullptr;
  uint64_t* batch_id = nullptr;
  check(cudaMalloc(&input, in_bytes), "cudaMalloc packets");
  check(cudaMalloc(&output, out_bytes), "cudaMalloc aggregate");
  check(cudaMalloc(&copy, out_bytes), "cudaMalloc copy target");
  check(cudaMalloc(&pointers, sizeof(void*) * packets), "cudaMalloc pointers");
  check(cudaMalloc(&batch_id, sizeof(uint64_t)), "cudaMalloc batch id");
  check(cudaMemcpy(input, host.data(), in_bytes, cudaMemcpyHostToDevice), "packets to the GPU");
  // DAQIRI leaves a missing packet's slot as it was: zero it, as ours does.
  check(cudaMemset(output, 0, out_bytes), "zeroing the aggregate");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");

  // As its engine: the packets' addresses in arrival order in host memory,
  // copied to the device on the plan's stream before every launch.
  std::vector<const void*> arrival(packets);
  for (uint32_t p = 0; p < packets; ++p) arrival[p] = input + size_t{p} * stride;
  const auto launch = [&] {
    check(cudaMemcpyAsync(pointers, arrival.data(), sizeof(void*) * packets, cudaMemcpyHostToDevice, stream),
          "pointers to the GPU");
    packet_reorder_copy_payload_by_sequence(output, pointers, payload, out_slot, offset, packets, 0, 32, 0, 0, 0,
                                            slots, slots - 1, in_type, out_type, network, batch_id, stream);
    check(cudaGetLastError(), "launching DAQIRI's reorder kernel");
  };
  launch();
  check(cudaStreamSynchronize(stream), "warm-up");
  auto start = std::chrono::steady_clock::now();
  for (uint32_t r = 0; r < reps; ++r) launch();
  check(cudaStreamSynchronize(stream), "reorder launches");
  const double launches = reps / seconds_since(start);

  check(cudaMemcpyAsync(copy, output, out_bytes, cudaMemcpyDeviceToDevice, stream), "warm-up copy");
  check(cudaStreamSynchronize(stream), "warm-up copy");
  start = std::chrono::steady_clock::now();
  for (uint32_t r = 0; r < reps; ++r) {
    check(cudaMemcpyAsync(copy, output, out_bytes, cudaMemcpyDeviceToDevice, stream), "device copy");
  }
  check(cudaStreamSynchronize(stream), "device copies");
  const double copy_rate = 2.0 * out_bytes * reps / seconds_since(start);

  host.resize(out_bytes);
  check(cudaMemcpy(host.data(), output, out_bytes, cudaMemcpyDeviceToHost), "aggregate to the host");
  if (std::fwrite(host.data(), 1, out_bytes, stdout) != out_bytes) {
    std::fprintf(stderr, "writing the aggregate failed\n");
    return 1;
  }
  std::fprintf(stderr, "launches_per_s=%.3f copy_gbps=%.1f\n", launches, copy_rate / 1e9);
  return 0;
}
