/*
 * daqiri-gateway: DAQIRI's C++ API, over libdaqiri's C ABI (Apache-2.0).
 *
 * The names, overloads and ownership rules of DAQIRI's API guide, as inline
 * functions: a DAQIRI program compiles against this header unchanged and
 * links against libdaqiri alone. What differs from DAQIRI, and what is not
 * here yet, is in docs/coming-from-daqiri.md. Every call that fails leaves
 * a message for daqiri::last_error() on the calling thread.
 */
#ifndef DAQIRI_DAQIRI_H
#define DAQIRI_DAQIRI_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "daqiri/config_io.h"
#include "daqiri/types.h"
#include "daqiri/version.h"

struct CUstream_st;  // cudaStream_t, without CUDA's headers

namespace daqiri {

namespace detail {
inline Status status(int32_t code) { return static_cast<Status>(code); }
static_assert(sizeof(int) == sizeof(int32_t), "segment lengths pass as int32_t");
/* A failure the headers found, recorded for last_error() as the library's are. */
inline Status refuse(int32_t code, const std::string &message) { return status(daqiri_gw_fail(code, message.c_str())); }

/* A config libdaqiri parses (`parse`: one of daqiri_gw_config_parse*) read
 * into `config`, which is left as it was unless every key found a member. */
inline Status read_config(int32_t (*parse)(const char *, daqiri_gw_config **), const std::string &argument,
                          NetworkConfig &config) {
  daqiri_gw_config *tree = nullptr;
  const int32_t code = parse(argument.c_str(), &tree);
  if (code != DAQIRI_GW_SUCCESS) { return status(code); }
  NetworkConfig parsed;
  ConfigIo io(tree, false);
  bind(io, parsed);
  std::string unread;
  copy_text([tree](char *out, size_t capacity) { return daqiri_gw_config_unread(tree, out, capacity); }, &unread);
  daqiri_gw_config_free(tree);
  if (!io.failure().empty()) { return refuse(DAQIRI_GW_NOT_SUPPORTED, "parse_network_config: " + io.failure()); }
  if (!unread.empty()) {
    return refuse(DAQIRI_GW_NOT_SUPPORTED, "parse_network_config: " + unread +
                                               ": NetworkConfig has no member for this key; init from the YAML to use it");
  }
  config = std::move(parsed);
  return Status::SUCCESS;
}

}  // namespace detail

/* Why the calling thread's last call failed ("" when none did). */
inline const char *last_error() { return daqiri_gw_last_error(); }

/* Initialization and lifecycle: one engine per process. */
inline Status daqiri_init(const std::string &yaml_string_or_path) {
  return detail::status(daqiri_gw_init(yaml_string_or_path.c_str()));
}
inline Status daqiri_init_from_yaml_string(const std::string &yaml_string) {
  return detail::status(daqiri_gw_init_from_yaml_string(yaml_string.c_str()));
}
inline Status daqiri_init_from_yaml_file(const std::string &yaml_path) {
  return detail::status(daqiri_gw_init_from_yaml_file(yaml_path.c_str()));
}

/* A config parsed and validated as daqiri_init would, without starting it.
 * A key NetworkConfig has no member for (one of our own, such as a queue's
 * busy_poll_us) is NOT_SUPPORTED, named: init from the YAML to use it. */
inline Status parse_network_config(const std::string &yaml_string_or_path, NetworkConfig &config) {
  return detail::read_config(daqiri_gw_config_parse, yaml_string_or_path, config);
}
inline Status parse_network_config_from_yaml_string(const std::string &yaml_string, NetworkConfig &config) {
  return detail::read_config(daqiri_gw_config_parse_yaml_string, yaml_string, config);
}
inline Status parse_network_config_from_yaml_file(const std::string &yaml_path, NetworkConfig &config) {
  return detail::read_config(daqiri_gw_config_parse_yaml_file, yaml_path, config);
}

/* Starts the engine from a config built in code or parsed: each member is
 * written as its YAML key and the result checked as a YAML config is, so an
 * error names the key (docs/coming-from-daqiri.md maps keys to members). */
inline Status daqiri_init(NetworkConfig &config) {
  daqiri_gw_config *tree = daqiri_gw_config_new();
  detail::ConfigIo io(tree, true);
  detail::bind(io, config);
  int32_t code = DAQIRI_GW_SUCCESS;
  if (io.failure().empty()) {
    code = daqiri_gw_init_config(tree);
  }
  daqiri_gw_config_free(tree);
  if (!io.failure().empty()) { return detail::refuse(DAQIRI_GW_INVALID_PARAMETER, "daqiri_init: " + io.failure()); }
  return detail::status(code);
}

/* The running engine's type; UNKNOWN when none runs. */
inline EngineType get_engine_type() { return static_cast<EngineType>(daqiri_gw_engine_type()); }
/* The engine a config runs on: the parsed one, else what its keys select. */
inline EngineType get_engine_type(const NetworkConfig &config) {
  const CommonConfig &c = config.common_;
  if (c.engine_type != EngineType::UNKNOWN) { return c.engine_type; }
  if (c.engine != EngineType::DEFAULT) { return c.engine; }
  if (c.stream_type == StreamType::SOCKET) { return c.protocol == SocketProtocol::ROCE ? EngineType::RDMA : EngineType::SOCKET; }
  return c.stream_type == StreamType::RAW ? EngineType::DPDK : EngineType::UNKNOWN;
}

inline void shutdown() { daqiri_gw_shutdown(); }
inline void print_stats() { daqiri_gw_print_stats(); }

/* Burst metadata */
inline BurstParams *create_tx_burst_params() { return daqiri_gw_create_tx_burst_params(); }
inline BurstParams *create_burst_params() { return daqiri_gw_create_tx_burst_params(); }
inline Status set_header(BurstParams *burst, uint16_t port, uint16_t q, int64_t num, int segs) {
  if (num < INT32_MIN || num > INT32_MAX) { num = -1; }
  return detail::status(daqiri_gw_set_header(burst, port, q, static_cast<int32_t>(num), segs));
}
inline Status set_num_packets(BurstParams *burst, int64_t num) {
  return detail::status(daqiri_gw_set_num_packets(burst, num));
}
inline int64_t get_num_packets(BurstParams *burst) { return daqiri_gw_get_num_packets(burst); }
inline int get_q_id(BurstParams *burst) { return daqiri_gw_get_q_id(burst); }
inline uint64_t get_burst_tot_byte(BurstParams *burst) { return daqiri_gw_get_burst_tot_byte(burst); }

/* Packet and segment access */
inline void *get_segment_packet_ptr(BurstParams *burst, int seg, int idx) {
  return daqiri_gw_get_segment_packet_ptr(burst, seg, idx);
}
inline void *get_packet_ptr(BurstParams *burst, int idx) { return daqiri_gw_get_segment_packet_ptr(burst, 0, idx); }
inline uint32_t get_segment_packet_length(BurstParams *burst, int seg, int idx) {
  return daqiri_gw_get_segment_packet_length(burst, seg, idx);
}
inline uint32_t get_packet_length(BurstParams *burst, int idx) { return daqiri_gw_get_packet_length(burst, idx); }
inline FlowId get_packet_flow_id(BurstParams *burst, int idx) { return daqiri_gw_get_packet_flow_id(burst, idx); }
inline Status get_packet_rx_timestamp(BurstParams *burst, int idx, uint64_t *timestamp_ns) {
  return detail::status(daqiri_gw_get_packet_rx_timestamp(burst, idx, timestamp_ns));
}

/* Receiving. None ready: NOT_READY. */
inline Status get_rx_burst(BurstParams **burst, int port, int q) {
  return detail::status(daqiri_gw_get_rx_burst(burst, port, q));
}
inline Status get_rx_burst(BurstParams **burst, int port) { return detail::status(daqiri_gw_get_rx_burst(burst, port, -1)); }
inline Status get_rx_burst(BurstParams **burst) { return detail::status(daqiri_gw_get_rx_burst(burst, -1, -1)); }
inline Status get_rx_burst(BurstParams **burst, uintptr_t conn_id, bool server) {
  return detail::status(daqiri_gw_get_rx_burst_conn(burst, conn_id, server));
}
inline uintptr_t get_connection_id(BurstParams *burst) { return daqiri_gw_get_connection_id(burst); }
inline Status get_reorder_burst_info(BurstParams *burst, ReorderBurstInfo *info) {
  return detail::status(daqiri_gw_get_reorder_burst_info(burst, info));
}
/* stream: a cudaStream_t (CUDA's runtime spells it CUstream_st *). */
inline Status set_reorder_cuda_stream(const std::string &interface_name, const std::string &reorder_name,
                                      ::CUstream_st *stream) {
  return detail::status(daqiri_gw_set_reorder_cuda_stream(interface_name.c_str(), reorder_name.c_str(), stream));
}

/* Transmitting. send_tx_burst takes the burst whatever it answers. */
inline bool is_tx_burst_available(BurstParams *burst) { return daqiri_gw_is_tx_burst_available(burst); }
inline Status get_tx_packet_burst(BurstParams *burst) { return detail::status(daqiri_gw_get_tx_packet_burst(burst)); }
inline Status set_connection_id(BurstParams *burst, uintptr_t conn_id) {
  return detail::status(daqiri_gw_set_connection_id(burst, conn_id));
}
inline Status send_tx_burst(BurstParams *burst) { return detail::status(daqiri_gw_send_tx_burst(burst)); }
inline Status set_packet_lengths(BurstParams *burst, int idx, std::initializer_list<int> lens) {
  return detail::status(daqiri_gw_set_packet_lengths(burst, idx, lens.begin(), lens.size()));
}
inline Status set_packet_lengths(BurstParams *burst, int idx, const std::vector<int> &lens) {
  return detail::status(daqiri_gw_set_packet_lengths(burst, idx, lens.data(), lens.size()));
}
inline Status set_all_packet_lengths(BurstParams *burst, std::initializer_list<int> lens) {
  return detail::status(daqiri_gw_set_all_packet_lengths(burst, lens.begin(), lens.size()));
}
inline Status set_all_packet_lengths(BurstParams *burst, const std::vector<int> &lens) {
  return detail::status(daqiri_gw_set_all_packet_lengths(burst, lens.data(), lens.size()));
}
inline Status set_packet_tx_time(BurstParams *burst, int idx, uint64_t time) {
  return detail::status(daqiri_gw_set_packet_tx_time(burst, idx, time));
}
inline Status set_eth_header(BurstParams *burst, int idx, const void *dst_addr) {
  return detail::status(daqiri_gw_set_eth_header(burst, idx, static_cast<const uint8_t *>(dst_addr)));
}
inline Status set_ipv4_header(BurstParams *burst, int idx, int ip_payload_len, uint8_t proto, unsigned int src_host,
                              unsigned int dst_host) {
  return detail::status(daqiri_gw_set_ipv4_header(burst, idx, ip_payload_len, proto, src_host, dst_host));
}
inline Status set_udp_header(BurstParams *burst, int idx, int udp_payload_len, uint16_t src_port, uint16_t dst_port) {
  return detail::status(daqiri_gw_set_udp_header(burst, idx, udp_payload_len, src_port, dst_port));
}
inline Status set_udp_payload(BurstParams *burst, int idx, const void *data, int len) {
  if (len < 0) { return Status::INVALID_PARAMETER; }
  return detail::status(daqiri_gw_set_udp_payload(burst, idx, data, static_cast<size_t>(len)));
}

/* Freeing. A burst freed twice, or after send_tx_burst: INVALID_PARAMETER. */
inline Status free_packet(BurstParams *burst, int idx) { return detail::status(daqiri_gw_free_packet(burst, idx)); }
inline Status free_packet_segment(BurstParams *burst, int seg, int idx) {
  return detail::status(daqiri_gw_free_packet_segment(burst, seg, idx));
}
inline Status free_all_segment_packets(BurstParams *burst, int seg) {
  return detail::status(daqiri_gw_free_all_segment_packets(burst, seg));
}
inline Status free_segment_packets_and_burst(BurstParams *burst, int seg) {
  return detail::status(daqiri_gw_free_segment_packets_and_burst(burst, seg));
}
inline Status free_all_packets_and_burst_rx(BurstParams *burst) {
  return detail::status(daqiri_gw_free_all_packets_and_burst(burst, DAQIRI_GW_RX));
}
inline Status free_all_packets_and_burst_tx(BurstParams *burst) {
  return detail::status(daqiri_gw_free_all_packets_and_burst(burst, DAQIRI_GW_TX));
}
inline Status free_rx_burst(BurstParams *burst) { return detail::status(daqiri_gw_free_burst(burst, DAQIRI_GW_RX)); }
inline Status free_tx_burst(BurstParams *burst) { return detail::status(daqiri_gw_free_burst(burst, DAQIRI_GW_TX)); }
inline Status free_rx_metadata(BurstParams *burst) { return free_rx_burst(burst); }
inline Status free_tx_metadata(BurstParams *burst) { return free_tx_burst(burst); }

/* Dynamic RX flows: each call queues one completion for poll_flow_op. */
inline Status add_rx_flows_async(int port, const std::vector<FlowRuleConfig> &flows, FlowOpId *op_id) {
  std::vector<std::string> yamls;
  std::vector<const char *> texts;
  yamls.reserve(flows.size());
  for (const auto &flow : flows) {
    std::string failure;
    yamls.push_back(detail::flow_yaml(flow, &failure));
    if (!failure.empty()) { return detail::refuse(DAQIRI_GW_INVALID_PARAMETER, "add_rx_flows_async: " + failure); }
  }
  for (const auto &yaml : yamls) { texts.push_back(yaml.c_str()); }
  return detail::status(daqiri_gw_add_rx_flows(port, texts.data(), texts.size(), op_id));
}
inline Status add_rx_flow_async(int port, const FlowRuleConfig &flow, FlowOpId *op_id) {
  return add_rx_flows_async(port, std::vector<FlowRuleConfig>{flow}, op_id);
}
inline Status delete_flow_async(FlowId flow_id, FlowOpId *op_id) {
  return detail::status(daqiri_gw_delete_flow(flow_id, op_id));
}
inline Status poll_flow_op(FlowOpResult *result) {
  if (result == nullptr) { return Status::NULL_PTR; }
  daqiri_gw_flow_op op{};
  std::vector<uint32_t> ids(16);
  int32_t code = daqiri_gw_poll_flow_op(&op, ids.data(), ids.size());
  if (code == DAQIRI_GW_NO_SPACE_AVAILABLE) {
    ids.resize(op.num_flows);
    code = daqiri_gw_poll_flow_op(&op, ids.data(), ids.size());
  }
  if (code != DAQIRI_GW_SUCCESS) { return detail::status(code); }
  result->op_id_ = op.op_id;
  result->type_ = static_cast<FlowOpType>(op.type);
  result->status_ = detail::status(op.status);
  result->flow_id_ = op.flow_id;
  result->flow_ids_.assign(ids.begin(), ids.begin() + op.num_flows);
  return Status::SUCCESS;
}

/* Ports and traffic */
inline int get_port_id(const std::string &key) { return daqiri_gw_get_port_id(key.c_str()); }
inline int get_num_rx_queues(int port_id) { return daqiri_gw_get_num_rx_queues(port_id); }
inline Status get_mac_addr(int port, void *mac) {
  return detail::status(daqiri_gw_get_mac_addr(port, static_cast<uint8_t *>(mac)));
}
inline Status format_eth_addr(void *dst, const std::string &addr) {
  return detail::status(daqiri_gw_format_eth_addr(static_cast<uint8_t *>(dst), addr.c_str()));
}
inline Status drop_all_traffic(int port) { return detail::status(daqiri_gw_drop_all_traffic(port)); }
inline Status allow_all_traffic(int port) { return detail::status(daqiri_gw_allow_all_traffic(port)); }
inline int64_t flush_port_queue(int port, int queue) { return daqiri_gw_flush_port_queue(port, queue); }

/* Socket connections: one per socket interface. */
inline Status socket_get_server_conn_id(const std::string &server_addr, uint16_t server_port, uintptr_t *conn_id) {
  return detail::status(daqiri_gw_socket_get_server_conn_id(server_addr.c_str(), server_port, conn_id));
}
inline Status socket_connect_to_server(const std::string &server_addr, uint16_t server_port, uintptr_t *conn_id) {
  return detail::status(daqiri_gw_socket_connect_to_server(server_addr.c_str(), server_port, nullptr, conn_id));
}
inline Status socket_connect_to_server(const std::string &server_addr, uint16_t server_port,
                                       const std::string &src_addr, uintptr_t *conn_id) {
  return detail::status(
      daqiri_gw_socket_connect_to_server(server_addr.c_str(), server_port, src_addr.c_str(), conn_id));
}
inline Status socket_get_port_queue(uintptr_t conn_id, uint16_t *port, uint16_t *queue) {
  return detail::status(daqiri_gw_socket_get_port_queue(conn_id, port, queue));
}
inline Status socket_setsockopt(uintptr_t conn_id, int level, int optname, const void *optval, size_t optlen) {
  return detail::status(daqiri_gw_socket_setsockopt(conn_id, level, optname, optval, optlen));
}

/* RDMA: connections of RoCE ports, requests and their completions (get_rx_burst(&b, conn_id, server)) */
inline Status rdma_connect_to_server(const std::string &server_addr, uint16_t server_port, uintptr_t *conn_id) {
  return detail::status(daqiri_gw_rdma_connect_to_server(server_addr.c_str(), server_port, nullptr, conn_id));
}
inline Status rdma_connect_to_server(const std::string &server_addr, uint16_t server_port,
                                     const std::string &src_addr, uintptr_t *conn_id) {
  return detail::status(
      daqiri_gw_rdma_connect_to_server(server_addr.c_str(), server_port, src_addr.c_str(), conn_id));
}
inline Status rdma_get_port_queue(uintptr_t conn_id, uint16_t *port, uint16_t *queue) {
  return detail::status(daqiri_gw_rdma_get_port_queue(conn_id, port, queue));
}
inline Status rdma_get_server_conn_id(const std::string &server_addr, uint16_t server_port, uintptr_t *conn_id) {
  return detail::status(daqiri_gw_rdma_get_server_conn_id(server_addr.c_str(), server_port, conn_id));
}
inline Status rdma_set_header(BurstParams *burst, RDMAOpCode op_code, uintptr_t conn_id, bool is_server, int num_pkts,
                              uint64_t wr_id, const std::string &local_mr_name) {
  return detail::status(daqiri_gw_rdma_set_header(burst, static_cast<int32_t>(op_code), conn_id, is_server, num_pkts,
                                                  wr_id, local_mr_name.c_str()));
}
inline RDMAOpCode rdma_get_opcode(BurstParams *burst) {
  return static_cast<RDMAOpCode>(daqiri_gw_rdma_get_opcode(burst));
}

/* Writers */
inline Status daqiri_write_raw_to_file(BurstParams *burst, const std::string &absolute_path,
                                       const std::string &file_prefix, size_t packet_data_offset) {
  return detail::status(
      daqiri_gw_write_raw_to_file(burst, absolute_path.c_str(), file_prefix.c_str(), packet_data_offset));
}
inline Status daqiri_write_pcap_to_file(BurstParams *burst, const std::string &absolute_path,
                                        const std::string &file_prefix) {
  return detail::status(daqiri_gw_write_pcap_to_file(burst, absolute_path.c_str(), file_prefix.c_str()));
}
inline Status daqiri_write_raw_to_file_async(BurstParams *burst, const std::string &absolute_path,
                                             const std::string &file_prefix, uint64_t packet_data_offset,
                                             FileWriteHandle **handle) {
  return detail::status(daqiri_gw_write_raw_to_file_async(burst, absolute_path.c_str(), file_prefix.c_str(),
                                                          static_cast<size_t>(packet_data_offset), handle));
}
inline Status daqiri_write_pcap_to_file_async(BurstParams *burst, const std::string &absolute_path,
                                              const std::string &file_prefix, FileWriteHandle **handle) {
  return detail::status(
      daqiri_gw_write_pcap_to_file_async(burst, absolute_path.c_str(), file_prefix.c_str(), handle));
}
inline Status daqiri_file_write_poll(FileWriteHandle *handle, FileWriteStatus *status) {
  return detail::status(daqiri_gw_file_write_poll(handle, status));
}
inline Status daqiri_file_write_wait(FileWriteHandle *handle, FileWriteStatus *status) {
  return detail::status(daqiri_gw_file_write_wait(handle, status));
}
inline Status daqiri_file_write_destroy(FileWriteHandle *handle) {
  return detail::status(daqiri_gw_file_write_destroy(handle));
}
inline Status daqiri_s3_writer_create(const S3WriterConfig &config, S3Writer **writer) {
  return detail::status(daqiri_gw_s3_writer_create(config.bucket.c_str(), config.region.c_str(),
                                                   config.endpoint_override.c_str(), config.path_style,
                                                   config.max_inflight_uploads, config.max_staged_bytes, writer));
}
inline Status daqiri_write_raw_to_s3_objects_async(S3Writer *writer, BurstParams *burst,
                                                   const std::string &object_prefix, uint64_t packet_data_offset,
                                                   S3WriteHandle **handle) {
  return detail::status(
      daqiri_gw_write_raw_to_s3_objects_async(writer, burst, object_prefix.c_str(), packet_data_offset, handle));
}
inline Status daqiri_s3_write_poll(S3WriteHandle *handle, S3WriteStatus *status) {
  return detail::status(daqiri_gw_s3_write_poll(handle, status));
}
inline Status daqiri_s3_write_wait(S3WriteHandle *handle, S3WriteStatus *status) {
  return detail::status(daqiri_gw_s3_write_wait(handle, status));
}
inline Status daqiri_s3_write_destroy(S3WriteHandle *handle) {
  return detail::status(daqiri_gw_s3_write_destroy(handle));
}
inline Status daqiri_s3_writer_destroy(S3Writer *writer) { return detail::status(daqiri_gw_s3_writer_destroy(writer)); }

}  // namespace daqiri

#endif /* DAQIRI_DAQIRI_H */
