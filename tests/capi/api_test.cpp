// DAQIRI's C++ API on libdaqiri, as a DAQIRI program uses it: a UDP server
// and client interface on loopback, bursts both ways, the writers, and the
// misuses DAQIRI leaves undefined (double free, free after send, a foreign
// or freed burst), each of which must answer a status, never crash.
//
// Usage: api_test OUTPUT_DIR. Writes OUTPUT_DIR/rx.pcap and OUTPUT_DIR/raw_*
// for run.sh to read back with tshark; prints "ok N" or "FAIL ..." per check.
#include <daqiri/daqiri.h>

#include <arpa/inet.h>
#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

int failures = 0;
int checks = 0;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    ++checks;                                                                                   \
    if (!(cond)) {                                                                              \
      ++failures;                                                                               \
      std::printf("FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, daqiri::last_error()); \
    }                                                                                           \
  } while (0)

#define CHECK_STATUS(expr, want) CHECK((expr) == daqiri::Status::want)

const char *kConfig = R"(
daqiri:
  cfg:
    version: 1
    stream_type: socket
    memory_regions:
    - { name: server_mem, kind: host, num_bufs: 4096, buf_size: 2048 }
    - { name: client_mem, kind: host, num_bufs: 4096, buf_size: 2048 }
    interfaces:
    - name: udp_server
      address: 127.0.0.1
      socket_config: { mode: server, local_addr: "udp://127.0.0.1:47801" }
      rx: { queues: [{ name: srx, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [server_mem] }] }
      tx: { queues: [{ name: stx, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [server_mem] }] }
    - name: udp_client
      address: 127.0.0.1
      socket_config: { mode: client, local_addr: "udp://127.0.0.1:47802", remote_addr: "udp://127.0.0.1:47801" }
      rx: { queues: [{ name: crx, id: 0, cpu_core: 1, batch_size: 8, memory_regions: [client_mem] }] }
      tx: { queues: [{ name: ctx, id: 0, cpu_core: 1, batch_size: 8, memory_regions: [client_mem] }] }
)";

// A software loopback: DAQIRI runs it in its DPDK engine, whose EAL pins
// the thread that called init to master_core.
const char *kLoopbackConfig = R"(
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    master_core: 1
    memory_regions: [{ name: m, kind: host, num_bufs: 64, buf_size: 2048 }]
    interfaces:
    - name: lo
      address: loopback
      rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }] }
)";

constexpr int kPackets = 64;
constexpr int kLength = 1000;

// Packet `seq`'s bytes: its sequence number, then a pattern of it.
void fill(uint8_t *payload, uint32_t seq) {
  const uint32_t be = htonl(seq);
  std::memcpy(payload, &be, sizeof(be));
  for (int i = 4; i < kLength; ++i) { payload[i] = static_cast<uint8_t>(seq * 7 + i); }
}

bool matches(const uint8_t *payload, uint32_t len, uint32_t *seq) {
  if (len != kLength) { return false; }
  uint32_t be = 0;
  std::memcpy(&be, payload, sizeof(be));
  *seq = ntohl(be);
  for (int i = 4; i < kLength; ++i) {
    if (payload[i] != static_cast<uint8_t>(*seq * 7 + i)) { return false; }
  }
  return true;
}

// Sends `count` packets from the connection's port, `per_burst` at a time.
int send_packets(uintptr_t conn, int count, int per_burst, uint32_t first_seq) {
  uint16_t port = 0;
  uint16_t queue = 0;
  CHECK_STATUS(daqiri::socket_get_port_queue(conn, &port, &queue), SUCCESS);
  int sent = 0;
  while (sent < count) {
    const int n = std::min(per_burst, count - sent);
    auto *msg = daqiri::create_tx_burst_params();
    daqiri::set_header(msg, port, queue, n, 1);
    if (daqiri::get_tx_packet_burst(msg) != daqiri::Status::SUCCESS) {
      daqiri::free_tx_metadata(msg);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      fill(static_cast<uint8_t *>(daqiri::get_packet_ptr(msg, i)), first_seq + sent + i);
      CHECK_STATUS(daqiri::set_packet_lengths(msg, i, {kLength}), SUCCESS);
    }
    CHECK_STATUS(daqiri::set_connection_id(msg, conn), SUCCESS);
    const auto st = daqiri::send_tx_burst(msg);
    if (st == daqiri::Status::SUCCESS) {
      sent += n;
    } else {
      // Taken by send_tx_burst all the same: a free after it is refused.
      CHECK_STATUS(daqiri::free_tx_metadata(msg), INVALID_PARAMETER);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return sent;
}

// Receives `count` packets of the connection, checking every byte; the
// first burst is kept (not freed) for the writers and the misuse checks.
daqiri::BurstParams *receive_packets(uintptr_t conn, bool server, int count, uint32_t first_seq) {
  std::vector<bool> seen(count, false);
  int received = 0;
  uint64_t bytes = 0;
  daqiri::BurstParams *kept = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (received < count && std::chrono::steady_clock::now() < deadline) {
    daqiri::BurstParams *burst = nullptr;
    const auto st = daqiri::get_rx_burst(&burst, conn, server);
    if (st != daqiri::Status::SUCCESS) {
      CHECK(st == daqiri::Status::NOT_READY && burst == nullptr);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    CHECK(daqiri::get_connection_id(burst) == conn);
    CHECK(burst->hdr.hdr.num_pkts == daqiri::get_num_packets(burst));
    CHECK(burst->hdr.hdr.num_segs == 1);
    CHECK(burst->event == nullptr);
    // transport_hdr: hdr.hdr's fields, and no RDMA request (version 0).
    static_assert(std::is_same<decltype(burst->transport_hdr.status), daqiri::Status>::value, "DAQIRI's type");
    static_assert(std::is_same<decltype(burst->transport_hdr.opcode), daqiri::RDMAOpCode>::value, "DAQIRI's type");
    CHECK(burst->transport_hdr.num_pkts == burst->hdr.hdr.num_pkts && burst->transport_hdr.version == 0);
    for (int i = 0; i < daqiri::get_num_packets(burst); ++i) {
      uint32_t seq = 0;
      const auto *payload = static_cast<const uint8_t *>(daqiri::get_packet_ptr(burst, i));
      CHECK(matches(payload, daqiri::get_packet_length(burst, i), &seq));
      CHECK(seq >= first_seq && seq < first_seq + count && !seen[seq - first_seq]);
      if (seq >= first_seq && seq < first_seq + count) { seen[seq - first_seq] = true; }
      bytes += daqiri::get_segment_packet_length(burst, 0, i);
      ++received;
    }
    if (kept == nullptr) {
      kept = burst;
    } else {
      CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(burst), SUCCESS);
    }
  }
  CHECK(received == count);
  CHECK(bytes == static_cast<uint64_t>(count) * kLength);
  return kept;
}

void misuse(daqiri::BurstParams *rx, uintptr_t server_conn) {
  // An index outside the burst: null, and a message naming it.
  CHECK(daqiri::get_packet_ptr(rx, 1000) == nullptr);
  CHECK(std::string(daqiri::last_error()).find("packet index 1000") != std::string::npos);
  CHECK(daqiri::get_segment_packet_ptr(rx, 9, 0) == nullptr);
  // Bounds-checked copies out of an RX packet (c_api.h), not into one.
  uint8_t copy[2048];
  size_t copied = 0;
  CHECK(daqiri_gw_copy_from_segment_packet(rx, 0, 0, copy, sizeof copy, 0, &copied) == DAQIRI_GW_SUCCESS);
  CHECK(copied == kLength && std::memcmp(copy, daqiri::get_packet_ptr(rx, 0), kLength) == 0);
  CHECK(daqiri_gw_copy_from_segment_packet(rx, 0, 0, copy, 10, 4, &copied) == DAQIRI_GW_SUCCESS && copied == 10);
  CHECK(daqiri_gw_copy_from_segment_packet(rx, 0, 0, copy, 10, 5000, &copied) == DAQIRI_GW_INVALID_PARAMETER);
  CHECK(daqiri_gw_copy_to_segment_packet(rx, 0, 0, copy, 10, 0) == DAQIRI_GW_NOT_SUPPORTED);
  // An RX burst is not sent, nor freed by the TX call (it stays live).
  CHECK_STATUS(daqiri::free_all_packets_and_burst_tx(rx), INVALID_PARAMETER);
  CHECK(daqiri::get_packet_ptr(rx, 0) != nullptr);
  // A BurstParams the library did not make.
  daqiri::BurstParams foreign{};
  CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(&foreign), INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("not a burst of this library") != std::string::npos);
  CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(nullptr), NULL_PTR);
  CHECK_STATUS(daqiri::get_rx_burst(static_cast<daqiri::BurstParams **>(nullptr), 0, 0), NULL_PTR);
  // Double free, and use after free.
  CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(rx), SUCCESS);
  CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(rx), INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("already freed") != std::string::npos);
  CHECK(daqiri::get_packet_ptr(rx, 0) == nullptr);
  CHECK(daqiri::get_num_packets(rx) == 0);
  // Free after send.
  uint16_t port = 0;
  uint16_t queue = 0;
  CHECK_STATUS(daqiri::socket_get_port_queue(server_conn, &port, &queue), SUCCESS);
  auto *msg = daqiri::create_tx_burst_params();
  CHECK_STATUS(daqiri::set_header(msg, port, queue, 1, 1), SUCCESS);
  CHECK_STATUS(daqiri::send_tx_burst(msg), INVALID_PARAMETER);  // no packets yet
  CHECK_STATUS(daqiri::free_tx_metadata(msg), INVALID_PARAMETER);
  msg = daqiri::create_tx_burst_params();
  CHECK_STATUS(daqiri::set_header(msg, port, queue, 1, 2), SUCCESS);
  CHECK_STATUS(daqiri::get_tx_packet_burst(msg), INVALID_PARAMETER);  // the queue has one segment
  CHECK_STATUS(daqiri::set_header(msg, port, queue, 1, 1), SUCCESS);
  CHECK_STATUS(daqiri::get_tx_packet_burst(msg), SUCCESS);
  CHECK_STATUS(daqiri::set_packet_lengths(msg, 0, {4096}), INVALID_PARAMETER);  // past its 2048-byte buffer
  CHECK(daqiri_gw_copy_to_segment_packet(msg, 0, 0, copy, 100, 2000) == DAQIRI_GW_INVALID_PARAMETER);
  CHECK(daqiri_gw_copy_to_segment_packet(msg, 0, 0, copy, kLength, 0) == DAQIRI_GW_SUCCESS);
  CHECK_STATUS(daqiri::set_connection_id(msg, 12345), INVALID_PARAMETER);
  CHECK_STATUS(daqiri::set_packet_lengths(msg, 0, {kLength}), SUCCESS);
  fill(static_cast<uint8_t *>(daqiri::get_packet_ptr(msg, 0)), 9999);
  CHECK_STATUS(daqiri::send_tx_burst(msg), SUCCESS);
  CHECK_STATUS(daqiri::free_tx_metadata(msg), INVALID_PARAMETER);
  CHECK_STATUS(daqiri::free_all_packets_and_burst_tx(msg), INVALID_PARAMETER);
  // Connections that do not exist.
  uintptr_t conn = 0;
  CHECK(daqiri::socket_get_server_conn_id("127.0.0.1", 1, &conn) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::socket_connect_to_server("127.0.0.1", 1, &conn) == daqiri::Status::CONNECT_FAILURE);
  CHECK(daqiri::socket_get_server_conn_id("not an address", 47801, &conn) == daqiri::Status::INVALID_PARAMETER);
  daqiri::BurstParams *burst = nullptr;
  CHECK_STATUS(daqiri::get_rx_burst(&burst, server_conn, false), INVALID_PARAMETER);  // the server's, asked as client
  // RDMA calls on an engine without RoCE ports (tests/capi/daqiri_rdma_vm.sh
  // runs them on soft-RoCE): each refused by name, nothing taken.
  CHECK_STATUS(daqiri::rdma_get_server_conn_id("127.0.0.1", 47801, &conn), INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("no RoCE server interface") != std::string::npos);
  CHECK_STATUS(daqiri::rdma_connect_to_server("127.0.0.1", 47801, &conn), CONNECT_FAILURE);
  CHECK_STATUS(daqiri::get_rx_burst(&burst, server_conn | (uintptr_t{0xDA92} << 48), true), INVALID_PARAMETER);
  CHECK_STATUS(daqiri::rdma_get_port_queue(server_conn, &port, &queue), INVALID_PARAMETER);  // a socket's id
  auto *request = daqiri::create_tx_burst_params();
  CHECK_STATUS(daqiri::rdma_set_header(request, daqiri::RDMAOpCode::RDMA_WRITE, server_conn, true, 1, 7, "x"),
               NOT_SUPPORTED);
  CHECK(std::string(daqiri::last_error()).find("SEND and RECEIVE requests only") != std::string::npos);
  CHECK_STATUS(daqiri::rdma_set_header(request, daqiri::RDMAOpCode::SEND, server_conn, true, 1, 7, "x"),
               INVALID_PARAMETER);  // a socket's id
  CHECK(daqiri::rdma_get_opcode(request) == daqiri::RDMAOpCode::INVALID);
  CHECK_STATUS(daqiri::free_tx_metadata(request), SUCCESS);
}

}  // namespace

// master_core pins the caller of daqiri_init only where DAQIRI's DPDK
// engine would (raw interfaces); on sockets, as DAQIRI's socket engine,
// the thread stays where it was, and so do the threads it starts later.
void master_core_pins_where_daqiris_dpdk_engine_would() {
  cpu_set_t before, after;
  CHECK(sched_getaffinity(0, sizeof(before), &before) == 0);
  if (CPU_COUNT(&before) < 2 || !CPU_ISSET(1, &before)) {
    std::printf("skipped: master_core pinning needs cores 0 and 1\n");
    return;
  }
  std::string socket_config(kConfig);
  socket_config.insert(socket_config.find("    stream_type"), "    master_core: 1\n");
  CHECK_STATUS(daqiri::daqiri_init_from_yaml_string(socket_config.c_str()), SUCCESS);
  CHECK(sched_getaffinity(0, sizeof(after), &after) == 0 && CPU_EQUAL(&before, &after));
  daqiri::shutdown();
  CHECK_STATUS(daqiri::daqiri_init_from_yaml_string(kLoopbackConfig), SUCCESS);
  CHECK(sched_getaffinity(0, sizeof(after), &after) == 0 && CPU_COUNT(&after) == 1 && CPU_ISSET(1, &after));
  daqiri::shutdown();
  sched_setaffinity(0, sizeof(before), &before);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  static_assert(DAQIRI_VERSION_YEAR >= 2026, "DAQIRI's API of 2026");
  CHECK(std::string(daqiri::version_string()) == "2026.7.0");

  daqiri::BurstParams *burst = nullptr;
  CHECK_STATUS(daqiri::get_rx_burst(&burst, 0, 0), NOT_READY);
  CHECK(std::string(daqiri::last_error()).find("daqiri_init") != std::string::npos);
  CHECK_STATUS(daqiri::daqiri_init("/nonexistent/config.yaml"), INVALID_PARAMETER);
  if (daqiri::daqiri_init(kConfig) != daqiri::Status::SUCCESS) {
    std::printf("FAIL daqiri_init: %s\n", daqiri::last_error());
    return 1;
  }
  CHECK_STATUS(daqiri::daqiri_init(kConfig), INTERNAL_ERROR);

  CHECK(daqiri::get_port_id("udp_server") == 0);
  CHECK(daqiri::get_port_id("udp_client") == 1);
  CHECK(daqiri::get_port_id("eth9") == -1);
  CHECK(daqiri::get_num_rx_queues(0) == 1);
  uint8_t mac[6];
  CHECK_STATUS(daqiri::format_eth_addr(mac, "02:00:0a:0b:0c:ff"), SUCCESS);
  CHECK(mac[0] == 0x02 && mac[5] == 0xff);
  CHECK_STATUS(daqiri::format_eth_addr(mac, "02:00:0a:0b:0c"), INVALID_PARAMETER);
  CHECK(mac[0] == 0 && mac[5] == 0);
  // A socket port has no Ethernet address of its own (the kernel frames it).
  CHECK_STATUS(daqiri::get_mac_addr(0, mac), NOT_SUPPORTED);
  CHECK(std::strstr(daqiri::last_error(), "no Ethernet address of its own") != nullptr);
  // This libdaqiri is built without CUDA: no reorder plan runs on a GPU.
  CHECK_STATUS(daqiri::set_reorder_cuda_stream("udp_server", "plan", nullptr), NOT_SUPPORTED);
  CHECK(std::strstr(daqiri::last_error(), "built without CUDA") != nullptr);

  uintptr_t server = 0;
  uintptr_t client = 0;
  CHECK_STATUS(daqiri::socket_get_server_conn_id("127.0.0.1", 47801, &server), SUCCESS);
  CHECK_STATUS(daqiri::socket_connect_to_server("127.0.0.1", 47801, "127.0.0.1", &client), SUCCESS);
  CHECK(server != 0 && client != 0 && server != client);
  // Socket options: set on the connection's sockets; the kernel's refusals come back as statuses.
  const int rcvbuf = 1 << 20;
  CHECK_STATUS(daqiri::socket_setsockopt(server, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), SUCCESS);
  CHECK_STATUS(daqiri::socket_setsockopt(client, SOL_SOCKET, SO_SNDBUF, &rcvbuf, sizeof rcvbuf), SUCCESS);
  CHECK_STATUS(daqiri::socket_setsockopt(server, SOL_SOCKET, 9999, &rcvbuf, sizeof rcvbuf), GENERIC_FAILURE);
  CHECK_STATUS(daqiri::socket_setsockopt(server, SOL_SOCKET, SO_RCVBUF, nullptr, sizeof rcvbuf), NULL_PTR);
  CHECK_STATUS(daqiri::socket_setsockopt(0x1234, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), INVALID_PARAMETER);

  // Client to server, one packet per burst as DAQIRI's socket bench sends, then 8 per burst.
  CHECK(send_packets(client, kPackets, 1, 0) == kPackets);
  auto *kept = receive_packets(server, true, kPackets, 0);
  CHECK(send_packets(client, kPackets, 8, kPackets) == kPackets);
  auto *second = receive_packets(server, true, kPackets, kPackets);
  // The server answers the peer it heard.
  CHECK(send_packets(server, kPackets, 4, 1000) == kPackets);
  auto *answer = receive_packets(client, false, kPackets, 1000);

  // Writers: the first server burst as pcap (appended twice), raw files of the answer.
  if (kept != nullptr && second != nullptr && answer != nullptr) {
    CHECK_STATUS(daqiri::daqiri_write_pcap_to_file(kept, out, "rx"), SUCCESS);
    CHECK_STATUS(daqiri::daqiri_write_pcap_to_file(second, out, "rx"), SUCCESS);
    CHECK_STATUS(daqiri::daqiri_write_raw_to_file(answer, out, "raw", 4), SUCCESS);
    CHECK_STATUS(daqiri::daqiri_write_raw_to_file(answer, "relative/dir", "raw", 0), INVALID_PARAMETER);
    std::printf("pcap_packets %lld\n", static_cast<long long>(daqiri::get_num_packets(kept) + daqiri::get_num_packets(second)));
    std::printf("raw_packets %lld\n", static_cast<long long>(daqiri::get_num_packets(answer)));
    // Asynchronous writes: the burst is lent to a writer thread until poll or wait sees the end.
    const auto second_packets = static_cast<uint32_t>(daqiri::get_num_packets(second));
    const auto answer_packets = static_cast<uint32_t>(daqiri::get_num_packets(answer));
    daqiri::FileWriteHandle *pcap_write = nullptr;
    daqiri::FileWriteHandle *raw_write = nullptr;
    daqiri::FileWriteHandle *unused = nullptr;
    CHECK_STATUS(daqiri::daqiri_write_pcap_to_file_async(second, out, "rx_async", &pcap_write), SUCCESS);
    CHECK_STATUS(daqiri::daqiri_write_raw_to_file_async(answer, out, "raw_async", 4, &raw_write), SUCCESS);
    CHECK(pcap_write != nullptr && raw_write != nullptr && pcap_write != raw_write);
    CHECK(daqiri::get_packet_ptr(answer, 0) == nullptr);
    CHECK(std::strstr(daqiri::last_error(), "being written") != nullptr);
    CHECK_STATUS(daqiri::daqiri_write_raw_to_file_async(answer, out, "twice", 0, &unused), NOT_READY);
    CHECK_STATUS(daqiri::daqiri_write_pcap_to_file_async(kept, out, "x", nullptr), NULL_PTR);
    // Freed while written: its packets go back when the write ends, which still writes them all.
    CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(second), SUCCESS);
    daqiri::FileWriteStatus status{};
    CHECK_STATUS(daqiri::daqiri_file_write_wait(pcap_write, &status), SUCCESS);
    CHECK(status.completed_packets == second_packets && status.failed_packets == 0 && status.bytes_written > 0);
    CHECK_STATUS(daqiri::daqiri_file_write_wait(raw_write, &status), SUCCESS);
    CHECK(status.completed_packets == answer_packets && status.failed_packets == 0);
    CHECK_STATUS(daqiri::daqiri_file_write_poll(raw_write, &status), SUCCESS);
    CHECK(daqiri::get_packet_ptr(answer, 0) != nullptr);  // given back by the wait
    CHECK_STATUS(daqiri::daqiri_file_write_destroy(pcap_write), SUCCESS);
    CHECK_STATUS(daqiri::daqiri_file_write_destroy(raw_write), SUCCESS);
    CHECK_STATUS(daqiri::daqiri_file_write_destroy(raw_write), INVALID_PARAMETER);
    CHECK_STATUS(daqiri::daqiri_file_write_poll(pcap_write, &status), INVALID_PARAMETER);
    std::printf("pcap_async_packets %u\n", second_packets);
    CHECK_STATUS(daqiri::free_rx_burst(answer), SUCCESS);
    misuse(kept, server);
  }
  daqiri::print_stats();

  // A burst held across shutdown stays readable and freeable; init starts afresh.
  // (A whole batch: RX bursts are delivered at batch_size.)
  CHECK(send_packets(client, 8, 8, 5000) == 8);
  auto *held = receive_packets(server, true, 8, 5000);
  daqiri::shutdown();
  CHECK(held != nullptr && daqiri::get_packet_length(held, 0) == kLength);
  CHECK_STATUS(daqiri::free_all_packets_and_burst_rx(held), SUCCESS);
  CHECK_STATUS(daqiri::get_rx_burst(&burst, 0, 0), NOT_READY);
  CHECK_STATUS(daqiri::daqiri_init_from_yaml_string(kConfig), SUCCESS);
  CHECK_STATUS(daqiri::socket_get_server_conn_id("127.0.0.1", 47801, &server), SUCCESS);
  daqiri::shutdown();

  master_core_pins_where_daqiris_dpdk_engine_would();

  std::printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
