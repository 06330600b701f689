/*
 * daqiri-gateway: DAQIRI's config structs (Apache-2.0).
 *
 * NetworkConfig and what it holds, with the members DAQIRI's programs read
 * and set, for parse_network_config and daqiri_init(NetworkConfig&)
 * (daqiri/config_io.h). Each member stands for one YAML key; members marked
 * "derived" are filled by parsing and not written back. How the members
 * map to YAML keys, and which keys have no member: docs/coming-from-daqiri.md.
 */
#ifndef DAQIRI_CONFIG_H
#define DAQIRI_CONFIG_H

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace daqiri {

/* The flow a packet matched; 0 when none did. */
using FlowId = uint32_t;

constexpr uint32_t DEFAULT_DYNAMIC_FLOW_CAPACITY = 0;

enum class MemoryKind { HOST, HOST_PINNED, HUGE, DEVICE, INVALID };
enum MemoryAccess { MEM_ACCESS_LOCAL = 1U, MEM_ACCESS_RDMA_WRITE = 1U << 1, MEM_ACCESS_RDMA_READ = 1U << 2 };
enum class StreamType { RAW, SOCKET, INVALID };
enum class SocketProtocol { TCP, UDP, ROCE, INVALID };
enum class Direction : uint8_t { RX = 0, TX = 1, TX_RX = 2 };
enum class LoopbackType : uint8_t { DISABLED = 0, LOOPBACK_TYPE_SW = 1 };
/* AFXDP is ours: an interface that runs on the AF_XDP backend. */
enum class EngineType { UNKNOWN = -1, DEFAULT, DPDK, SOCKET, RDMA, IBVERBS, AFXDP = 100 };
enum class RDMAMode { CLIENT, SERVER, INVALID };
enum class RDMATransportMode { RC, UC, UD, INVALID };
enum class SocketMode { CLIENT, SERVER, INVALID };
enum class QueuePollMode { INDIRECT, DIRECT, INVALID };
enum class FlowType { QUEUE, VLAN_PUSH, VLAN_POP, TUNNEL_ENCAP, TUNNEL_DECAP };
enum class TunnelType { NONE, VXLAN, GRE, NVGRE };
enum class FlowMatchType { IPV4_UDP, FLEX_ITEM, ECPRI };
enum class ReorderMethod { INVALID = 0, SEQ_BATCH_NUMBER, SEQ_PACKETS_PER_BATCH };
enum class ReorderDataType : uint8_t { SAME = 0, INT4, INT8, INT16, INT32, FP16, BF16, FP32, FP64, INVALID };
enum class ReorderEndianness : uint8_t { HOST = 0, NETWORK, INVALID };

class LogLevel {
 public:
  enum Level { TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL, OFF };
};

/* Kept for DAQIRI's programs that derive from it; the engine reads none. */
class EngineExtraQueueConfig {
 public:
  virtual ~EngineExtraQueueConfig() = default;
};

struct RDMAConfig {
  RDMAMode mode_ = RDMAMode::INVALID;
  RDMATransportMode xmode_ = RDMATransportMode::INVALID;
  uint16_t port_ = 0;
};

struct CommonQueueConfig {
  std::string name_;
  int id_ = 0;
  int batch_size_ = 0;
  int split_boundary_ = 0;
  std::string cpu_core_;
  std::vector<std::string> mrs_;
  std::vector<std::string> offloads_;
  EngineExtraQueueConfig *extra_queue_config_ = nullptr;
};

struct MemoryRegionConfig {
  std::string name_;
  MemoryKind kind_ = MemoryKind::INVALID;
  uint16_t affinity_ = 0;
  uint32_t access_ = 0; /* MemoryAccess bits */
  size_t buf_size_ = 0;
  size_t adj_size_ = 0; /* derived by DAQIRI's engines; 0 here */
  size_t ttl_size_ = 0; /* derived by DAQIRI's engines; 0 here */
  size_t num_bufs_ = 0;
  bool owned_ = true;
};

struct RxQueueConfig {
  CommonQueueConfig common_;
  uint64_t timeout_us_ = 0;
  QueuePollMode poll_mode_ = QueuePollMode::INDIRECT;
};

struct TxQueueConfig {
  CommonQueueConfig common_;
  QueuePollMode poll_mode_ = QueuePollMode::INDIRECT;
  uint64_t pacing_mbps_ = 0;
  uint64_t timeout_us_ = 0; /* ours: the key DAQIRI's examples set on TX queues too */
};

struct VlanActionConfig {
  uint16_t vlan_id_ = 0;
  uint8_t pcp_ = 0;
  uint8_t dei_ = 0;
  uint16_t ethertype_ = 0x8100;
};

struct TunnelConfig {
  TunnelType type_ = TunnelType::NONE;
  std::string outer_eth_src_;
  std::string outer_eth_dst_;
  std::string outer_ipv4_src_;
  std::string outer_ipv4_dst_;
  uint8_t outer_ipv4_ttl_ = 64;
  uint8_t outer_ipv4_tos_ = 0;
  uint16_t outer_udp_src_ = 0;
  uint16_t outer_udp_dst_ = 4789;
  uint32_t vni_ = 0;
  uint16_t gre_protocol_ = 0x0800;
  uint32_t tni_ = 0;
  uint8_t flow_id_ = 0;
};

/* One action: QUEUE to queue id_, or to ids_ (two or more: RSS). */
struct FlowAction {
  FlowType type_ = FlowType::QUEUE;
  uint16_t id_ = 0;
  VlanActionConfig vlan_;
  TunnelConfig tunnel_;
  std::vector<uint16_t> ids_;
};

struct FlexItemMatch {
  uint16_t flex_item_id_ = 0;
  uint32_t val_ = 0;
  uint32_t mask_ = 0;
};

/* eCPRI: the message type, and its pc_id (types 0, 1) or rtc_id (type 2). */
struct EcpriMatch {
  bool match_msg_type_ = false;
  uint8_t msg_type_ = 0;
  bool match_id_ = false;
  uint16_t id_ = 0;
};

/* What a flow matches; a zero field matches anything. Addresses in network order. */
struct FlowMatch {
  FlowMatchType type_ = FlowMatchType::IPV4_UDP;
  uint16_t udp_src_ = 0;
  uint16_t udp_dst_ = 0;
  uint16_t ipv4_len_ = 0;
  in_addr_t ipv4_src_ = INADDR_ANY;
  in_addr_t ipv4_dst_ = INADDR_ANY;
  FlexItemMatch flex_item_match_;
  EcpriMatch ecpri_match_;
};

/* A flow of rx.flows or tx.flows: action_, or the ordered actions_ when not empty. */
struct FlowConfig {
  std::string name_;
  FlowId id_ = 0;
  FlowAction action_;
  std::vector<FlowAction> actions_;
  FlowMatch match_;
  void *backend_config_ = nullptr; /* not read */
};

/* A dynamic RX flow (add_rx_flow_async); the library gives its FlowId. */
struct FlowRuleConfig {
  std::string name_;
  FlowAction action_;
  std::vector<FlowAction> actions_;
  FlowMatch match_;
  void *backend_config_ = nullptr; /* not read */
};

struct CommonConfig {
  int version = 1;
  int master_core_ = 0;
  Direction dir = Direction::RX;                 /* derived */
  StreamType stream_type = StreamType::INVALID;
  SocketProtocol protocol = SocketProtocol::INVALID; /* derived from the endpoints' schemes */
  EngineType engine = EngineType::DEFAULT;
  EngineType engine_type = EngineType::UNKNOWN;  /* derived: the engine that runs it */
  LoopbackType loopback_ = LoopbackType::DISABLED;
};

struct SocketConfig {
  SocketMode mode_ = SocketMode::INVALID;
  std::string local_addr_;
  std::string remote_addr_;
  std::string local_ip_;
  std::string remote_ip_;
  uint16_t local_port_ = 0;
  uint16_t remote_port_ = 0;
  uint16_t max_payload_size_ = 0;
  uint64_t max_burst_interval_ms_ = 0;
  uint32_t min_ipg_ns_ = 0;
  int32_t retry_connect_s_ = 1;
};

struct RoCEConfig {
  RDMATransportMode transport_mode_ = RDMATransportMode::INVALID;
};

struct FlexItemConfig {
  std::string name_;
  uint16_t id_ = 0;
  uint16_t udp_dst_port_ = 0;
  uint16_t offset_ = 0;
};

struct ReorderBitFieldConfig {
  uint16_t bit_offset_ = 0;
  uint8_t bit_width_ = 0;
};

struct ReorderSeqBatchNumberConfig {
  ReorderBitFieldConfig sequence_number_;
  ReorderBitFieldConfig batch_number_;
  uint32_t packets_per_batch_ = 0; /* derived from the bit widths */
};

struct ReorderSeqPacketsPerBatchConfig {
  ReorderBitFieldConfig sequence_number_;
  uint32_t packets_per_batch_ = 0;
};

struct ReorderDataTypesConfig {
  bool enabled_ = false;
  ReorderDataType input_type_ = ReorderDataType::SAME;
  ReorderDataType output_type_ = ReorderDataType::SAME;
  ReorderEndianness input_endianness_ = ReorderEndianness::HOST;
};

struct ReorderConfig {
  std::string name_;
  std::string reorder_type_;
  std::string memory_region_;
  uint32_t payload_byte_offset_ = 0;
  std::vector<FlowId> flow_ids_;
  ReorderMethod method_ = ReorderMethod::INVALID;
  ReorderSeqBatchNumberConfig seq_batch_number_;
  ReorderSeqPacketsPerBatchConfig seq_packets_per_batch_;
  ReorderDataTypesConfig data_types_;
};

struct RxConfig {
  bool flow_isolation_ = false;
  bool hardware_timestamps_ = false;
  uint32_t dynamic_flow_capacity_ = DEFAULT_DYNAMIC_FLOW_CAPACITY;
  std::vector<RxQueueConfig> queues_;
  std::vector<FlowConfig> flows_;
  std::vector<FlexItemConfig> flex_items_;
  std::vector<ReorderConfig> reorder_configs_;
};

struct TxConfig {
  bool accurate_send_ = false;
  std::vector<TxQueueConfig> queues_;
  std::vector<FlowConfig> flows_;
};

struct InterfaceConfig {
  std::string name_;
  std::string address_;
  uint16_t port_id_ = 0; /* derived: its index */
  SocketConfig socket_;
  RoCEConfig roce_;
  RDMAConfig rdma_;
  RxConfig rx_;
  TxConfig tx_;
};

struct NetworkConfig {
  CommonConfig common_;
  std::unordered_map<std::string, MemoryRegionConfig> mrs_;
  std::vector<InterfaceConfig> ifs_;
  uint16_t debug_ = 0;
  uint32_t tx_meta_buffers_ = 0; /* 0: the engine's default */
  uint32_t rx_meta_buffers_ = 0;
  LogLevel::Level log_level_ = LogLevel::WARN;
};

}  // namespace daqiri

#endif /* DAQIRI_CONFIG_H */
