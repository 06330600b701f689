// DAQIRI's S3 raw writer through libdaqiri, as DAQIRI's API reference uses
// it: a writer from an S3WriterConfig, a received burst submitted and freed
// at once, the write waited on and destroyed, the writer destroyed; then
// the misuses (a destroyed write or writer, a foreign one, a null
// out-parameter). A software-loopback port makes the burst: 16 frames,
// each a 42-byte header then payload(i). Usage: s3_test ENDPOINT BUCKET;
// tests/capi/run.sh reads the objects back with curl and compares them.
// Prints "s3_objects N" and "ok", or "FAIL ...".
#include <daqiri/daqiri.h>

#include "check.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

const char *kConfig = R"(
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - { name: tx, kind: host, num_bufs: 64, buf_size: 2048 }
    - { name: rx, kind: host, num_bufs: 64, buf_size: 2048 }
    interfaces:
    - name: lo
      address: loopback
      tx: { queues: [{ name: t, id: 0, cpu_core: 0, batch_size: 16, memory_regions: [tx] }] }
      rx: { queues: [{ name: r, id: 0, cpu_core: 1, batch_size: 16, timeout_us: 1000, memory_regions: [rx] }] }
)";

constexpr int kPackets = 16;
constexpr int kHeaders = 42;

// Payload byte `b` of packet `i` (tests/capi/run.sh computes the same).
uint8_t payload(int i, int b) { return static_cast<uint8_t>(b * 13 + i); }
int payload_len(int i) { return 200 + 37 * i; }

daqiri::BurstParams *loop_a_burst() {
  auto *msg = daqiri::create_tx_burst_params();
  daqiri::set_header(msg, 0, 0, kPackets, 1);
  CHECK(daqiri::get_tx_packet_burst(msg) == daqiri::Status::SUCCESS);
  for (int i = 0; i < kPackets; ++i) {
    auto *frame = static_cast<uint8_t *>(daqiri::get_packet_ptr(msg, i));
    std::memset(frame, 0, kHeaders);
    for (int b = 0; b < payload_len(i); ++b) { frame[kHeaders + b] = payload(i, b); }
    CHECK(daqiri::set_packet_lengths(msg, i, {kHeaders + payload_len(i)}) ==
          daqiri::Status::SUCCESS);
  }
  CHECK(daqiri::send_tx_burst(msg) == daqiri::Status::SUCCESS);
  daqiri::BurstParams *burst = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (daqiri::get_rx_burst(&burst, 0, 0) != daqiri::Status::SUCCESS) {
    if (std::chrono::steady_clock::now() > deadline) { return nullptr; }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return burst;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::printf("usage: s3_test ENDPOINT BUCKET\n");
    return 2;
  }
  CHECK(daqiri::daqiri_init(kConfig) == daqiri::Status::SUCCESS);
  auto *burst = loop_a_burst();
  CHECK(burst != nullptr && daqiri::get_num_packets(burst) == kPackets);

  daqiri::S3WriterConfig cfg;
  cfg.bucket = argv[2];
  cfg.region = "us-east-1";
  cfg.endpoint_override = argv[1];
  cfg.path_style = true;
  cfg.max_inflight_uploads = 4;
  daqiri::S3Writer *writer = nullptr;
  CHECK(daqiri::daqiri_s3_writer_create(cfg, &writer) == daqiri::Status::SUCCESS);

  // The headers skipped: each object is its packet's payload.
  daqiri::S3WriteHandle *handle = nullptr;
  CHECK(daqiri::daqiri_write_raw_to_s3_objects_async(writer, burst, "capi/run1/packet", kHeaders, &handle) ==
        daqiri::Status::SUCCESS);
  // Staged: the burst goes back before the uploads end.
  CHECK(daqiri::free_all_packets_and_burst_rx(burst) == daqiri::Status::SUCCESS);
  daqiri::S3WriteStatus status{};
  CHECK(daqiri::daqiri_s3_write_wait(handle, &status) == daqiri::Status::SUCCESS);
  CHECK(status.completed_objects == kPackets && status.failed_objects == 0);
  uint64_t bytes = 0;
  for (int i = 0; i < kPackets; ++i) { bytes += payload_len(i); }
  CHECK(status.bytes_uploaded == bytes);
  CHECK(daqiri::daqiri_s3_write_poll(handle, &status) == daqiri::Status::SUCCESS);
  CHECK(daqiri::daqiri_s3_write_destroy(handle) == daqiri::Status::SUCCESS);
  std::printf("s3_objects %u\n", status.completed_objects);

  // Misuse: answered by status, never a crash.
  CHECK(daqiri::daqiri_s3_write_destroy(handle) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::daqiri_s3_write_poll(handle, &status) == daqiri::Status::INVALID_PARAMETER);
  auto *foreign = reinterpret_cast<daqiri::S3WriteHandle *>(&status);
  CHECK(daqiri::daqiri_s3_write_wait(foreign, &status) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::daqiri_write_raw_to_s3_objects_async(writer, nullptr, "p", 0, &handle) == daqiri::Status::NULL_PTR);
  auto *again = loop_a_burst();
  CHECK(daqiri::daqiri_write_raw_to_s3_objects_async(writer, again, "p", 0, nullptr) == daqiri::Status::NULL_PTR);
  CHECK(daqiri::daqiri_write_raw_to_s3_objects_async(writer, again, "", 0, &handle) ==
        daqiri::Status::INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("prefix is empty") != std::string::npos);
  CHECK(daqiri::daqiri_s3_writer_destroy(writer) == daqiri::Status::SUCCESS);
  CHECK(daqiri::daqiri_s3_writer_destroy(writer) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::daqiri_write_raw_to_s3_objects_async(writer, again, "p", 0, &handle) ==
        daqiri::Status::INVALID_PARAMETER);
  daqiri::S3WriterConfig empty;
  CHECK(daqiri::daqiri_s3_writer_create(empty, &writer) == daqiri::Status::INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("bucket is empty") != std::string::npos);
  CHECK(daqiri::free_all_packets_and_burst_rx(again) == daqiri::Status::SUCCESS);
  daqiri::shutdown();

  if (failures == 0) {
    std::printf("ok\n");
  } else {
    std::printf("FAIL %d checks\n", failures);
  }
  return failures == 0 ? 0 : 1;
}
