/*
 * daqiri-gateway: NetworkConfig to and from libdaqiri's config trees (Apache-2.0).
 *
 * One walk per struct serves both directions (ConfigIo reads a parsed tree
 * into the structs, or writes the structs into a new tree), so the member a
 * YAML key fills is the member written back to it. Writing leaves out an
 * optional member still at its default, as if its key were not written.
 */
#ifndef DAQIRI_CONFIG_IO_H
#define DAQIRI_CONFIG_IO_H

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "daqiri/c_api.h"
#include "daqiri/config.h"

namespace daqiri {
namespace detail {

template <class E>
using EnumNames = std::vector<std::pair<E, const char *>>;

inline std::string key(const std::string &at, const std::string &name) { return at.empty() ? name : at + "." + name; }

/* Text a call copies out as snprintf does (`call(out, capacity)` answers the
 * whole length, negative for none), asked again when it did not fit. */
template <class Call>
bool copy_text(const Call &call, std::string *out) {
  std::string buffer(64, '\0');
  int64_t n = call(&buffer[0], buffer.size());
  if (n < 0) { return false; }
  if (static_cast<size_t>(n) >= buffer.size()) {
    buffer.assign(static_cast<size_t>(n) + 1, '\0');
    n = call(&buffer[0], buffer.size());
  }
  buffer.resize(static_cast<size_t>(n));
  *out = buffer;
  return true;
}

class ConfigIo {
 public:
  ConfigIo(daqiri_gw_config *tree, bool writing) : tree_(tree), writing_(writing) {}

  bool writing() const { return writing_; }
  /* "path: why" of the first member that could not be read or written; "" when none. */
  const std::string &failure() const { return failure_; }

  /* A member always written. */
  void text(const std::string &path, std::string &value) {
    if (writing_) { set(path, value, 0); return; }
    std::string found;
    if (get(path, &found)) { value = found; }
  }
  template <class N>
  void number(const std::string &path, N &value) {
    static_assert(std::is_integral<N>::value, "integer members only");
    if (writing_) {
      set(path, std::is_signed<N>::value ? std::to_string(static_cast<long long>(value))
                                         : std::to_string(static_cast<unsigned long long>(value)), 1);
      return;
    }
    std::string found;
    if (!get(path, &found)) { return; }
    errno = 0;
    char *end = nullptr;
    const long long parsed = std::strtoll(found.c_str(), &end, 10);
    const auto back = static_cast<N>(parsed);
    if (errno != 0 || end == found.c_str() || *end != '\0' || static_cast<long long>(back) != parsed) {
      fail(path, "\"" + found + "\" does not fit this member's integer type");
      return;
    }
    value = back;
  }
  void flag(const std::string &path, bool &value) {
    if (writing_) { set(path, value ? "true" : "false", 2); return; }
    std::string found;
    if (get(path, &found)) { value = found == "true"; }
  }
  template <class E>
  void choice(const std::string &path, E &value, const EnumNames<E> &names) {
    if (writing_) {
      for (const auto &name : names) {
        if (name.first == value) { set(path, name.second, 0); return; }
      }
      fail(path, "this value has no YAML name");
      return;
    }
    std::string found;
    if (!get(path, &found)) { return; }
    for (const auto &name : names) {
      if (found == name.second) { value = name.first; return; }
    }
    fail(path, "\"" + found + "\" has no value in this member's enum");
  }

  /* A member written only when it differs from its default. */
  template <class T, class F>
  void optional(const T &value, const T &dflt, F &&member) {
    if (!writing_ || !(value == dflt)) { member(); }
  }

  /* A list of structs: `each(path_of_entry, entry)`. */
  template <class T, class F>
  void list(const std::string &path, std::vector<T> &items, F &&each) {
    if (!writing_) { items.resize(count(path)); }
    for (size_t i = 0; i < items.size(); ++i) { each(key(path, std::to_string(i)), items[i]); }
  }
  void strings(const std::string &path, std::vector<std::string> &items) {
    list(path, items, [this](const std::string &at, std::string &item) { text(at, item); });
  }
  template <class N>
  void numbers(const std::string &path, std::vector<N> &items) {
    list(path, items, [this](const std::string &at, N &item) { number(at, item); });
  }
  size_t count(const std::string &path) const {
    const int64_t n = daqiri_gw_config_count(tree_, path.c_str());
    return n < 0 ? 0 : static_cast<size_t>(n);
  }
  /* Whether the parsed tree has the key (reading only; marks nothing read). */
  bool has(const std::string &path) const { return daqiri_gw_config_count(tree_, path.c_str()) >= 0; }
  /* A text member that may hold an integer (cpu_core: "8"), written as one. */
  void text_or_number(const std::string &path, std::string &value) {
    const bool integer = !value.empty() && value.find_first_not_of("-0123456789") == std::string::npos;
    if (writing_ && integer) { set(path, value, 1); return; }
    text(path, value);
  }

  void fail(const std::string &path, const std::string &why) {
    if (failure_.empty()) { failure_ = path + ": " + why; }
  }

 private:
  bool get(const std::string &path, std::string *out) {
    return copy_text([&](char *text, size_t capacity) { return daqiri_gw_config_get(tree_, path.c_str(), text, capacity); },
                     out);
  }
  void set(const std::string &path, const std::string &value, int32_t kind) {
    if (daqiri_gw_config_set(tree_, path.c_str(), value.c_str(), kind) != DAQIRI_GW_SUCCESS) {
      fail(path, daqiri_gw_last_error());
    }
  }

  daqiri_gw_config *tree_;
  bool writing_;
  std::string failure_;
};

/* The YAML names of the enums. */
inline const EnumNames<MemoryKind> &names(MemoryKind) {
  static const EnumNames<MemoryKind> n{{MemoryKind::HOST, "host"}, {MemoryKind::HOST_PINNED, "host_pinned"},
                                       {MemoryKind::HUGE, "huge"}, {MemoryKind::DEVICE, "device"}};
  return n;
}
inline const EnumNames<StreamType> &names(StreamType) {
  static const EnumNames<StreamType> n{{StreamType::RAW, "raw"}, {StreamType::SOCKET, "socket"}};
  return n;
}
inline const EnumNames<EngineType> &names(EngineType) {
  static const EnumNames<EngineType> n{{EngineType::DPDK, "dpdk"},       {EngineType::SOCKET, "socket"},
                                       {EngineType::RDMA, "rdma"},       {EngineType::IBVERBS, "ibverbs"},
                                       {EngineType::AFXDP, "af_xdp"},   {EngineType::UNKNOWN, "unknown"}};
  return n;
}
inline const EnumNames<SocketProtocol> &names(SocketProtocol) {
  static const EnumNames<SocketProtocol> n{{SocketProtocol::TCP, "tcp"}, {SocketProtocol::UDP, "udp"},
                                           {SocketProtocol::ROCE, "roce"}, {SocketProtocol::INVALID, "invalid"}};
  return n;
}
inline const EnumNames<Direction> &names(Direction) {
  static const EnumNames<Direction> n{{Direction::RX, "rx"}, {Direction::TX, "tx"}, {Direction::TX_RX, "tx_rx"}};
  return n;
}
inline const EnumNames<LoopbackType> &names(LoopbackType) {
  static const EnumNames<LoopbackType> n{{LoopbackType::DISABLED, ""}, {LoopbackType::LOOPBACK_TYPE_SW, "sw"}};
  return n;
}
inline const EnumNames<LogLevel::Level> &names(LogLevel::Level) {
  static const EnumNames<LogLevel::Level> n{{LogLevel::TRACE, "trace"}, {LogLevel::DEBUG, "debug"},
                                            {LogLevel::INFO, "info"},   {LogLevel::WARN, "warn"},
                                            {LogLevel::ERROR, "error"}, {LogLevel::CRITICAL, "critical"},
                                            {LogLevel::OFF, "off"}};
  return n;
}
inline const EnumNames<SocketMode> &names(SocketMode) {
  static const EnumNames<SocketMode> n{{SocketMode::CLIENT, "client"}, {SocketMode::SERVER, "server"}};
  return n;
}
inline const EnumNames<RDMATransportMode> &names(RDMATransportMode) {
  static const EnumNames<RDMATransportMode> n{
      {RDMATransportMode::RC, "RC"}, {RDMATransportMode::UC, "UC"}, {RDMATransportMode::UD, "UD"}};
  return n;
}
inline const EnumNames<RDMAMode> &names(RDMAMode) {
  static const EnumNames<RDMAMode> n{{RDMAMode::CLIENT, "client"}, {RDMAMode::SERVER, "server"}};
  return n;
}
inline const EnumNames<QueuePollMode> &names(QueuePollMode) {
  static const EnumNames<QueuePollMode> n{{QueuePollMode::INDIRECT, "indirect"}, {QueuePollMode::DIRECT, "direct"}};
  return n;
}
inline const EnumNames<FlowType> &names(FlowType) {
  static const EnumNames<FlowType> n{{FlowType::QUEUE, "queue"},
                                     {FlowType::VLAN_PUSH, "vlan_push"},
                                     {FlowType::VLAN_POP, "vlan_pop"},
                                     {FlowType::TUNNEL_ENCAP, "tunnel_encap"},
                                     {FlowType::TUNNEL_DECAP, "tunnel_decap"}};
  return n;
}
inline const EnumNames<TunnelType> &names(TunnelType) {
  static const EnumNames<TunnelType> n{
      {TunnelType::VXLAN, "vxlan"}, {TunnelType::GRE, "gre"}, {TunnelType::NVGRE, "nvgre"}};
  return n;
}
inline const EnumNames<ReorderDataType> &names(ReorderDataType) {
  static const EnumNames<ReorderDataType> n{{ReorderDataType::INT4, "int4"},   {ReorderDataType::INT8, "int8"},
                                            {ReorderDataType::INT16, "int16"}, {ReorderDataType::INT32, "int32"},
                                            {ReorderDataType::FP16, "fp16"},   {ReorderDataType::BF16, "bf16"},
                                            {ReorderDataType::FP32, "fp32"},   {ReorderDataType::FP64, "fp64"}};
  return n;
}
inline const EnumNames<ReorderEndianness> &names(ReorderEndianness) {
  static const EnumNames<ReorderEndianness> n{{ReorderEndianness::HOST, "host"},
                                              {ReorderEndianness::NETWORK, "network"}};
  return n;
}

template <class E>
void choice(ConfigIo &io, const std::string &path, E &value) { io.choice(path, value, names(value)); }
template <class E>
void optional_choice(ConfigIo &io, const std::string &path, E &value, E dflt) {
  io.optional(value, dflt, [&] { choice(io, path, value); });
}
template <class N>
void optional_number(ConfigIo &io, const std::string &path, N &value, N dflt = N{}) {
  io.optional(value, dflt, [&] { io.number(path, value); });
}
inline void optional_text(ConfigIo &io, const std::string &path, std::string &value) {
  io.optional(value, std::string(), [&] { io.text(path, value); });
}
inline void optional_flag(ConfigIo &io, const std::string &path, bool &value) {
  io.optional(value, false, [&] { io.flag(path, value); });
}

/* A dotted IPv4 key held as an address in network order. */
inline void ipv4(ConfigIo &io, const std::string &path, in_addr_t &address) {
  std::string dotted;
  if (io.writing()) {
    if (address == INADDR_ANY) { return; }
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &address, text, sizeof(text));
    dotted = text;
    io.text(path, dotted);
    return;
  }
  io.text(path, dotted);
  if (!dotted.empty() && inet_pton(AF_INET, dotted.c_str(), &address) != 1) {
    io.fail(path, "\"" + dotted + "\" is not an IPv4 address");
  }
}

inline void bind(ConfigIo &io, const std::string &at, MemoryRegionConfig &mr) {
  io.text(key(at, "name"), mr.name_);
  choice(io, key(at, "kind"), mr.kind_);
  io.number(key(at, "affinity"), mr.affinity_);
  io.number(key(at, "num_bufs"), mr.num_bufs_);
  io.number(key(at, "buf_size"), mr.buf_size_);
  io.optional(mr.owned_, true, [&] { io.flag(key(at, "owned"), mr.owned_); });
  static const std::pair<uint32_t, const char *> access_names[] = {
      {MEM_ACCESS_LOCAL, "local"}, {MEM_ACCESS_RDMA_WRITE, "rdma_write"}, {MEM_ACCESS_RDMA_READ, "rdma_read"}};
  std::vector<std::string> access;
  for (const auto &name : access_names) {
    if (io.writing() && (mr.access_ & name.first)) { access.push_back(name.second); }
  }
  io.strings(key(at, "access"), access);
  if (!io.writing()) {
    for (const auto &text : access) {
      for (const auto &name : access_names) {
        if (text == name.second) { mr.access_ |= name.first; }
      }
    }
  }
}

inline void bind(ConfigIo &io, const std::string &at, CommonQueueConfig &q) {
  io.text(key(at, "name"), q.name_);
  io.number(key(at, "id"), q.id_);
  optional_number(io, key(at, "batch_size"), q.batch_size_);
  optional_number(io, key(at, "split_boundary"), q.split_boundary_);
  io.optional(q.cpu_core_, std::string(), [&] { io.text_or_number(key(at, "cpu_core"), q.cpu_core_); });
  io.strings(key(at, "memory_regions"), q.mrs_);
  io.strings(key(at, "offloads"), q.offloads_);
}

inline void bind(ConfigIo &io, const std::string &at, RxQueueConfig &q) {
  bind(io, at, q.common_);
  optional_number(io, key(at, "timeout_us"), q.timeout_us_);
  optional_choice(io, key(at, "poll_mode"), q.poll_mode_, QueuePollMode::INDIRECT);
}

inline void bind(ConfigIo &io, const std::string &at, TxQueueConfig &q) {
  bind(io, at, q.common_);
  optional_number(io, key(at, "timeout_us"), q.timeout_us_);
  optional_choice(io, key(at, "poll_mode"), q.poll_mode_, QueuePollMode::INDIRECT);
  optional_number(io, key(at, "pacing_mbps"), q.pacing_mbps_);
}

inline void bind(ConfigIo &io, const std::string &at, TunnelConfig &t) {
  choice(io, key(at, "type"), t.type_);
  optional_text(io, key(at, "outer_eth_src"), t.outer_eth_src_);
  optional_text(io, key(at, "outer_eth_dst"), t.outer_eth_dst_);
  optional_text(io, key(at, "outer_ipv4_src"), t.outer_ipv4_src_);
  optional_text(io, key(at, "outer_ipv4_dst"), t.outer_ipv4_dst_);
  optional_number(io, key(at, "outer_ipv4_ttl"), t.outer_ipv4_ttl_, uint8_t{64});
  optional_number(io, key(at, "outer_ipv4_tos"), t.outer_ipv4_tos_);
  optional_number(io, key(at, "outer_udp_src"), t.outer_udp_src_);
  optional_number(io, key(at, "outer_udp_dst"), t.outer_udp_dst_, uint16_t{4789});
  optional_number(io, key(at, "vni"), t.vni_);
  optional_number(io, key(at, "gre_protocol"), t.gre_protocol_, uint16_t{0x0800});
  optional_number(io, key(at, "tni"), t.tni_);
  optional_number(io, key(at, "flow_id"), t.flow_id_);
}

inline void bind(ConfigIo &io, const std::string &at, FlowAction &a) {
  choice(io, key(at, "type"), a.type_);
  if (io.writing() ? a.ids_.empty() && a.type_ == FlowType::QUEUE : io.has(key(at, "id"))) {
    io.number(key(at, "id"), a.id_);
  }
  io.numbers(key(at, "ids"), a.ids_);
  const bool vlan = a.type_ == FlowType::VLAN_PUSH;
  if (vlan || !io.writing()) {
    io.number(key(at, "vlan_id"), a.vlan_.vlan_id_);
    optional_number(io, key(at, "pcp"), a.vlan_.pcp_);
    optional_number(io, key(at, "dei"), a.vlan_.dei_);
    optional_number(io, key(at, "ethertype"), a.vlan_.ethertype_, uint16_t{0x8100});
  }
  if (io.writing() ? a.tunnel_.type_ != TunnelType::NONE : io.has(key(at, "tunnel.type"))) {
    bind(io, key(at, "tunnel"), a.tunnel_);
  }
}

inline void bind(ConfigIo &io, const std::string &at, FlowMatch &m) {
  optional_number(io, key(at, "udp_src"), m.udp_src_);
  optional_number(io, key(at, "udp_dst"), m.udp_dst_);
  optional_number(io, key(at, "ipv4_len"), m.ipv4_len_);
  ipv4(io, key(at, "ipv4_src"), m.ipv4_src_);
  ipv4(io, key(at, "ipv4_dst"), m.ipv4_dst_);
  if (io.writing() ? m.type_ == FlowMatchType::FLEX_ITEM : io.has(key(at, "flex_item_id"))) {
    m.type_ = FlowMatchType::FLEX_ITEM;
    io.number(key(at, "flex_item_id"), m.flex_item_match_.flex_item_id_);
    io.number(key(at, "val"), m.flex_item_match_.val_);
    io.number(key(at, "mask"), m.flex_item_match_.mask_);
  }
  EcpriMatch &e = m.ecpri_match_;
  if (io.writing() ? m.type_ == FlowMatchType::ECPRI : io.has(key(at, "ecpri"))) {
    m.type_ = FlowMatchType::ECPRI;
    const std::string ecpri = key(at, "ecpri");
    if (io.writing() ? e.match_msg_type_ || e.match_id_ : io.has(key(ecpri, "msg_type"))) {
      e.match_msg_type_ = true;
      io.number(key(ecpri, "msg_type"), e.msg_type_);
    }
    const std::string id = key(ecpri, e.msg_type_ == 2 ? "rtc_id" : "pc_id");
    if (io.writing() ? e.match_id_ : io.has(id)) {
      e.match_id_ = true;
      io.number(id, e.id_);
    }
  }
}

template <class Flow>
void bind_flow(ConfigIo &io, const std::string &at, Flow &f) {
  io.text(key(at, "name"), f.name_);
  if (io.writing() ? f.actions_.empty() : io.has(key(at, "action"))) { bind(io, key(at, "action"), f.action_); }
  io.list(key(at, "actions"), f.actions_, [&io](const std::string &entry, FlowAction &a) { bind(io, entry, a); });
  bind(io, key(at, "match"), f.match_);
}
inline void bind(ConfigIo &io, const std::string &at, FlowConfig &f) {
  bind_flow(io, at, f);
  io.number(key(at, "id"), f.id_);
}
inline void bind(ConfigIo &io, const std::string &at, FlowRuleConfig &f) { bind_flow(io, at, f); }

inline void bind(ConfigIo &io, const std::string &at, FlexItemConfig &f) {
  io.text(key(at, "name"), f.name_);
  io.number(key(at, "id"), f.id_);
  io.number(key(at, "offset"), f.offset_);
  io.number(key(at, "udp_dst_port"), f.udp_dst_port_);
}

inline void bind(ConfigIo &io, const std::string &at, ReorderBitFieldConfig &b) {
  io.number(key(at, "bit_offset"), b.bit_offset_);
  io.number(key(at, "bit_width"), b.bit_width_);
}

inline void bind(ConfigIo &io, const std::string &at, ReorderConfig &r) {
  io.text(key(at, "name"), r.name_);
  io.text(key(at, "reorder_type"), r.reorder_type_);
  io.text(key(at, "memory_region"), r.memory_region_);
  io.number(key(at, "payload_byte_offset"), r.payload_byte_offset_);
  io.numbers(key(at, "flow_ids"), r.flow_ids_);
  const std::string by_batch = key(at, "method.seq_batch_number");
  const std::string by_count = key(at, "method.seq_packets_per_batch");
  if (io.writing() ? r.method_ == ReorderMethod::SEQ_BATCH_NUMBER : io.has(by_batch)) {
    r.method_ = ReorderMethod::SEQ_BATCH_NUMBER;
    auto &m = r.seq_batch_number_;
    bind(io, key(by_batch, "sequence_number"), m.sequence_number_);
    bind(io, key(by_batch, "batch_number"), m.batch_number_);
    const unsigned shift = m.sequence_number_.bit_width_ - std::min(m.sequence_number_.bit_width_, m.batch_number_.bit_width_);
    if (shift < 32) { m.packets_per_batch_ = 1U << shift; }
  }
  if (io.writing() ? r.method_ == ReorderMethod::SEQ_PACKETS_PER_BATCH : io.has(by_count)) {
    r.method_ = ReorderMethod::SEQ_PACKETS_PER_BATCH;
    bind(io, key(by_count, "sequence_number"), r.seq_packets_per_batch_.sequence_number_);
    io.number(key(by_count, "packets_per_batch"), r.seq_packets_per_batch_.packets_per_batch_);
  }
  auto &d = r.data_types_;
  if (io.writing() ? d.enabled_ : io.has(key(at, "data_types.input_type"))) {
    d.enabled_ = true;
    choice(io, key(at, "data_types.input_type"), d.input_type_);
    choice(io, key(at, "data_types.output_type"), d.output_type_);
    choice(io, key(at, "data_types.endianness"), d.input_endianness_);
  }
}

inline void bind(ConfigIo &io, const std::string &at, InterfaceConfig &i) {
  io.text(key(at, "name"), i.name_);
  optional_text(io, key(at, "address"), i.address_);
  const std::string socket = key(at, "socket_config");
  SocketConfig &s = i.socket_;
  if (io.writing() ? s.mode_ != SocketMode::INVALID : io.has(key(socket, "mode"))) {
    choice(io, key(socket, "mode"), s.mode_);
    optional_text(io, key(socket, "local_addr"), s.local_addr_);
    optional_text(io, key(socket, "remote_addr"), s.remote_addr_);
    optional_text(io, key(socket, "local_ip"), s.local_ip_);
    optional_text(io, key(socket, "remote_ip"), s.remote_ip_);
    optional_number(io, key(socket, "local_port"), s.local_port_);
    optional_number(io, key(socket, "remote_port"), s.remote_port_);
    optional_number(io, key(socket, "max_payload_size"), s.max_payload_size_);
    optional_number(io, key(socket, "max_burst_interval_ms"), s.max_burst_interval_ms_);
    optional_number(io, key(socket, "min_ipg_ns"), s.min_ipg_ns_);
    optional_number(io, key(socket, "retry_connect_s"), s.retry_connect_s_, int32_t{1});
  }
  optional_choice(io, key(at, "roce_config.transport_mode"), i.roce_.transport_mode_, RDMATransportMode::INVALID);
  optional_choice(io, key(at, "rdma_config.mode"), i.rdma_.mode_, RDMAMode::INVALID);
  optional_choice(io, key(at, "rdma_config.xmode"), i.rdma_.xmode_, RDMATransportMode::INVALID);
  optional_number(io, key(at, "rdma_config.port"), i.rdma_.port_);

  const std::string rx = key(at, "rx");
  if (io.writing() ? !i.rx_.queues_.empty() : io.has(key(rx, "queues"))) {
    optional_flag(io, key(rx, "flow_isolation"), i.rx_.flow_isolation_);
    optional_flag(io, key(rx, "hardware_timestamps"), i.rx_.hardware_timestamps_);
    optional_number(io, key(rx, "dynamic_flow_capacity"), i.rx_.dynamic_flow_capacity_);
    io.list(key(rx, "queues"), i.rx_.queues_, [&io](const std::string &e, RxQueueConfig &q) { bind(io, e, q); });
    io.list(key(rx, "flows"), i.rx_.flows_, [&io](const std::string &e, FlowConfig &f) { bind(io, e, f); });
    io.list(key(rx, "flex_items"), i.rx_.flex_items_, [&io](const std::string &e, FlexItemConfig &f) { bind(io, e, f); });
    io.list(key(rx, "reorder_configs"), i.rx_.reorder_configs_,
            [&io](const std::string &e, ReorderConfig &r) { bind(io, e, r); });
  }
  const std::string tx = key(at, "tx");
  if (io.writing() ? !i.tx_.queues_.empty() : io.has(key(tx, "queues"))) {
    optional_flag(io, key(tx, "accurate_send"), i.tx_.accurate_send_);
    io.list(key(tx, "queues"), i.tx_.queues_, [&io](const std::string &e, TxQueueConfig &q) { bind(io, e, q); });
    io.list(key(tx, "flows"), i.tx_.flows_, [&io](const std::string &e, FlowConfig &f) { bind(io, e, f); });
  }
}

inline void bind(ConfigIo &io, NetworkConfig &config) {
  CommonConfig &c = config.common_;
  io.number("version", c.version);
  io.number("master_core", c.master_core_);
  choice(io, "stream_type", c.stream_type);
  optional_choice(io, "engine", c.engine, EngineType::DEFAULT);
  optional_choice(io, "loopback", c.loopback_, LoopbackType::DISABLED);
  optional_choice(io, "log_level", config.log_level_, LogLevel::WARN);
  bool debug = config.debug_ != 0;
  optional_flag(io, "debug", debug);
  config.debug_ = debug ? 1 : 0;
  optional_number(io, "tx_meta_buffers", config.tx_meta_buffers_);
  optional_number(io, "rx_meta_buffers", config.rx_meta_buffers_);
  if (!io.writing()) {
    choice(io, "(derived).engine_type", c.engine_type);
    choice(io, "(derived).protocol", c.protocol);
    choice(io, "(derived).dir", c.dir);
  }

  /* DAQIRI keeps regions by name; the YAML lists them (written in name order). */
  std::vector<MemoryRegionConfig> regions;
  if (io.writing()) {
    for (const auto &entry : config.mrs_) { regions.push_back(entry.second); }
    std::sort(regions.begin(), regions.end(),
              [](const MemoryRegionConfig &a, const MemoryRegionConfig &b) { return a.name_ < b.name_; });
  }
  io.list("memory_regions", regions, [&io](const std::string &e, MemoryRegionConfig &mr) { bind(io, e, mr); });
  if (!io.writing()) {
    for (auto &mr : regions) { config.mrs_[mr.name_] = mr; }
  }

  io.list("interfaces", config.ifs_, [&io](const std::string &e, InterfaceConfig &i) { bind(io, e, i); });
  for (size_t i = 0; i < config.ifs_.size() && !io.writing(); ++i) { config.ifs_[i].port_id_ = static_cast<uint16_t>(i); }
}

/* A flow as the YAML of its rx.flows entry (dynamic flows cross the C ABI so). */
inline std::string flow_yaml(const FlowRuleConfig &flow, std::string *failure) {
  daqiri_gw_config *tree = daqiri_gw_config_new();
  ConfigIo io(tree, true);
  FlowRuleConfig copy = flow;
  bind(io, "", copy);
  std::string yaml;
  if (char *text = daqiri_gw_config_yaml(tree)) {
    yaml = text;
    daqiri_gw_config_free_text(text);
  }
  daqiri_gw_config_free(tree);
  *failure = io.failure();
  return yaml;
}

}  // namespace detail
}  // namespace daqiri

#endif /* DAQIRI_CONFIG_IO_H */
