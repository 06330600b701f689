/*
 * daqiri-gateway: the types of DAQIRI's C++ API (Apache-2.0).
 */
#ifndef DAQIRI_TYPES_H
#define DAQIRI_TYPES_H

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daqiri/c_api.h"
#include "daqiri/config.h"

namespace daqiri {

enum class Status : int32_t {
  SUCCESS = DAQIRI_GW_SUCCESS,
  NULL_PTR = DAQIRI_GW_NULL_PTR,
  NO_FREE_BURST_BUFFERS = DAQIRI_GW_NO_FREE_BURST_BUFFERS,
  NO_FREE_PACKET_BUFFERS = DAQIRI_GW_NO_FREE_PACKET_BUFFERS,
  NOT_READY = DAQIRI_GW_NOT_READY,
  INVALID_PARAMETER = DAQIRI_GW_INVALID_PARAMETER,
  NO_SPACE_AVAILABLE = DAQIRI_GW_NO_SPACE_AVAILABLE,
  NOT_SUPPORTED = DAQIRI_GW_NOT_SUPPORTED,
  GENERIC_FAILURE = DAQIRI_GW_GENERIC_FAILURE,
  CONNECT_FAILURE = DAQIRI_GW_CONNECT_FAILURE,
  INTERNAL_ERROR = DAQIRI_GW_INTERNAL_ERROR,
};

/* The name DAQIRI gives a status ("NOT_READY"). */
inline const char *status_to_string(Status status) {
  return daqiri_gw_status_name(static_cast<int32_t>(status));
}

/* A burst: read hdr.hdr and event; everything else through the calls. */
using BurstParams = ::daqiri_gw_burst;
using BurstHeader = ::daqiri_gw_burst_header;
using BurstHeaderParams = ::daqiri_gw_burst_fields;
using BurstTransportHeader = ::daqiri_gw_burst_transport_header;

constexpr uint32_t DAQIRI_BURST_FLAG_REORDERED = DAQIRI_GW_BURST_FLAG_REORDERED;
constexpr uint32_t DAQIRI_BURST_FLAG_REORDER_TIMEOUT = DAQIRI_GW_BURST_FLAG_REORDER_TIMEOUT;

using ReorderBurstInfo = ::daqiri_gw_reorder_info;

/* Asynchronous file writes (daqiri_write_*_to_file_async). */
using FileWriteHandle = ::daqiri_gw_file_write;
using FileWriteStatus = ::daqiri_gw_file_write_status;

/* The S3 raw writer (daqiri_s3_writer_create ...). */
using S3Writer = ::daqiri_gw_s3_writer;
using S3WriteHandle = ::daqiri_gw_s3_write;
using S3WriteStatus = ::daqiri_gw_s3_write_status;
struct S3WriterConfig {
  std::string bucket;
  std::string region;
  std::string endpoint_override;
  bool path_style = false;
  /* No AWS SDK here to initialise: kept for DAQIRI's programs, no effect. */
  bool aws_sdk_already_initialized = false;
  uint32_t max_inflight_uploads = 8;
  uint64_t max_staged_bytes = 1ULL << 30;
};

/* An RDMA request, or what a completion was (rdma_set_header, rdma_get_opcode). */
enum class RDMAOpCode : int32_t { CONNECT, SEND, RECEIVE, RDMA_WRITE, RDMA_WRITE_IMM, RDMA_READ, RDMA_READ_IMM, INVALID };

/* Dynamic RX flow operations (add_rx_flow_async ...); the flows are
 * FlowRuleConfig (daqiri/config.h). */
enum class FlowOpType { ADD_RX, ADD_RX_BATCH, DELETE };
using FlowOpId = uint64_t;

/* A finished flow operation; a batch's flow ids in input order (0: not installed). */
struct FlowOpResult {
  FlowOpId op_id_ = 0;
  FlowOpType type_ = FlowOpType::ADD_RX;
  Status status_ = Status::SUCCESS;
  FlowId flow_id_ = 0;
  std::vector<FlowId> flow_ids_;
};

/* An Ethernet/IPv4/UDP header stack, as raw packets start. */
struct __attribute__((packed)) UDPIPV4Pkt {
  struct ethhdr eth;
  struct iphdr ip;
  struct udphdr udp;
};

}  // namespace daqiri

#endif /* DAQIRI_TYPES_H */
