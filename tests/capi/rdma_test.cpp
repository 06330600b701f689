// DAQIRI's RDMA calls on libdaqiri, as DAQIRI's RDMA bench uses them, with
// what the bench does not check: every message's bytes and work request id,
// the order of completions, and the misuses (a posted request freed or
// reused, a region not the queue's, a side not the connection's), each
// answered by a status. Runs in the VM test bed on soft-RoCE (rxe0 at
// 10.77.0.1: tests/capi/daqiri_rdma_vm.sh); prints "N checks, M failed".
#include <daqiri/daqiri.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"

namespace {

#define CHECK_STATUS(expr, want) CHECK((expr) == daqiri::Status::want)

// Its bench's shape: a client and a server interface of one device, the
// regions named for each side and direction (config/rdma_bench.rs fills
// each queue's from them), the client aimed at the server by the bench section.
const char *kConfig = R"(
daqiri:
  cfg:
    version: 1
    stream_type: socket
    master_core: 0
    memory_regions:
    - { name: DATA_RX_GPU_SERVER, kind: host, num_bufs: 16, buf_size: 70000 }
    - { name: DATA_TX_GPU_SERVER, kind: host, num_bufs: 16, buf_size: 70000 }
    - { name: DATA_TX_GPU_CLIENT, kind: host, num_bufs: 16, buf_size: 70000 }
    - { name: DATA_RX_GPU_CLIENT, kind: host, num_bufs: 16, buf_size: 70000 }
    interfaces:
    - name: my_client
      address: 10.77.0.1
      socket_config: { mode: client, local_addr: "roce://10.77.0.1" }
      roce_config: { transport_mode: RC }
      tx: { queues: [{ name: ctx, id: 0, batch_size: 1, cpu_core: 1 }] }
      rx: { queues: [{ name: crx, id: 0, batch_size: 1, cpu_core: 1 }] }
    - name: my_server
      address: 10.77.0.1
      socket_config: { mode: server, local_addr: "roce://10.77.0.1:18795" }
      roce_config: { transport_mode: RC }
      tx: { queues: [{ name: stx, id: 0, batch_size: 1, cpu_core: 0 }] }
      rx: { queues: [{ name: srx, id: 0, batch_size: 1, cpu_core: 0 }] }
rdma_bench_server: { server: true, server_address: 10.77.0.1, server_port: 18795 }
rdma_bench_client: { server: false, client_address: 10.77.0.1, server_address: 10.77.0.1, server_port: 18795 }
)";

constexpr int kMessages = 200;
constexpr int kInFlight = 8;

uint32_t length_of(int k) { return 1000 + static_cast<uint32_t>(k) * 311; }
uint8_t byte_of(int k, uint32_t i) { return static_cast<uint8_t>(k * 13 + i * 7 + (i >> 8)); }

daqiri::BurstParams *request(daqiri::RDMAOpCode op, uintptr_t conn, bool server, uint64_t wr_id, const char *mr) {
  auto *burst = daqiri::create_tx_burst_params();
  if (daqiri::rdma_set_header(burst, op, conn, server, 1, wr_id, mr) != daqiri::Status::SUCCESS ||
      !daqiri::is_tx_burst_available(burst) || daqiri::get_tx_packet_burst(burst) != daqiri::Status::SUCCESS) {
    daqiri::free_tx_metadata(burst);
    return nullptr;
  }
  return burst;
}

// A completion's transport_hdr, as DAQIRI's programs read it.
bool transport_reads(const daqiri::BurstParams *done, daqiri::RDMAOpCode op, uint64_t wr_id, uintptr_t conn,
                     bool server, const std::string &region) {
  const auto &t = done->transport_hdr;
  return t.version == 1 && t.opcode == op && t.status == daqiri::Status::SUCCESS && t.wr_id == wr_id &&
         t.conn_id == conn && t.server == server && t.tx == (op == daqiri::RDMAOpCode::SEND) &&
         t.local_mr_name == region && t.num_pkts == done->hdr.hdr.num_pkts && t.num_pkts == 1;
}

// The next completion of `conn`, waiting up to 30 s.
daqiri::BurstParams *completion(uintptr_t conn, bool server) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    daqiri::BurstParams *burst = nullptr;
    if (daqiri::get_rx_burst(&burst, conn, server) == daqiri::Status::SUCCESS) { return burst; }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return nullptr;
}

// The client SENDs kMessages messages of growing length, kInFlight at a
// time; each SEND completion comes back with its work request id, in order.
void client(uintptr_t conn) {
  int posted = 0, completed = 0;
  while (completed < kMessages) {
    while (posted < kMessages && posted - completed < kInFlight) {
      auto *send = request(daqiri::RDMAOpCode::SEND, conn, false, 1000 + posted, "DATA_TX_GPU_CLIENT");
      if (send == nullptr) { break; }
      auto *bytes = static_cast<uint8_t *>(daqiri::get_packet_ptr(send, 0));
      for (uint32_t i = 0; i < length_of(posted); ++i) { bytes[i] = byte_of(posted, i); }
      CHECK_STATUS(daqiri::set_packet_lengths(send, 0, {static_cast<int>(length_of(posted))}), SUCCESS);
      CHECK_STATUS(daqiri::send_tx_burst(send), SUCCESS);
      if (posted == 0) {
        // Posted: the library holds it until its completion.
        CHECK_STATUS(daqiri::free_tx_burst(send), INVALID_PARAMETER);
        CHECK(std::string(daqiri::last_error()).find("is posted") != std::string::npos);
        CHECK_STATUS(daqiri::send_tx_burst(send), INVALID_PARAMETER);
      }
      ++posted;
    }
    auto *done = completion(conn, false);
    CHECK(done != nullptr);
    if (done == nullptr) { return; }
    CHECK(daqiri::rdma_get_opcode(done) == daqiri::RDMAOpCode::SEND);
    CHECK(daqiri_gw_rdma_get_wr_id(done) == static_cast<uint64_t>(1000 + completed));
    CHECK(daqiri::get_connection_id(done) == conn);
    CHECK(transport_reads(done, daqiri::RDMAOpCode::SEND, 1000 + completed, conn, false, "DATA_TX_GPU_CLIENT"));
    CHECK_STATUS(daqiri::free_tx_burst(done), SUCCESS);
    ++completed;
  }
}

// The server keeps kInFlight RECEIVEs posted; each completes with the next
// message, byte for byte as sent, with the RECEIVE's own work request id.
void server(uintptr_t conn) {
  int posted = 0, received = 0;
  while (received < kMessages) {
    while (posted < kMessages && posted - received < kInFlight) {
      auto *receive = request(daqiri::RDMAOpCode::RECEIVE, conn, true, 5000 + posted, "DATA_RX_GPU_SERVER");
      CHECK(receive != nullptr);
      if (receive == nullptr) { return; }
      CHECK_STATUS(daqiri::set_packet_lengths(receive, 0, {70000}), SUCCESS);
      CHECK_STATUS(daqiri::send_tx_burst(receive), SUCCESS);
      ++posted;
    }
    auto *done = completion(conn, true);
    CHECK(done != nullptr);
    if (done == nullptr) { return; }
    CHECK(daqiri::rdma_get_opcode(done) == daqiri::RDMAOpCode::RECEIVE);
    CHECK(daqiri_gw_rdma_get_wr_id(done) == static_cast<uint64_t>(5000 + received));
    CHECK(daqiri::get_num_packets(done) == 1);
    CHECK(transport_reads(done, daqiri::RDMAOpCode::RECEIVE, 5000 + received, conn, true, "DATA_RX_GPU_SERVER"));
    const auto length = daqiri::get_packet_length(done, 0);
    const auto *bytes = static_cast<const uint8_t *>(daqiri::get_segment_packet_ptr(done, 0, 0));
    bool exact = length == length_of(received) && bytes != nullptr;
    for (uint32_t i = 0; exact && i < length; ++i) { exact = bytes[i] == byte_of(received, i); }
    CHECK(exact);
    CHECK_STATUS(daqiri::free_tx_burst(done), SUCCESS);
    ++received;
  }
}

}  // namespace

int main() {
  if (daqiri::daqiri_init_from_yaml_string(kConfig) != daqiri::Status::SUCCESS) {
    std::printf("FAIL daqiri_init: %s\n", daqiri::last_error());
    return 1;
  }
  uintptr_t server_conn = 0, client_conn = 0;
  CHECK_STATUS(daqiri::rdma_connect_to_server("10.77.0.1", 18795, "10.77.0.1", &client_conn), SUCCESS);
  // The server's side of it: taken once; a second call finds none free.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (daqiri::rdma_get_server_conn_id("10.77.0.1", 18795, &server_conn) != daqiri::Status::SUCCESS &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(server_conn != 0 && client_conn != 0 && server_conn != client_conn);
  uintptr_t again = 0;
  CHECK_STATUS(daqiri::rdma_get_server_conn_id("10.77.0.1", 18795, &again), NO_SPACE_AVAILABLE);
  CHECK_STATUS(daqiri::rdma_get_server_conn_id("10.77.0.1", 18796, &again), INVALID_PARAMETER);
  uint16_t port = 9, queue = 9;
  CHECK_STATUS(daqiri::rdma_get_port_queue(server_conn, &port, &queue), SUCCESS);
  CHECK(port == 1 && queue == 0);

  // Misuses, each refused by name with nothing taken.
  auto *wrong = daqiri::create_tx_burst_params();
  CHECK_STATUS(daqiri::rdma_set_header(wrong, daqiri::RDMAOpCode::SEND, client_conn, false, 1, 1, "DATA_RX_GPU_CLIENT"),
               INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("DATA_TX_GPU_CLIENT") != std::string::npos);
  CHECK_STATUS(daqiri::rdma_set_header(wrong, daqiri::RDMAOpCode::SEND, client_conn, true, 1, 1, ""), INVALID_PARAMETER);
  CHECK_STATUS(daqiri::rdma_set_header(wrong, daqiri::RDMAOpCode::RDMA_WRITE, client_conn, false, 1, 1, ""),
               NOT_SUPPORTED);
  CHECK_STATUS(daqiri::rdma_set_header(wrong, daqiri::RDMAOpCode::RECEIVE, client_conn, false, 1, 1, ""), SUCCESS);
  CHECK_STATUS(daqiri::send_tx_burst(wrong), INVALID_PARAMETER);  // not readied by get_tx_packet_burst
  daqiri::BurstParams *none = nullptr;
  CHECK_STATUS(daqiri::get_rx_burst(&none, client_conn, true), INVALID_PARAMETER);  // the client's, asked as server
  CHECK_STATUS(daqiri::get_rx_burst(&none, client_conn, false), NOT_READY);

  std::thread sender(client, client_conn);
  server(server_conn);
  sender.join();
  // Everything sent was received: nothing more completes.
  CHECK_STATUS(daqiri::get_rx_burst(&none, server_conn, true), NOT_READY);
  CHECK_STATUS(daqiri::get_rx_burst(&none, client_conn, false), NOT_READY);
  // A RECEIVE still posted does not hold the shutdown up.
  auto *left = request(daqiri::RDMAOpCode::RECEIVE, server_conn, true, 1, "DATA_RX_GPU_SERVER");
  CHECK(left != nullptr && daqiri::send_tx_burst(left) == daqiri::Status::SUCCESS);
  daqiri::shutdown();
  std::printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
