/*
 * daqiri-gateway: the C ABI of libdaqiri (Apache-2.0).
 *
 * daqiri/daqiri.h builds DAQIRI's C++ API on these functions; C programs
 * may call them directly. Kept by hand beside gateway/capi/src: the test
 * suite compares the functions declared here with those the library
 * exports (tests/capi/run.sh).
 *
 * The contract for every pointer argument: a burst is what get_rx_burst or
 * create_tx_burst_params gave (anything else is refused by name, never
 * dereferenced); strings are NUL-terminated; out-pointers are writable.
 * Calls that fail return a status other than DAQIRI_GW_SUCCESS (or a null,
 * zero or -1 value where they return data) and leave a message for
 * daqiri_gw_last_error() on the calling thread.
 */
#ifndef DAQIRI_GW_C_API_H
#define DAQIRI_GW_C_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes, in DAQIRI's order. */
enum {
  DAQIRI_GW_SUCCESS = 0,
  DAQIRI_GW_NULL_PTR = 1,
  DAQIRI_GW_NO_FREE_BURST_BUFFERS = 2,
  DAQIRI_GW_NO_FREE_PACKET_BUFFERS = 3,
  DAQIRI_GW_NOT_READY = 4,
  DAQIRI_GW_INVALID_PARAMETER = 5,
  DAQIRI_GW_NO_SPACE_AVAILABLE = 6,
  DAQIRI_GW_NOT_SUPPORTED = 7,
  DAQIRI_GW_GENERIC_FAILURE = 8,
  DAQIRI_GW_CONNECT_FAILURE = 9,
  DAQIRI_GW_INTERNAL_ERROR = 10
};

/* Which free_* call: the _rx or the _tx one. */
enum { DAQIRI_GW_RX = 0, DAQIRI_GW_TX = 1 };

/* burst_flags bits. */
#define DAQIRI_GW_BURST_FLAG_REORDERED (1u << 28)
#define DAQIRI_GW_BURST_FLAG_REORDER_TIMEOUT (1u << 29)

/* The fields of a burst a program reads: burst->hdr.hdr.num_pkts, ... */
typedef struct daqiri_gw_burst_fields {
  uint16_t port_id;
  uint16_t q_id;
  uint32_t num_pkts;    /* packets (1 for a reorder aggregate) */
  uint32_t num_segs;    /* segments per packet */
  uint32_t max_pkt;     /* capacity; a reorder aggregate's source packets */
  uint32_t burst_flags; /* DAQIRI_GW_BURST_FLAG_* */
} daqiri_gw_burst_fields;

typedef struct daqiri_gw_burst_header {
  daqiri_gw_burst_fields hdr;
} daqiri_gw_burst_header;

/* An RDMA request's fields (rdma_set_header), and its completion's
 * (get_rx_burst(conn_id)): burst->transport_hdr.status, .opcode, .wr_id ...
 * Its first six fields are hdr.hdr's, over the same bytes. In C++ opcode
 * and status are daqiri::RDMAOpCode and daqiri::Status (types.h). */
#ifdef __cplusplus
}
namespace daqiri {
enum class Status : int32_t;
enum class RDMAOpCode : int32_t;
}
extern "C" {
#define DAQIRI_GW_ENUM(cxx) daqiri::cxx
#else
#define DAQIRI_GW_ENUM(cxx) int32_t
#endif
typedef struct daqiri_gw_burst_transport_header {
  uint16_t port_id;
  uint16_t q_id;
  uint32_t num_pkts;
  uint32_t num_segs;
  uint32_t max_pkt;
  uint32_t burst_flags;
  uint32_t reserved;
  uint8_t version; /* 1 for an RDMA request or completion, 0 for any other burst */
  bool server;
  bool tx; /* a SEND */
  DAQIRI_GW_ENUM(RDMAOpCode) opcode;
  DAQIRI_GW_ENUM(Status) status; /* a completion's: GENERIC_FAILURE if a work request failed */
  uint64_t wr_id;
  uintptr_t conn_id;
  char local_mr_name[32];
  char remote_mr_name[32]; /* RDMA WRITE and READ (refused): empty */
  void *raddr;
  uint64_t dst_key;
  uint32_t imm;
  uint32_t server_addr;
  uint16_t server_port;
} daqiri_gw_burst_transport_header;
#undef DAQIRI_GW_ENUM

struct CUevent_st;

/* A burst handle. Only ever used through pointers the library hands out:
 * the library's part of the handle follows these fields. */
typedef struct daqiri_gw_burst {
  union {
    daqiri_gw_burst_header hdr;
    daqiri_gw_burst_transport_header transport_hdr;
  };
  /* The CUDA event a GPU reorder aggregate completes with; null otherwise. */
  struct CUevent_st *event;
} daqiri_gw_burst;

/* DAQIRI's ReorderBurstInfo fields first, then two of ours. */
typedef struct daqiri_gw_reorder_info {
  uint64_t batch_id;
  uint32_t source_packet_count; /* source packets in the aggregate */
  uint32_t packets_per_batch;   /* the aggregate's slots */
  uint32_t payload_len;         /* bytes per slot */
  uint32_t aggregate_len;       /* packets_per_batch x payload_len */
  uint32_t burst_flags;
  uint16_t plan;         /* index among the interface's reorder_configs */
  uint64_t timestamp_ns; /* first source packet's receive time; 0 if none */
} daqiri_gw_reorder_info;

/* Library, errors */
const char *daqiri_gw_version(void);
int32_t daqiri_gw_abi_version(void);
const char *daqiri_gw_last_error(void);
const char *daqiri_gw_status_name(int32_t status);

/* Lifecycle: one engine per process. */
int32_t daqiri_gw_init(const char *yaml_or_path);
int32_t daqiri_gw_init_from_yaml_file(const char *path);
int32_t daqiri_gw_init_from_yaml_string(const char *yaml);
void daqiri_gw_shutdown(void);

/* A config as a tree of YAML keys, addressed by dotted paths of keys and
 * list indices ("interfaces.0.rx.queues.1.cpu_core"); "(derived).*" holds
 * what validation resolved (engine_type, protocol, dir). parse validates as
 * init does; get marks a leaf read, and unread names the first leaf no get
 * read. get answers the text's length (copied as snprintf does), -1 when
 * the path holds no scalar, -2 for a null tree or path; count answers a
 * list's or map's entries, 1 for a scalar, -1 where nothing is. set's kind: 0 text,
 * 1 a decimal integer, 2 "true"/"false". */
typedef struct ConfigTree daqiri_gw_config;
int32_t daqiri_gw_config_parse(const char *yaml_or_path, daqiri_gw_config **out);
int32_t daqiri_gw_config_parse_yaml_string(const char *yaml, daqiri_gw_config **out);
int32_t daqiri_gw_config_parse_yaml_file(const char *path, daqiri_gw_config **out);
daqiri_gw_config *daqiri_gw_config_new(void);
void daqiri_gw_config_free(daqiri_gw_config *config);
int64_t daqiri_gw_config_get(const daqiri_gw_config *config, const char *path, char *out, size_t capacity);
int64_t daqiri_gw_config_count(const daqiri_gw_config *config, const char *path);
int32_t daqiri_gw_config_set(daqiri_gw_config *config, const char *path, const char *value, int32_t kind);
int64_t daqiri_gw_config_unread(const daqiri_gw_config *config, char *out, size_t capacity);
char *daqiri_gw_config_yaml(const daqiri_gw_config *config);
void daqiri_gw_config_free_text(char *text);
int32_t daqiri_gw_init_config(const daqiri_gw_config *config);
/* Records a failure found in the headers ("call: why") as the thread's last; returns status
 * (1 NULL_PTR, 5 INVALID_PARAMETER, 7 NOT_SUPPORTED, else GENERIC_FAILURE). */
int32_t daqiri_gw_fail(int32_t status, const char *message);
/* DAQIRI's EngineType numbering: -1 none, 1 dpdk, 2 socket, 3 rdma, 4 ibverbs, 100 af_xdp. */
int32_t daqiri_gw_engine_type(void);
void daqiri_gw_print_stats(void);

/* Receiving: port and queue -1 mean any. */
int32_t daqiri_gw_get_rx_burst(daqiri_gw_burst **burst, int32_t port, int32_t queue);
int32_t daqiri_gw_get_rx_burst_conn(daqiri_gw_burst **burst, uintptr_t conn_id, bool server);

/* Reading a burst */
int64_t daqiri_gw_get_num_packets(daqiri_gw_burst *burst);
int32_t daqiri_gw_get_q_id(daqiri_gw_burst *burst);
uint64_t daqiri_gw_get_burst_tot_byte(daqiri_gw_burst *burst);
void *daqiri_gw_get_segment_packet_ptr(daqiri_gw_burst *burst, int32_t seg, int32_t idx);
uint32_t daqiri_gw_get_segment_packet_length(daqiri_gw_burst *burst, int32_t seg, int32_t idx);
uint32_t daqiri_gw_get_packet_length(daqiri_gw_burst *burst, int32_t idx);
uint32_t daqiri_gw_get_packet_flow_id(daqiri_gw_burst *burst, int32_t idx);
int32_t daqiri_gw_get_packet_rx_timestamp(daqiri_gw_burst *burst, int32_t idx, uint64_t *timestamp_ns);
int32_t daqiri_gw_get_reorder_burst_info(daqiri_gw_burst *burst, daqiri_gw_reorder_info *info);
/* A GPU reorder plan's kernels on the caller's cudaStream_t (null: the legacy
 * default stream); NOT_SUPPORTED in a build without CUDA. */
int32_t daqiri_gw_set_reorder_cuda_stream(const char *interface_name, const char *reorder_name, void *stream);
uintptr_t daqiri_gw_get_connection_id(daqiri_gw_burst *burst);
int32_t daqiri_gw_synchronize_burst_event(daqiri_gw_burst *burst);
/* Bounds-checked copies into a TX packet's host buffer and out of any
 * packet's host segment (*copied: bytes copied, fewer when the segment ends). */
int32_t daqiri_gw_copy_to_segment_packet(daqiri_gw_burst *burst, int32_t seg, int32_t idx, const void *data,
                                         size_t len, size_t dst_offset);
int32_t daqiri_gw_copy_from_segment_packet(daqiri_gw_burst *burst, int32_t seg, int32_t idx, void *data,
                                           size_t len, size_t src_offset, size_t *copied);

/* Transmitting. send_tx_burst frees the handle whatever it answers. */
daqiri_gw_burst *daqiri_gw_create_tx_burst_params(void);
int32_t daqiri_gw_set_header(daqiri_gw_burst *burst, uint16_t port, uint16_t queue, int32_t num, int32_t segs);
int32_t daqiri_gw_set_num_packets(daqiri_gw_burst *burst, int64_t num);
bool daqiri_gw_is_tx_burst_available(daqiri_gw_burst *burst);
int32_t daqiri_gw_get_tx_packet_burst(daqiri_gw_burst *burst);
int32_t daqiri_gw_set_connection_id(daqiri_gw_burst *burst, uintptr_t conn_id);
int32_t daqiri_gw_send_tx_burst(daqiri_gw_burst *burst);
int32_t daqiri_gw_set_packet_lengths(daqiri_gw_burst *burst, int32_t idx, const int32_t *lens, size_t n);
int32_t daqiri_gw_set_all_packet_lengths(daqiri_gw_burst *burst, const int32_t *lens, size_t n);
int32_t daqiri_gw_set_packet_tx_time(daqiri_gw_burst *burst, int32_t idx, uint64_t time);
int32_t daqiri_gw_set_eth_header(daqiri_gw_burst *burst, int32_t idx, const uint8_t *dst_addr);
int32_t daqiri_gw_set_ipv4_header(daqiri_gw_burst *burst, int32_t idx, int32_t ip_payload_len, uint8_t proto,
                                  uint32_t src_host, uint32_t dst_host);
int32_t daqiri_gw_set_udp_header(daqiri_gw_burst *burst, int32_t idx, int32_t udp_payload_len, uint16_t src_port,
                                 uint16_t dst_port);
int32_t daqiri_gw_set_udp_payload(daqiri_gw_burst *burst, int32_t idx, const void *data, size_t len);

/* Freeing. side: DAQIRI_GW_RX or DAQIRI_GW_TX. */
int32_t daqiri_gw_free_all_packets_and_burst(daqiri_gw_burst *burst, int32_t side);
int32_t daqiri_gw_free_burst(daqiri_gw_burst *burst, int32_t side);
int32_t daqiri_gw_free_packet(daqiri_gw_burst *burst, int32_t idx);
int32_t daqiri_gw_free_packet_segment(daqiri_gw_burst *burst, int32_t seg, int32_t idx);
int32_t daqiri_gw_free_all_segment_packets(daqiri_gw_burst *burst, int32_t seg);
int32_t daqiri_gw_free_segment_packets_and_burst(daqiri_gw_burst *burst, int32_t seg);

/* Dynamic RX flows. A flow is the YAML of one rx.flows entry without its
 * id ({name, action or actions, match}); the library gives the id. Each
 * call queues one completion for daqiri_gw_poll_flow_op. */
typedef struct daqiri_gw_flow_op {
  uint64_t op_id;
  int32_t type;       /* 0 ADD_RX, 1 ADD_RX_BATCH, 2 DELETE */
  int32_t status;     /* a DAQIRI_GW_* status */
  uint32_t flow_id;   /* the flow added or deleted (a batch: its first) */
  uint32_t num_flows; /* flow ids the operation has */
} daqiri_gw_flow_op;

int32_t daqiri_gw_add_rx_flows(int32_t port, const char *const *flows_yaml, size_t n, uint64_t *op_id);
int32_t daqiri_gw_delete_flow(uint32_t flow_id, uint64_t *op_id);
/* NOT_READY when nothing finished; NO_SPACE_AVAILABLE (result filled, the
 * operation kept) when flow_ids has room for fewer than result->num_flows. */
int32_t daqiri_gw_poll_flow_op(daqiri_gw_flow_op *result, uint32_t *flow_ids, size_t capacity);

/* Ports, traffic, socket connections */
int32_t daqiri_gw_get_port_id(const char *key);
int32_t daqiri_gw_get_num_rx_queues(int32_t port);
int32_t daqiri_gw_get_mac_addr(int32_t port, uint8_t *mac);
int32_t daqiri_gw_format_eth_addr(uint8_t *dst, const char *addr);
int32_t daqiri_gw_drop_all_traffic(int32_t port);
int32_t daqiri_gw_allow_all_traffic(int32_t port);
int64_t daqiri_gw_flush_port_queue(int32_t port, int32_t queue);
int32_t daqiri_gw_socket_get_server_conn_id(const char *server_addr, uint16_t server_port, uintptr_t *conn_id);
int32_t daqiri_gw_socket_connect_to_server(const char *server_addr, uint16_t server_port,
                                           const char *client_addr, uintptr_t *conn_id);
int32_t daqiri_gw_socket_get_port_queue(uintptr_t conn_id, uint16_t *port, uint16_t *queue);
/* setsockopt(2) on the connection's sockets, kept for those opened later
 * (a TCP reconnect, a UDP server's peer socket). */
int32_t daqiri_gw_socket_setsockopt(uintptr_t conn_id, int32_t level, int32_t optname, const void *optval,
                                    size_t optlen);

/* RDMA connections of RoCE ports. A request is a TX burst made one by
 * rdma_set_header (op_code: DAQIRI's RDMAOpCode numbers, 1 SEND, 2 RECEIVE);
 * after send_tx_burst answers SUCCESS the library holds it until
 * daqiri_gw_get_rx_burst_conn hands it back as its completion, which the
 * program then frees as a TX burst. A RECEIVE takes no buffer of its own: its
 * completion holds the messages in its RX queue's buffers. */
int32_t daqiri_gw_rdma_get_server_conn_id(const char *server_addr, uint16_t server_port, uintptr_t *conn_id);
int32_t daqiri_gw_rdma_connect_to_server(const char *server_addr, uint16_t server_port, const char *client_addr,
                                         uintptr_t *conn_id);
int32_t daqiri_gw_rdma_get_port_queue(uintptr_t conn_id, uint16_t *port, uint16_t *queue);
int32_t daqiri_gw_rdma_set_header(daqiri_gw_burst *burst, int32_t op_code, uintptr_t conn_id, bool is_server,
                                  int32_t num_pkts, uint64_t wr_id, const char *local_mr_name);
int32_t daqiri_gw_rdma_get_opcode(daqiri_gw_burst *burst);
uint64_t daqiri_gw_rdma_get_wr_id(daqiri_gw_burst *burst);

/* Writers */
int32_t daqiri_gw_write_raw_to_file(daqiri_gw_burst *burst, const char *absolute_path, const char *file_prefix,
                                    size_t packet_data_offset);
int32_t daqiri_gw_write_pcap_to_file(daqiri_gw_burst *burst, const char *absolute_path, const char *file_prefix);

/* Asynchronous writes: the burst goes to a writer thread and comes back once
 * poll or wait sees the write end; meanwhile calls on it answer NOT_READY.
 * Freeing it early is safe: its packets go back when the write ends. */
typedef struct daqiri_gw_file_write daqiri_gw_file_write;
typedef struct daqiri_gw_file_write_status {
  uint32_t completed_packets;
  uint32_t failed_packets;
  uint64_t bytes_written;
} daqiri_gw_file_write_status;
int32_t daqiri_gw_write_raw_to_file_async(daqiri_gw_burst *burst, const char *absolute_path, const char *file_prefix,
                                          size_t packet_data_offset, daqiri_gw_file_write **handle);
int32_t daqiri_gw_write_pcap_to_file_async(daqiri_gw_burst *burst, const char *absolute_path,
                                           const char *file_prefix, daqiri_gw_file_write **handle);
/* SUCCESS once ended well, NOT_READY while running, else the write's error. */
int32_t daqiri_gw_file_write_poll(daqiri_gw_file_write *handle, daqiri_gw_file_write_status *status);
int32_t daqiri_gw_file_write_wait(daqiri_gw_file_write *handle, daqiri_gw_file_write_status *status);
/* Waits if still running; the handle is gone after. */
int32_t daqiri_gw_file_write_destroy(daqiri_gw_file_write *handle);

/* S3: each packet of a burst to an object <object_prefix>_<index>, staged
 * before the submit returns (the burst stays the caller's), uploaded by the
 * writer's threads, at most max_inflight_uploads at a time, max_staged_bytes
 * staged over all of a writer's uploads in flight. Credentials from the
 * environment (AWS_ACCESS_KEY_ID ..., a web-identity token file, instance
 * metadata); endpoint_override may be empty (AWS). */
typedef struct daqiri_gw_s3_writer daqiri_gw_s3_writer;
typedef struct daqiri_gw_s3_write daqiri_gw_s3_write;
typedef struct daqiri_gw_s3_write_status {
  uint32_t completed_objects;
  uint32_t failed_objects;
  uint64_t bytes_uploaded;
} daqiri_gw_s3_write_status;
int32_t daqiri_gw_s3_writer_create(const char *bucket, const char *region, const char *endpoint_override,
                                   bool path_style, uint32_t max_inflight_uploads, uint64_t max_staged_bytes,
                                   daqiri_gw_s3_writer **writer);
int32_t daqiri_gw_write_raw_to_s3_objects_async(daqiri_gw_s3_writer *writer, daqiri_gw_burst *burst,
                                                const char *object_prefix, uint64_t packet_data_offset,
                                                daqiri_gw_s3_write **handle);
/* SUCCESS once every object is uploaded, NOT_READY while some are in flight,
 * else the first failure (the store's reason in daqiri_gw_last_error). */
int32_t daqiri_gw_s3_write_poll(daqiri_gw_s3_write *handle, daqiri_gw_s3_write_status *status);
int32_t daqiri_gw_s3_write_wait(daqiri_gw_s3_write *handle, daqiri_gw_s3_write_status *status);
/* Waits if uploads are in flight; the handle is gone after. */
int32_t daqiri_gw_s3_write_destroy(daqiri_gw_s3_write *handle);
/* Writes already submitted go on. */
int32_t daqiri_gw_s3_writer_destroy(daqiri_gw_s3_writer *writer);

#ifdef __cplusplus
}
#endif

#endif /* DAQIRI_GW_C_API_H */
