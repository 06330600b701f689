// DAQIRI's dynamic RX flows through libdaqiri, as DAQIRI's dynamic-flow
// example uses them: a software-loopback port with two RX queues, UDP frames
// to four destination ports, flows added one at a time and in a batch and
// deleted while traffic runs, every completion polled. Prints "ok" or "FAIL ...".
#include <daqiri/daqiri.h>

#include "check.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

const char *kConfig = R"(
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - { name: tx, kind: host, num_bufs: 1024, buf_size: 2048 }
    - { name: rx, kind: host, num_bufs: 2048, buf_size: 2048 }
    interfaces:
    - name: lo
      address: loopback
      tx: { queues: [{ name: t, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [tx] }] }
      rx:
        dynamic_flow_capacity: 5
        queues:
        - { name: r0, id: 0, cpu_core: 1, batch_size: 8, timeout_us: 1000, memory_regions: [rx] }
        - { name: r1, id: 1, cpu_core: 1, batch_size: 8, timeout_us: 1000, memory_regions: [rx] }
)";

constexpr uint16_t kPorts[] = {5000, 5001, 5002, 5003};
constexpr uint8_t kPeerMac[6] = {0x02, 0x00, 0x0a, 0x0b, 0x0c, 0x0d};
uint8_t port_mac[6];  // get_mac_addr(0)

// Sends 8 UDP frames to each destination port.
void send_frames() {
  for (uint16_t dst : kPorts) {
    auto *msg = daqiri::create_tx_burst_params();
    daqiri::set_header(msg, 0, 0, 8, 1);
    while (daqiri::get_tx_packet_burst(msg) != daqiri::Status::SUCCESS) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 0; i < 8; ++i) {
      auto *frame = static_cast<uint8_t *>(daqiri::get_packet_ptr(msg, i));
      std::memset(frame, 0, 14 + 20 + 8 + 32);
      CHECK(daqiri::set_eth_header(msg, i, kPeerMac) == daqiri::Status::SUCCESS);
      // DAQIRI's lengths: the IPv4 header's payload (UDP header and data), the UDP header's data.
      CHECK(daqiri::set_ipv4_header(msg, i, 8 + 32, IPPROTO_UDP, 0x0a000001, 0x0a000002) ==
            daqiri::Status::SUCCESS);
      CHECK(daqiri::set_udp_header(msg, i, 32, 4096, dst) == daqiri::Status::SUCCESS);
      CHECK(daqiri::set_packet_lengths(msg, i, {14 + 20 + 8 + 32}) == daqiri::Status::SUCCESS);
    }
    CHECK(daqiri::send_tx_burst(msg) == daqiri::Status::SUCCESS);
  }
}

// Per destination port: the queue and flow id its frames arrived with.
std::map<uint16_t, std::pair<int, daqiri::FlowId>> receive_frames() {
  std::map<uint16_t, std::pair<int, daqiri::FlowId>> seen;
  int frames = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (frames < 32 && std::chrono::steady_clock::now() < deadline) {
    for (int q = 0; q < 2; ++q) {
      daqiri::BurstParams *burst = nullptr;
      if (daqiri::get_rx_burst(&burst, 0, q) != daqiri::Status::SUCCESS) { continue; }
      for (int i = 0; i < daqiri::get_num_packets(burst); ++i) {
        const auto *pkt = static_cast<const daqiri::UDPIPV4Pkt *>(daqiri::get_packet_ptr(burst, i));
        const uint16_t dst = ntohs(pkt->udp.dest);
        // set_eth_header: the peer's address, the port's own as source, IPv4.
        CHECK(std::memcmp(pkt->eth.h_dest, kPeerMac, 6) == 0 && std::memcmp(pkt->eth.h_source, port_mac, 6) == 0);
        CHECK(ntohs(pkt->eth.h_proto) == ETH_P_IP);
        const auto where = std::make_pair(q, daqiri::get_packet_flow_id(burst, i));
        CHECK(seen.count(dst) == 0 || seen[dst] == where);  // a port's frames all land alike
        seen[dst] = where;
        ++frames;
      }
      daqiri::free_all_packets_and_burst_rx(burst);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  CHECK(frames == 32);
  return seen;
}

daqiri::FlowOpResult wait_for(daqiri::FlowOpId op) {
  daqiri::FlowOpResult result;
  for (int tries = 0; tries < 500; ++tries) {
    const auto st = daqiri::poll_flow_op(&result);
    if (st == daqiri::Status::SUCCESS && result.op_id_ == op) { return result; }
    CHECK(st == daqiri::Status::NOT_READY);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(!"the operation completed");
  return result;
}

daqiri::FlowRuleConfig udp_flow(const std::string &name, uint16_t dst, uint16_t queue) {
  daqiri::FlowRuleConfig flow;
  flow.name_ = name;
  flow.action_.type_ = daqiri::FlowType::QUEUE;
  flow.action_.id_ = queue;
  flow.match_.type_ = daqiri::FlowMatchType::IPV4_UDP;
  flow.match_.udp_dst_ = dst;
  return flow;
}

}  // namespace

int main() {
  if (daqiri::daqiri_init(kConfig) != daqiri::Status::SUCCESS) {
    std::printf("FAIL daqiri_init: %s\n", daqiri::last_error());
    return 1;
  }
  daqiri::FlowOpResult result;
  CHECK(daqiri::poll_flow_op(&result) == daqiri::Status::NOT_READY);
  // The software loopback's own address: locally administered, the port id last.
  const uint8_t loopback_mac[6] = {0x02, 0, 0, 0, 0, 0};
  CHECK(daqiri::get_mac_addr(0, port_mac) == daqiri::Status::SUCCESS && std::memcmp(port_mac, loopback_mac, 6) == 0);
  CHECK(daqiri::get_mac_addr(7, port_mac) == daqiri::Status::INVALID_PARAMETER);
  CHECK(std::strstr(daqiri::last_error(), "port 7 does not exist") != nullptr);

  // No flows: everything on the default queue, no flow id.
  send_frames();
  for (const auto &[dst, where] : receive_frames()) { CHECK(where == std::make_pair(0, daqiri::FlowId{0})); }

  // One flow: 5001 to queue 1, its packets carrying the id the completion gave.
  daqiri::FlowOpId op = 0;
  CHECK(daqiri::add_rx_flow_async(0, udp_flow("udp_5001", 5001, 1), &op) == daqiri::Status::SUCCESS);
  result = wait_for(op);
  CHECK(result.type_ == daqiri::FlowOpType::ADD_RX && result.status_ == daqiri::Status::SUCCESS);
  const daqiri::FlowId first = result.flow_id_;
  CHECK(first != 0);

  // A batch: 5002 and 5003 to queue 1, one completion with both ids in order.
  CHECK(daqiri::add_rx_flows_async(0, {udp_flow("", 5002, 1), udp_flow("udp_5003", 5003, 1)}, &op) ==
        daqiri::Status::SUCCESS);
  result = wait_for(op);
  CHECK(result.type_ == daqiri::FlowOpType::ADD_RX_BATCH && result.status_ == daqiri::Status::SUCCESS);
  CHECK(result.flow_ids_.size() == 2 && result.flow_ids_[0] != 0 && result.flow_ids_[1] != 0);
  const auto batch = result.flow_ids_;

  send_frames();
  auto seen = receive_frames();
  CHECK(seen[5000] == std::make_pair(0, daqiri::FlowId{0}));
  CHECK(seen[5001] == std::make_pair(1, first));
  CHECK(seen[5002] == std::make_pair(1, batch[0]));
  CHECK(seen[5003] == std::make_pair(1, batch[1]));

  // Refusals: a queue that does not exist, alone (refused by the call) and
  // in a batch (the completion says which went in); past the capacity.
  CHECK(daqiri::add_rx_flow_async(0, udp_flow("bad", 6000, 9), &op) == daqiri::Status::INVALID_PARAMETER);
  CHECK(std::string(daqiri::last_error()).find("queue") != std::string::npos);
  CHECK(daqiri::add_rx_flows_async(0, {udp_flow("fourth", 6001, 1), udp_flow("bad", 6002, 9)}, &op) ==
        daqiri::Status::SUCCESS);
  result = wait_for(op);
  CHECK(result.status_ == daqiri::Status::INVALID_PARAMETER);
  CHECK(result.flow_ids_.size() == 2 && result.flow_ids_[0] != 0 && result.flow_ids_[1] == 0);
  CHECK(daqiri::add_rx_flow_async(0, udp_flow("fifth", 6003, 1), &op) == daqiri::Status::SUCCESS);
  CHECK(wait_for(op).status_ == daqiri::Status::SUCCESS);
  CHECK(daqiri::add_rx_flow_async(0, udp_flow("sixth", 6004, 1), &op) == daqiri::Status::NO_SPACE_AVAILABLE);

  // Deleting: 5001 falls back to the default queue; unknown and twice-deleted ids are refused.
  CHECK(daqiri::delete_flow_async(first, &op) == daqiri::Status::SUCCESS);
  result = wait_for(op);
  CHECK(result.type_ == daqiri::FlowOpType::DELETE && result.flow_id_ == first);
  CHECK(daqiri::delete_flow_async(first, &op) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::delete_flow_async(999, &op) == daqiri::Status::INVALID_PARAMETER);
  send_frames();
  seen = receive_frames();
  CHECK(seen[5001] == std::make_pair(0, daqiri::FlowId{0}));
  CHECK(seen[5003] == std::make_pair(1, batch[1]));

  daqiri::shutdown();
  std::printf("%s\n", failures == 0 ? "flows_test: ok" : "flows_test: FAILED");
  return failures == 0 ? 0 : 1;
}
