#include "shim.h"
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

int daqiri_errno(void) { return rte_errno; }

unsigned daqiri_lcore_id(void) { return rte_lcore_id(); }

int daqiri_mbuf_mark(const struct rte_mbuf *m, uint32_t *mark) {
    if (!(m->ol_flags & RTE_MBUF_F_RX_FDIR_ID))
        return 0;
    *mark = m->hash.fdir.hi;
    return 1;
}

uint64_t daqiri_rss_types_ipv4_udp(void) { return RTE_ETH_RSS_NONFRAG_IPV4_UDP; }
