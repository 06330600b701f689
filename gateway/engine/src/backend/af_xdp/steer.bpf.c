// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0-only
//
// The AF_XDP engine's steering program: matches each frame against the
// interface's RX flows (Ethernet addresses, UDP source and destination port
// ranges, IPv4 total length; first match wins), picks the flow's queue (a
// Toeplitz hash of the 5-tuple over an `ids` list, as NIC RSS, or of the
// MACs for a flow of addresses alone), writes flow id and queue in the
// frame's XDP metadata, and redirects it to the AF_XDP socket of the NIC
// queue it arrived on. Unmatched frames go to the kernel under flow
// isolation and to the first queue otherwise.
//
// The kernel delivers a frame only to a socket bound to the queue it
// arrived on, so the queue is a note for the engine, which moves the frame
// there; the rules live in two rule sets, and a flow reload fills the idle
// one and then flips `active`, so no frame meets a half-written table.
//
// Built by gateway/engine/build.rs (clang -target bpf); the layouts below
// are mirrored by backend/af_xdp/program.rs.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_RULES 256
#define MAX_RSS_QUEUES 32
#define MAX_SOCKETS 256
#define NO_FLOW 0xffffffffu

// rule.mac_fields
#define MATCH_DST_MAC 1
#define MATCH_SRC_MAC 2
// rule.ip_fields
#define MATCH_SRC_IP 1
#define MATCH_DST_IP 2
// rule_set.spreads: which hashes a rule over several queues needs
#define SPREADS_BY_TUPLE 1
#define SPREADS_BY_MAC 2

struct rule {
    __u16 src_first, src_last;
    __u16 dst_first, dst_last;
    __u16 ipv4_len; // 0: any
    __u16 queue_count;
    __u32 flow_id;
    __u16 queues[MAX_RSS_QUEUES];
    __u8 dst_mac[6];
    __u8 src_mac[6];
    __u8 mac_fields;
    __u8 udp_needed; // 0: the addresses alone decide, for frames of any kind
    __u8 ip_fields;
    __u8 pad;
    __u32 saddr, daddr; // as on the wire
};

struct rule_set {
    __u32 count;
    __u32 isolation;
    __u32 tag;
    __u32 spreads;
    struct rule rules[MAX_RULES];
};

// What the program writes in front of a frame it redirects.
struct steer_meta {
    __u32 tag; // the rule set's tag: stale bytes never carry it
    __u32 flow_id;
    __u32 queue;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, struct rule_set);
} rule_sets SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} active SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, MAX_SOCKETS);
    __type(key, __u32);
    __type(value, __u32);
} sockets SEC(".maps");

// Frames the program passed to the kernel, per CPU: 0 unmatched (isolation),
// 1 for want of a socket on their NIC queue. Redirected frames are counted
// by the engine, at no cost here.
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, __u64);
} outcomes SEC(".maps");

// The RSS key of flow.rs (Microsoft's verification key), so a flow spreads
// here as it does in software steering.
static const __u8 rss_key[40] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

struct flow_key {
    __u32 saddr, daddr, ports; // as on the wire: source, destination, source and destination port
    __u16 src_port, dst_port, ipv4_len;
    __u32 macs[3]; // as on the wire: destination, then source
};

static __always_inline void count(__u32 outcome)
{
    __u64 *n = bpf_map_lookup_elem(&outcomes, &outcome);
    if (n)
        *n += 1;
}

// A global (not inlined) function: the verifier checks it once, on its
// own, instead of following the hash's bits through every path of the
// program that calls it.
__attribute__((noinline)) __u32 toeplitz(__u32 saddr, __u32 daddr, __u32 ports)
{
    __u32 input[3] = { bpf_ntohl(saddr), bpf_ntohl(daddr), bpf_ntohl(ports) };
    __u32 hash = 0;
    __u32 window = (__u32)rss_key[0] << 24 | (__u32)rss_key[1] << 16 | (__u32)rss_key[2] << 8 | rss_key[3];
    for (__u32 n = 0; n < 96; n++) {
        if (input[n / 32] >> (31 - n % 32) & 1)
            hash ^= window;
        __u32 next = n + 32; // the key bit that enters the window
        // At most bit 127: the mask only shows the verifier the bound.
        window = window << 1 | ((rss_key[(next / 8) & 31] >> (7 - next % 8)) & 1);
    }
    return hash;
}

// Reads the addresses of an Ethernet frame: -1 for a runt.
static __always_inline int parse_macs(void *data, void *end, struct flow_key *key)
{
    if (data + sizeof(struct ethhdr) > end)
        return -1;
    __builtin_memcpy(key->macs, data, 12);
    return 0;
}

// Reads the key of an Ethernet (one VLAN tag allowed) / IPv4 / UDP frame.
static __always_inline int parse(void *data, void *end, struct flow_key *key)
{
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return -1;
    __u16 proto = eth->h_proto;
    void *l3 = eth + 1;
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
        if (l3 + 4 > end)
            return -1;
        proto = *(__u16 *)(l3 + 2);
        l3 += 4;
    }
    if (proto != bpf_htons(ETH_P_IP))
        return -1;
    struct iphdr *ip = l3;
    if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
        return -1;
    struct udphdr *udp = l3 + ip->ihl * 4;
    if ((void *)(udp + 1) > end)
        return -1;
    key->saddr = ip->saddr;
    key->daddr = ip->daddr;
    __builtin_memcpy(&key->ports, &udp->source, 4);
    key->src_port = bpf_ntohs(udp->source);
    key->dst_port = bpf_ntohs(udp->dest);
    key->ipv4_len = bpf_ntohs(ip->tot_len);
    return 0;
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
    int same = 1;
#pragma unroll
    for (int i = 0; i < 6; i++)
        same &= a[i] == b[i];
    return same;
}

static __always_inline int matches(const struct rule *r, const struct flow_key *key, int is_udp)
{
    const __u8 *macs = (const __u8 *)key->macs;
    if ((r->mac_fields & MATCH_DST_MAC) && !same_mac(r->dst_mac, macs))
        return 0;
    if ((r->mac_fields & MATCH_SRC_MAC) && !same_mac(r->src_mac, macs + 6))
        return 0;
    if (!r->udp_needed)
        return 1;
    return is_udp && key->src_port >= r->src_first && key->src_port <= r->src_last && key->dst_port >= r->dst_first
        && key->dst_port <= r->dst_last && (r->ipv4_len == 0 || r->ipv4_len == key->ipv4_len)
        && (!(r->ip_fields & MATCH_SRC_IP) || r->saddr == key->saddr)
        && (!(r->ip_fields & MATCH_DST_IP) || r->daddr == key->daddr);
}

SEC("xdp")
int daqiri_steer(struct xdp_md *ctx)
{
    __u32 zero = 0;
    __u32 *set_index = bpf_map_lookup_elem(&active, &zero);
    if (!set_index)
        return XDP_PASS;
    __u32 which = *set_index & 1;
    struct rule_set *set = bpf_map_lookup_elem(&rule_sets, &which);
    if (!set)
        return XDP_PASS;

    struct flow_key key = {};
    __u32 flow_id = NO_FLOW;
    __u32 queue = 0;
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    int framed = parse_macs(data, end, &key) == 0;
    int is_udp = framed && parse(data, end, &key) == 0;
    int matched = 0;
    if (framed) {
        // Hashed before the scan, once, and only when a rule spreads so.
        __u32 by_tuple = is_udp && (set->spreads & SPREADS_BY_TUPLE) ? toeplitz(key.saddr, key.daddr, key.ports) : 0;
        __u32 by_mac = set->spreads & SPREADS_BY_MAC ? toeplitz(key.macs[0], key.macs[1], key.macs[2]) : 0;
        for (__u32 i = 0; i < MAX_RULES; i++) {
            if (i >= set->count)
                break;
            struct rule *r = &set->rules[i];
            if (!matches(r, &key, is_udp))
                continue;
            flow_id = r->flow_id;
            __u32 n = r->queue_count;
            __u32 hash = r->udp_needed ? by_tuple : by_mac;
            __u32 pick = n > 1 ? hash % n : 0;
            if (pick < MAX_RSS_QUEUES)
                queue = r->queues[pick];
            matched = 1;
            break;
        }
    }
    if (!matched && set->isolation) {
        count(0);
        return XDP_PASS;
    }

    // Metadata is optional: a driver without room for it (generic XDP)
    // leaves the engine to steer the frame in software.
    if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct steer_meta)) == 0) {
        struct steer_meta *meta = (void *)(long)ctx->data_meta;
        if ((void *)(meta + 1) <= (void *)(long)ctx->data) {
            meta->tag = set->tag;
            meta->flow_id = flow_id;
            meta->queue = queue;
        }
    }
    long action = bpf_redirect_map(&sockets, ctx->rx_queue_index, XDP_PASS);
    if (action != XDP_REDIRECT)
        count(1);
    return action;
}

// The kernel takes the GPL-2.0 side of this file's dual licence.
char LICENSE[] SEC("license") = "GPL";
