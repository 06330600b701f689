#!/usr/bin/env bash
# Receive rate of the gateway's DPDK backend against dpdk-testpmd in
# rxonly mode, on the same virtual device, cores and burst size, in one run.
#
# Devices (DEVICES, default "net_null af_packet"):
#   net_null    hands out a frame of SIZE bytes on every slot of every
#               rte_eth_rx_burst, as fast as it is polled: the receiver
#               itself (engine overhead alone), with no wire and no sender.
#   af_packet   net_af_packet on one end of a veth pair between two network
#               namespaces (root), fed by `daqiri-gateway gen` at full speed
#               with the sender veth's UDP segmentation off, so single
#               frames cross it as on a wire. The sender runs on CPU 0, the
#               veth's receive softirq (RPS) and the PMD's poller on CPU 1.
#               Both receivers see the same offered load; the kernel's veth
#               and packet-socket path bounds them both.
#   af_xdp      the same, with net_af_xdp (the kernel's XDP path). Its UMEM
#               is made of its RX pool's mbufs, so the gateway lands in a
#               staging pool and copies each packet into its region.
#   testpmd   --forward-mode=rxonly, forwarding lcore 1, main lcore 0,
#             burst 64; rate = the mean of its per-second Rx-pps lines
#             after the first two
#   gateway   `daqiri-gateway run`, RX queue on cpu_core 1, master_core 0,
#             64 mbufs per rte_eth_rx_burst, batch_size 64; rate = packets
#             its application loop consumed / elapsed. The application loop
#             runs on master_core (CPU 0, where testpmd's main lcore idles).
#
# Usage: tests/bench/dpdk_rx.sh   (SECONDS_EACH=10, SIZES="64 1500" (frame
#   bytes), DEVICES; GW runs a prebuilt gateway built with --features dpdk)
set -euo pipefail
cd "$(dirname "$0")/../.."

SECONDS_EACH=${SECONDS_EACH:-10}
SIZES=${SIZES:-"64 1500"}
DEVICES=${DEVICES:-"net_null af_packet af_xdp"}
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway --features dpdk
    GW=$PWD/target/release/daqiri-gateway
fi
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd is missing: tests/setup.sh installs dpdk" >&2; exit 1; }
WORK=$(mktemp -d)
TX=dqdpdk_tx RX=dqdpdk_rx
cleanup() {
    for ns in $TX $RX; do
        ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del $ns 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# A veth pair between two namespaces; the receiving end keeps an address so
# the sender resolves it, and its softirq runs on CPU 1.
veth_up() {
    [[ $(id -u) -eq 0 ]] || { echo "af_packet needs root (network namespaces)" >&2; exit 1; }
    command -v ethtool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ethtool >&2
    ip netns add $TX; ip netns add $RX
    ip link add veth0 netns $TX type veth peer name veth1 netns $RX
    ip -n $TX addr add 10.213.1.1/24 dev veth0; ip -n $RX addr add 10.213.1.2/24 dev veth1
    ip -n $TX link set veth0 up; ip -n $RX link set veth1 up
    ip -n $TX link set lo up; ip -n $RX link set lo up
    ip netns exec $TX ethtool -K veth0 tx-udp-segmentation off tx-gso-list off tso off >/dev/null
    ip netns exec $RX sh -c "printf %x $((1 << ${RPS_CPU:-1})) > /sys/class/net/veth1/queues/rx-0/rps_cpus"
}

# The device's DPDK address and what runs beside it while a receiver measures.
vdev() { # device size
    case $1 in
        net_null) echo "net_null0,size=$2" ;;
        af_packet) echo "net_af_packet0,iface=veth1,framecnt=8192" ;;
        af_xdp) echo "net_af_xdp0,iface=veth1" ;;
    esac
}
# testpmd's mbuf size and the gateway's buf_size: a whole 4 KiB frame slot
# for af_packet, which wants one; DPDK's default elsewhere (af_xdp makes its
# UMEM of the mbufs, whose frames must fit a page).
mbuf_size() { # device
    [[ $1 == af_packet ]] && echo 4096 || echo 2176
}
buf_size() { # device
    [[ $1 == af_packet ]] && echo 4096 || echo 2048
}
in_device_ns() { # device -> command prefix
    [[ $1 == af_* ]] && echo "ip netns exec $RX" || true
}
start_sender() { # device size
    [[ $1 == af_* ]] || return 0
    ip netns exec $TX taskset -c 0 "$GW" gen --dest 10.213.1.2:5000 --rate 0 --payload-size $(($2 - 42)) \
        --duration $((SECONDS_EACH + 6)) --batch 64 >/dev/null 2>&1 &
    sleep 1
}
stop_sender() {
    ip netns pids $TX 2>/dev/null | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
}

testpmd_rate() { # device size
    start_sender "$1" "$2"
    timeout -s INT $((SECONDS_EACH + 3)) $(in_device_ns "$1") dpdk-testpmd -l 0,1 --main-lcore 0 --no-huge -m 512 \
        --no-pci --no-shconf --log-level=lib.eal:error --vdev "$(vdev "$1" "$2")" -- \
        --forward-mode=rxonly --burst=64 --nb-cores=1 --rxq=1 --txq=1 --total-num-mbufs=16384 --mbuf-size=$(mbuf_size "$1") \
        --stats-period=1 </dev/null >"$WORK/testpmd.log" 2>&1 || true
    stop_sender
    grep -o 'Rx-pps: *[0-9]*' "$WORK/testpmd.log" | awk '{print $2}' | tail -n +3 \
        | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print 0}'
}

gateway_rate() { # device size
    cat >"$WORK/gateway.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    memory_regions:
    - { name: rx_mem, kind: host, num_bufs: 16384, buf_size: $(buf_size "$1") }
    interfaces:
    - name: bench_port
      address: $(vdev "$1" "$2")
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 64, timeout_us: 1000, memory_regions: [rx_mem] }
YAML
    start_sender "$1" "$2"
    $(in_device_ns "$1") "$GW" run --config "$WORK/gateway.yaml" --duration "$SECONDS_EACH" \
        --summary-json "$WORK/summary.json" >"$WORK/gateway.log" 2>&1 || { tail -5 "$WORK/gateway.log" >&2; }
    stop_sender
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(round(s["consumed"]["packets"] / s["elapsed_s"]))' \
        "$WORK/summary.json"
}

[[ " $DEVICES " == *" af_"* ]] && veth_up
echo "| device | frame | dpdk-testpmd rxonly (pps) | gateway (pps) | gateway / testpmd |"
echo "|---|---|---|---|---|"
for device in $DEVICES; do
    for size in $SIZES; do
        reference=$(testpmd_rate "$device" "$size")
        ours=$(gateway_rate "$device" "$size")
        ratio=$(python3 -c "print(f'{$ours / $reference:.2f}' if $reference else 'n/a')")
        echo "| $device | $size B | $reference | $ours | $ratio |"
    done
done
