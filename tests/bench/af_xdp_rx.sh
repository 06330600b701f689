#!/usr/bin/env bash
# Loss-free receive rate of the gateway's AF_XDP backend against its socket
# backend and against dpdk-testpmd rxonly on DPDK's net_af_xdp, on the same
# veth pair with the same wire-like sender, in one run.
#
# Wire-like: `daqiri-gateway gen` sends single datagrams (the sender veth's
# tx-udp-segmentation, tx-gso-list and tso are off, so every GSO send is
# split before the veth, as a NIC puts single frames on a wire). The sender
# runs on SENDER_CPUS (one `gen` per CPU list, each its own source port).
# Every receiver's polling thread runs on RECEIVER_CPU, and so does the
# socket engine's kernel receive path (RPS). The XDP receivers' kernel side
# (the XDP program and the copy into the UMEM) runs in the veth's NAPI,
# which the veth schedules on the CPU that sent: the sender's, for both XDP
# receivers alike (this kernel's veth cannot run its NAPI threaded).
#
# Receivers, each searched for its highest loss-free rate:
#   af_xdp    `daqiri-gateway run`, engine af_xdp on veth1: one RX queue on
#             cpu_core RECEIVER_CPU, a flow for the benchmark's UDP port and
#             flow isolation (ARP and the rest reach the kernel); delivered
#             = packets its application loop consumed. The application loop
#             runs on master_core APP_CPU (0), where testpmd's main lcore is.
#   socket    `daqiri-gateway run`, a UDP server socket (poll_mode direct)
#             on veth1's address, GRO off; delivered = packets consumed
#   testpmd   dpdk-testpmd --forward-mode=rxonly on net_af_xdp0,iface=veth1
#             (DPDK's own XDP program and AF_XDP socket), forwarding lcore
#             RECEIVER_CPU, burst 64; delivered = its port's RX-packets
# A step passes when nothing sent was lost and the senders really offered
# 95% of the rate; a receiver's rate is what its best lossless step really
# delivered per second, marked sender-bound when its senders fell short
# there (on veth the XDP receivers' kernel work runs on a sending CPU, so
# they slow their own senders). The sender's neighbour entry is static: an
# XDP receiver without isolation takes the ARP requests too.
#
# Usage (root): tests/bench/af_xdp_rx.sh
#   STEP_SECONDS (4), STEPS (8), MAX_RATE (the search's top; default what the senders reach), SIZES ("64 1472": UDP payload bytes),
#   RECEIVERS ("af_xdp socket testpmd"), SENDER_CPUS ("0": space-separated
#   taskset lists, one `gen` each), RECEIVER_CPU (1), APP_CPU (0); GW runs a
#   prebuilt gateway built with --features af_xdp, TESTPMD another testpmd,
#   TESTPMD_EAL adds EAL arguments (`-d <pmd.so>` where DPDK's plugins are elsewhere),
#   BUSY_POLL_US gives the AF_XDP engine's queue busy_poll_us.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh

STEP_SECONDS=${STEP_SECONDS:-4}
STEPS=${STEPS:-8}
SIZES=${SIZES:-"64 1472"}
RECEIVERS=${RECEIVERS:-"af_xdp socket testpmd"}
SENDER_CPUS=${SENDER_CPUS:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
APP_CPU=${APP_CPU:-0}
TESTPMD=${TESTPMD:-dpdk-testpmd}
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces, XDP)" >&2; exit 1; }
command -v ethtool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ethtool >&2
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway --features af_xdp
    GW=$PWD/target/release/daqiri-gateway
fi
TX=dqxdp_tx RX=dqxdp_rx RX_IP=10.213.3.2 PORT=5000
cleanup() {
    for ns in $RX $TX; do
        ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del $ns 2>/dev/null || true
    done
}
trap 'cleanup; rm -rf "$WORK"' EXIT
cleanup
WORK=$(mktemp -d)

ip netns add $TX; ip netns add $RX
ip link add veth0 netns $TX type veth peer name veth1 netns $RX
ip -n $TX addr add 10.213.3.1/24 dev veth0; ip -n $RX addr add $RX_IP/24 dev veth1
for ns in $TX $RX; do ip -n $ns link set lo up; done
for end in "$TX veth0" "$RX veth1"; do
    set -- $end
    ip netns exec "$1" sysctl -q -w "net.ipv6.conf.$2.disable_ipv6=1"
    ip -n "$1" link set "$2" up
done
ip netns exec $TX ethtool -K veth0 tx-udp-segmentation off tx-gso-list off tso off >/dev/null
ip netns exec $RX ethtool -K veth1 gro off >/dev/null
ip netns exec $RX sh -c "printf %x $((1 << RECEIVER_CPU)) > /sys/class/net/veth1/queues/rx-0/rps_cpus"
rx_mac=$(ip netns exec $RX cat /sys/class/net/veth1/address)
ip -n $TX neigh replace $RX_IP lladdr "$rx_mac" dev veth0 nud permanent
RECEIVER="ip netns exec $RX taskset -c $RECEIVER_CPU"

cat >"$WORK/af_xdp.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: raw
    engine: af_xdp
    master_core: $APP_CPU
    memory_regions:
    - { name: rx, kind: host, num_bufs: 16384, buf_size: 2048 }
    interfaces:
    - name: xdp_rx
      address: veth1
      rx:
        flow_isolation: true
        queues:
        - { name: q0, id: 0, cpu_core: $RECEIVER_CPU, batch_size: 64, timeout_us: 1000, ${BUSY_POLL_US:+busy_poll_us: $BUSY_POLL_US, }memory_regions: [rx] }
        flows:
        - { name: bench, id: 1, action: { type: queue, id: 0 }, match: { udp_dst: $PORT } }
YAML
socket_receiver_config "$WORK/socket.yaml" $RX_IP $PORT

# One `gen` per sender CPU, splitting the rate; prints datagrams sent.
gen() { # rate payload seconds
    local cpus=($SENDER_CPUS) i=0 pids=()
    for cpu in "${cpus[@]}"; do
        ip netns exec $TX taskset -c "$cpu" "$GW" gen --dest $RX_IP:$PORT --rate $(($1 / ${#cpus[@]})) \
            --payload-size "$2" --duration "$3" --batch 64 --src-port $((40000 + i)) \
            --summary-json "$WORK/gen$i.json" >/dev/null 2>&1 &
        pids+=($!) i=$((i + 1))
    done
    wait "${pids[@]}"
    python3 -c "import json,sys; print(sum(json.load(open(f))['sent'] for f in sys.argv[1:]))" "$WORK"/gen*.json
    rm -f "$WORK"/gen*.json
}

consumed() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['consumed']['packets'])" "$1"; }

# Each step prints "sent delivered".
step_gateway() { # config rate payload ready-check
    $RECEIVER "$GW" run --config "$WORK/$1.yaml" --no-admin --exit-when-idle 1 \
        --summary-json "$WORK/gw.json" >/dev/null 2>"$WORK/gw.log" &
    local pid=$!
    for _ in $(seq 200); do eval "$4" && break; sleep 0.05; done
    local sent; sent=$(gen "$2" "$3" "$STEP_SECONDS")
    wait $pid || { tail -3 "$WORK/gw.log" >&2; }
    echo "$sent" "$(consumed "$WORK/gw.json")"
}
step_af_xdp() { RECEIVER="ip netns exec $RX taskset -c $RECEIVER_CPU,$APP_CPU" step_gateway af_xdp "$1" "$2" "ip -n $RX link show veth1 | grep -q prog/xdp"; }
step_socket() { step_gateway socket "$1" "$2" "ip netns exec $RX ss -Hlun | grep -q ':$PORT '"; }

step_testpmd() { # rate payload
    ip netns exec $RX taskset -c $RECEIVER_CPU,$APP_CPU "$TESTPMD" -l $APP_CPU,$RECEIVER_CPU --main-lcore $APP_CPU --no-huge -m 512 --no-pci --no-shconf \
        --log-level=lib.eal:error ${TESTPMD_EAL:-} --vdev net_af_xdp0,iface=veth1 -- --forward-mode=rxonly --burst=64 \
        --nb-cores=1 --rxq=1 --txq=1 --total-num-mbufs=16384 --mbuf-size=2176 --stats-period=1 \
        </dev/null >"$WORK/testpmd.log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do grep -q 'Rx-pps' "$WORK/testpmd.log" && break; sleep 0.05; done
    local sent; sent=$(gen "$1" "$2" "$STEP_SECONDS")
    sleep 0.5
    kill -INT $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    local got; got=$(grep -o 'RX-packets: *[0-9]*' "$WORK/testpmd.log" | tail -1 | awk '{print $2}')
    [[ -n $got ]] || { echo "  testpmd failed:" >&2; tail -5 "$WORK/testpmd.log" >&2; }
    echo "$sent" "${got:-0}"
}

# Highest rate delivered with zero loss, over STEPS bisections of 0..max:
# the datagrams a lossless step really sent per second (a step whose
# senders fell short of the target but lost nothing counts with what they
# sent, and the search goes no higher). Prints the rate and, when that step
# was sender-bound, "sender-bound".
search() { # receiver payload max_rate
    local lo=0 hi=$3 best=0 bound=""
    for _ in $(seq "$STEPS"); do
        local mid=$(((lo + hi) / 2))
        read -r sent got < <("step_$1" "$mid" "$2")
        local offered=$((mid * STEP_SECONDS * 95 / 100)) achieved=$((sent / STEP_SECONDS)) verdict=pass
        if ((got < sent)); then verdict="fail (lost $((sent - got)))"
        elif ((sent < offered)); then verdict="sender short, nothing lost"; fi
        echo "  $1 payload=$2 rate=$mid: sent $sent delivered $got: $verdict" >&2
        if ((got >= sent && achieved > best)); then
            best=$achieved
            bound=$([[ $verdict == pass ]] || echo sender-bound)
        fi
        if [[ $verdict == pass ]]; then lo=$mid; else hi=$mid; fi
    done
    echo "$best $bound"
}

# What the senders reach unpaced into a kernel socket that reads nothing.
sender_max() { # payload
    ip netns exec $RX python3 -c "import socket,time;s=socket.socket(2,2);s.bind(('$RX_IP',$PORT));time.sleep(4)" &
    local sink=$!
    sleep 0.5
    echo $(($(gen 0 "$1" 2) / 2))
    wait $sink 2>/dev/null || true
}
shown() { if [[ -n ${2:-} ]]; then echo "$1 ($2)"; else echo "$1"; fi; }
ratio() { python3 -c "print(f'{$1/$2:.2f}x' if $2 else 'n/a')"; }

echo "| UDP payload | senders' max (pps) | AF_XDP engine (pps) | socket engine (pps) | testpmd net_af_xdp (pps) | AF_XDP / socket | AF_XDP / testpmd |"
echo "|---|---|---|---|---|---|---|"
for size in $SIZES; do
    max=${MAX_RATE:-$(sender_max "$size")}
    declare -A rate=() note=()
    for receiver in $RECEIVERS; do
        read -r rate[$receiver] note[$receiver] < <(search "$receiver" "$size" "$max")
    done
    echo "| $size B | $max | $(shown "${rate[af_xdp]:-0}" "${note[af_xdp]:-}") | $(shown "${rate[socket]:-0}" "${note[socket]:-}") |" \
        "$(shown "${rate[testpmd]:-0}" "${note[testpmd]:-}") | $(ratio "${rate[af_xdp]:-0}" "${rate[socket]:-0}") |" \
        "$(ratio "${rate[af_xdp]:-0}" "${rate[testpmd]:-0}") |"
done
