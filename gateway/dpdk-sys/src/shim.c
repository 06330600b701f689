#include "shim.h"
#include <string.h>
#include <rte_memcpy.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

uint16_t daqiri_eth_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n) {
    return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t daqiri_eth_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n) {
    return rte_eth_tx_burst(port, queue, pkts, n);
}

int daqiri_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned n) {
    return rte_pktmbuf_alloc_bulk(pool, mbufs, n);
}

void daqiri_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

void daqiri_mempool_put_bulk(struct rte_mempool *pool, void *const *objs, unsigned n) {
    rte_mempool_put_bulk(pool, objs, n);
}

unsigned daqiri_mempool_avail_count(const struct rte_mempool *pool) { return rte_mempool_avail_count(pool); }

/* What the calling thread can get: rte_mempool_avail_count less what the
 * other lcores' caches hold (the common pool's own count is not exported). */
unsigned daqiri_mempool_takeable(struct rte_mempool *pool) {
    unsigned n = rte_mempool_avail_count(pool);
    if (pool->cache_size == 0)
        return n;
    unsigned self = rte_lcore_id();
    for (unsigned lcore = 0; lcore < RTE_MAX_LCORE; lcore++) {
        unsigned held = pool->local_cache[lcore].len;
        if (lcore != self)
            n = held > n ? 0 : n - held;
    }
    return n;
}

int daqiri_errno(void) { return rte_errno; }

unsigned daqiri_lcore_id(void) { return rte_lcore_id(); }

int daqiri_mbuf_mark(const struct rte_mbuf *m, uint32_t *mark) {
    if (!(m->ol_flags & RTE_MBUF_F_RX_FDIR_ID))
        return 0;
    *mark = m->hash.fdir.hi;
    return 1;
}

uint64_t daqiri_rss_types_ipv4_udp(void) { return RTE_ETH_RSS_NONFRAG_IPV4_UDP; }

uint64_t daqiri_rss_types_eth(void) { return RTE_ETH_RSS_ETH; }

uint64_t daqiri_rx_offload_timestamp(void) { return RTE_ETH_RX_OFFLOAD_TIMESTAMP; }

uint64_t daqiri_rx_offload_buffer_split(void) { return RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT; }

struct rte_mbuf *daqiri_tx_chain(struct rte_mbuf **segs, const uint16_t *offsets, const uint16_t *lens, unsigned n) {
    uint32_t total = 0;
    for (unsigned i = 0; i < n; i++) {
        segs[i]->data_off = offsets[i];
        segs[i]->data_len = lens[i];
        segs[i]->next = i + 1 < n ? segs[i + 1] : NULL;
        segs[i]->nb_segs = 1;
        total += lens[i];
    }
    segs[0]->pkt_len = total;
    segs[0]->nb_segs = (uint16_t)n;
    segs[0]->ol_flags = 0;
    return segs[0];
}

uint32_t daqiri_mbuf_copy_out(struct rte_mbuf *m, uint8_t *dst, uint32_t capacity) {
    uint32_t len = rte_pktmbuf_pkt_len(m);
    if (len > capacity)
        return UINT32_MAX;
    const void *bytes = rte_pktmbuf_read(m, 0, len, dst);
    if (bytes != dst && bytes != NULL)
        rte_memcpy(dst, bytes, len);
    return len;
}

int daqiri_macaddr_get(uint16_t port, uint8_t mac[6]) {
    struct rte_ether_addr addr;
    int rc = rte_eth_macaddr_get(port, &addr);
    if (rc == 0)
        memcpy(mac, addr.addr_bytes, 6);
    return rc;
}
