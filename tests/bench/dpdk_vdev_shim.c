// LD_PRELOAD shim that lets DAQIRI 2026.7's DPDK engine open a virtual
// device where its config names a PCI address. Its engine takes only PCI
// addresses (`looks_like_pci_bdf`) and hands EAL each as `-a <BDF>,<mlx5
// devargs>`, so on a host without a NIC it opens nothing. With
// DAQIRI_VDEV="<BDF>=<vdev args>" (say `0000:00:00.0=net_null0,size=64`):
//   rte_eal_init                  `-a <BDF>,...` becomes `--vdev <vdev args>`,
//                                 and `--no-pci` is added (nothing else to probe)
//   rte_eth_dev_get_port_by_name  <BDF> answers the virtual device's port
//   rte_eth_dev_info_get          says the device scatters received frames
//                                 over several buffers (DAQIRI asks that of
//                                 every single-segment queue; frames that fit
//                                 one buffer, as all do here, never need it)
//   rte_eth_dev_configure,        offloads the device does not offer are
//   rte_eth_rx/tx_queue_setup     dropped from the request (that scatter, the
//                                 checksum offloads DAQIRI asks for: ethdev
//                                 refuses what a device lacks)
//   rte_eth_dev_start             each RX queue's first receive finds it
//                                 empty: DAQIRI's RX worker starts by reading a
//                                 queue until it is empty, which a null device
//                                 never is (a NIC just started is)
// Everything else, DAQIRI's engine and DPDK's, runs as released. Built
// against the DPDK DAQIRI links (tests/reference/build.sh dpdk): the
// structures here are that version's.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ethdev.h>

static char bdf[64], vdev[256];

// Reads DAQIRI_VDEV once; false when it is unset or malformed.
static int mapping(void) {
    static int parsed = -1;
    if (parsed >= 0) return parsed;
    const char *env = getenv("DAQIRI_VDEV");
    const char *eq = env ? strchr(env, '=') : NULL;
    parsed = eq && (size_t)(eq - env) < sizeof bdf && strlen(eq + 1) < sizeof vdev;
    if (parsed) {
        memcpy(bdf, env, eq - env);
        bdf[eq - env] = 0;
        strcpy(vdev, eq + 1);
    } else {
        fprintf(stderr, "dpdk_vdev_shim: DAQIRI_VDEV is not <BDF>=<vdev args>; changing nothing\n");
    }
    return parsed;
}

// The virtual device's name: its arguments up to the first comma.
static const char *vdev_name(void) {
    static char name[256];
    size_t n = strcspn(vdev, ",");
    memcpy(name, vdev, n);
    name[n] = 0;
    return name;
}

static void *next(const char *symbol) {
    void *real = dlsym(RTLD_NEXT, symbol);
    if (!real) {
        fprintf(stderr, "dpdk_vdev_shim: no %s after the shim\n", symbol);
        abort();
    }
    return real;
}

// The device's own information, as DPDK gives it (not the shim's).
static int device_info(uint16_t port, struct rte_eth_dev_info *info) {
    int (*real)(uint16_t, struct rte_eth_dev_info *) = next("rte_eth_dev_info_get");
    return real(port, info);
}

static int is_our_device(const char *arg) {
    size_t n = strlen(bdf);
    return strncmp(arg, bdf, n) == 0 && (arg[n] == 0 || arg[n] == ',');
}

int rte_eal_init(int argc, char **argv) {
    int (*real)(int, char **) = next("rte_eal_init");
    if (!mapping()) return real(argc, argv);
    // At most one more argument (`--no-pci`) and the terminating NULL.
    char **args = calloc(argc + 2, sizeof *args);
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "-a") == 0 || strcmp(argv[i], "--allow") == 0) && i + 1 < argc &&
            is_our_device(argv[i + 1])) {
            args[n++] = "--vdev";
            args[n++] = vdev;
            i++;
            continue;
        }
        args[n++] = argv[i];
    }
    args[n++] = "--no-pci";
    fprintf(stderr, "dpdk_vdev_shim: EAL opens %s where DAQIRI named %s\n", vdev, bdf);
    return real(n, args);  // EAL keeps pointers into args: never freed
}

static int real_port_by_name(const char *name, uint16_t *port_id) {
    int (*real)(const char *, uint16_t *) = next("rte_eth_dev_get_port_by_name");
    return real(name, port_id);
}

int rte_eth_dev_get_port_by_name(const char *name, uint16_t *port_id) {
    if (mapping() && strcmp(name, bdf) == 0) return real_port_by_name(vdev_name(), port_id);
    return real_port_by_name(name, port_id);
}

int rte_eth_dev_info_get(uint16_t port, struct rte_eth_dev_info *info) {
    int ret = device_info(port, info);
    if (ret == 0 && mapping()) info->rx_offload_capa |= RTE_ETH_RX_OFFLOAD_SCATTER;
    return ret;
}

// The device's own receive, and the queues it has received on (each polled by one worker).
static eth_rx_burst_t device_receive;
static void *received_once[1024];
static unsigned received_count;

// The device's receive, but for each queue's first call, which finds it empty.
static uint16_t empty_at_first(void *rxq, struct rte_mbuf **packets, uint16_t count) {
    unsigned known = __atomic_load_n(&received_count, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < known && i < sizeof received_once / sizeof *received_once; i++)
        if (received_once[i] == rxq) return device_receive(rxq, packets, count);
    unsigned slot = __atomic_fetch_add(&received_count, 1, __ATOMIC_ACQ_REL);
    if (slot < sizeof received_once / sizeof *received_once) received_once[slot] = rxq;
    return 0;
}

int rte_eth_dev_start(uint16_t port) {
    int (*real)(uint16_t) = next("rte_eth_dev_start");
    int ret = real(port);
    uint16_t ours;
    if (ret == 0 && mapping() && real_port_by_name(vdev_name(), &ours) == 0 && ours == port) {
        // Looked up, not linked: a data reference would fail to load the
        // shim into a process without DPDK (one started under `timeout`).
        struct rte_eth_fp_ops *ops = dlsym(RTLD_DEFAULT, "rte_eth_fp_ops");
        device_receive = ops[port].rx_pkt_burst;
        ops[port].rx_pkt_burst = empty_at_first;
    }
    return ret;
}

int rte_eth_dev_configure(uint16_t port, uint16_t rx_queues, uint16_t tx_queues, const struct rte_eth_conf *conf) {
    int (*real)(uint16_t, uint16_t, uint16_t, const struct rte_eth_conf *) = next("rte_eth_dev_configure");
    struct rte_eth_dev_info info;
    if (!mapping() || conf == NULL || device_info(port, &info) != 0)
        return real(port, rx_queues, tx_queues, conf);
    struct rte_eth_conf offered = *conf;
    offered.rxmode.offloads &= info.rx_offload_capa;
    offered.txmode.offloads &= info.tx_offload_capa;
    offered.rx_adv_conf.rss_conf.rss_hf &= info.flow_type_rss_offloads;
    return real(port, rx_queues, tx_queues, &offered);
}

int rte_eth_rx_queue_setup(uint16_t port, uint16_t queue, uint16_t descriptors, unsigned int socket,
                           const struct rte_eth_rxconf *conf, struct rte_mempool *pool) {
    int (*real)(uint16_t, uint16_t, uint16_t, unsigned int, const struct rte_eth_rxconf *, struct rte_mempool *) =
        next("rte_eth_rx_queue_setup");
    struct rte_eth_dev_info info;
    if (!mapping() || conf == NULL || device_info(port, &info) != 0)
        return real(port, queue, descriptors, socket, conf, pool);
    struct rte_eth_rxconf offered = *conf;
    offered.offloads &= info.rx_offload_capa | info.rx_queue_offload_capa;
    return real(port, queue, descriptors, socket, &offered, pool);
}

int rte_eth_tx_queue_setup(uint16_t port, uint16_t queue, uint16_t descriptors, unsigned int socket,
                           const struct rte_eth_txconf *conf) {
    int (*real)(uint16_t, uint16_t, uint16_t, unsigned int, const struct rte_eth_txconf *) =
        next("rte_eth_tx_queue_setup");
    struct rte_eth_dev_info info;
    if (!mapping() || conf == NULL || device_info(port, &info) != 0)
        return real(port, queue, descriptors, socket, conf);
    struct rte_eth_txconf offered = *conf;
    offered.offloads &= info.tx_offload_capa | info.tx_queue_offload_capa;
    return real(port, queue, descriptors, socket, &offered);
}
