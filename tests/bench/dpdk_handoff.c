// The least a receiver that hands packets to another core can do, written
// plainly against DPDK: the reference the gateway's multi-queue figure is
// read against beside dpdk-testpmd rxonly (docs/benchmarks.md, "Scaling over
// RX queues"). DAQIRI's own receive path has this shape.
//
// Per RX queue k (of N): lcore k polls rte_eth_rx_burst into a burst (an
// array of mbuf pointers from a mempool of bursts) and enqueues it on a
// single-producer, single-consumer rte_ring; lcore N+k dequeues it, reads
// each packet's length (as any application does) and frees the mbufs and
// the burst. testpmd rxonly frees each mbuf on the core that received it;
// this is what crossing to a second core costs, with nothing else added.
//
//   cc -O2 -o dpdk-handoff tests/bench/dpdk_handoff.c $(pkg-config --cflags --libs libdpdk)
//   dpdk-handoff -l 0-2N --no-huge -m 1024 --no-pci --vdev net_null0,size=64 -- QUEUES SECONDS
// Prints the packets per second the consumers took, after a one-second warm-up.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#define BURST 64
#define MAX_QUEUES 8
#define MBUFS_PER_QUEUE 16384
#define BURSTS_PER_QUEUE 1024

struct burst {
    uint16_t count;
    struct rte_mbuf *pkts[BURST];
};

struct lane {
    uint16_t queue;
    struct rte_ring *ring;
    struct rte_mempool *bursts;
    volatile uint64_t consumed;
    volatile uint64_t bytes;
} __rte_cache_aligned;

static struct lane lanes[MAX_QUEUES];
static volatile int running = 1;

static int receive(void *arg) {
    struct lane *lane = arg;
    struct burst *b = NULL;
    while (running) {
        if (b == NULL && rte_mempool_get(lane->bursts, (void **)&b) != 0) {
            b = NULL;
            continue;
        }
        b->count = rte_eth_rx_burst(0, lane->queue, b->pkts, BURST);
        if (b->count == 0)
            continue;
        if (rte_ring_sp_enqueue(lane->ring, b) != 0) {
            rte_pktmbuf_free_bulk(b->pkts, b->count);
            continue;
        }
        b = NULL;
    }
    return 0;
}

static int consume(void *arg) {
    struct lane *lane = arg;
    uint64_t packets = 0, bytes = 0;
    void *got;
    while (running) {
        if (rte_ring_sc_dequeue(lane->ring, &got) != 0)
            continue;
        struct burst *b = got;
        for (uint16_t i = 0; i < b->count; i++)
            bytes += rte_pktmbuf_pkt_len(b->pkts[i]);
        packets += b->count;
        rte_pktmbuf_free_bulk(b->pkts, b->count);
        rte_mempool_put(lane->bursts, b);
        lane->consumed = packets;
        lane->bytes = bytes;
    }
    return 0;
}

static uint64_t total_consumed(unsigned queues) {
    uint64_t sum = 0;
    for (unsigned q = 0; q < queues; q++)
        sum += lanes[q].consumed;
    return sum;
}

int main(int argc, char **argv) {
    int used = rte_eal_init(argc, argv);
    if (used < 0)
        rte_exit(EXIT_FAILURE, "EAL did not start\n");
    argc -= used;
    argv += used;
    if (argc != 3)
        rte_exit(EXIT_FAILURE, "usage: ... -- QUEUES SECONDS\n");
    unsigned queues = (unsigned)atoi(argv[1]);
    unsigned seconds = (unsigned)atoi(argv[2]);
    if (queues == 0 || queues > MAX_QUEUES || rte_lcore_count() < 2 * queues + 1)
        rte_exit(EXIT_FAILURE, "need 1..%d queues and 2 x QUEUES + 1 lcores\n", MAX_QUEUES);

    struct rte_mempool *mbufs = rte_pktmbuf_pool_create("mbufs", MBUFS_PER_QUEUE * queues, 256, 0,
                                                        RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
    if (mbufs == NULL)
        rte_exit(EXIT_FAILURE, "no mbuf pool\n");
    struct rte_eth_conf conf = {0};
    if (rte_eth_dev_configure(0, queues, 1, &conf) != 0 || rte_eth_tx_queue_setup(0, 0, 512, 0, NULL) != 0)
        rte_exit(EXIT_FAILURE, "port 0 did not configure\n");
    for (unsigned q = 0; q < queues; q++) {
        char name[32];
        if (rte_eth_rx_queue_setup(0, q, 1024, rte_socket_id(), NULL, mbufs) != 0)
            rte_exit(EXIT_FAILURE, "RX queue %u did not set up\n", q);
        snprintf(name, sizeof name, "ring%u", q);
        lanes[q].ring = rte_ring_create(name, BURSTS_PER_QUEUE, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
        snprintf(name, sizeof name, "bursts%u", q);
        lanes[q].bursts = rte_mempool_create(name, BURSTS_PER_QUEUE * 2 - 1, sizeof(struct burst), 64, 0, NULL,
                                             NULL, NULL, NULL, rte_socket_id(), 0);
        if (lanes[q].ring == NULL || lanes[q].bursts == NULL)
            rte_exit(EXIT_FAILURE, "no ring or burst pool for queue %u\n", q);
        lanes[q].queue = (uint16_t)q;
    }
    if (rte_eth_dev_start(0) != 0)
        rte_exit(EXIT_FAILURE, "port 0 did not start\n");

    // Workers in lcore order: receivers on the first N, consumers on the next N.
    unsigned k = 0, lcore;
    RTE_LCORE_FOREACH_WORKER(lcore) {
        if (k < queues)
            rte_eal_remote_launch(receive, &lanes[k], lcore);
        else if (k < 2 * queues)
            rte_eal_remote_launch(consume, &lanes[k - queues], lcore);
        k++;
    }
    sleep(1); // the main lcore sleeps: a local run may share its CPU
    uint64_t start = total_consumed(queues), t0 = rte_get_timer_cycles();
    sleep(seconds);
    uint64_t end = total_consumed(queues), t1 = rte_get_timer_cycles();
    running = 0;
    rte_eal_mp_wait_lcore();
    printf("consumed-pps: %.0f\n", (double)(end - start) * rte_get_timer_hz() / (double)(t1 - t0));
    rte_eth_dev_stop(0);
    rte_eal_cleanup();
    return 0;
}
