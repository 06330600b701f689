/* DPDK's fast-path functions are static inline in its headers, so they have
 * no symbol to link against; the shim gives each one a real function. */
#include <stdint.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

uint16_t daqiri_eth_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t daqiri_eth_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
int daqiri_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned n);
void daqiri_pktmbuf_free(struct rte_mbuf *m);
void daqiri_mempool_put_bulk(struct rte_mempool *pool, void *const *objs, unsigned n);
unsigned daqiri_mempool_avail_count(const struct rte_mempool *pool);
unsigned daqiri_mempool_takeable(struct rte_mempool *pool);
int daqiri_errno(void);
unsigned daqiri_lcore_id(void);
/* The flow id a MARK action gave the packet: 1 and *mark set, or 0 if unmarked. */
int daqiri_mbuf_mark(const struct rte_mbuf *m, uint32_t *mark);
/* RTE_ETH_RSS_NONFRAG_IPV4_UDP, a function-like macro bindgen cannot read. */
uint64_t daqiri_rss_types_ipv4_udp(void);
uint64_t daqiri_rss_types_eth(void);
/* RTE_ETH_RX_OFFLOAD_TIMESTAMP (a macro bindgen cannot evaluate). */
uint64_t daqiri_rx_offload_timestamp(void);
/* RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT. */
uint64_t daqiri_rx_offload_buffer_split(void);
/* Shapes segs[0..n] into one packet: segment i holds lens[i] bytes starting
 * offsets[i] into its buffer; chained in order. Returns the head. */
struct rte_mbuf *daqiri_tx_chain(struct rte_mbuf **segs, const uint16_t *offsets, const uint16_t *lens, unsigned n);
/* Copies a packet (any number of segments) into dst; UINT32_MAX if it does not fit. */
uint32_t daqiri_mbuf_copy_out(struct rte_mbuf *m, uint8_t *dst, uint32_t capacity);
/* The port's MAC address; 0 on success. */
int daqiri_macaddr_get(uint16_t port, uint8_t mac[6]);
