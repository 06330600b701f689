#!/usr/bin/env bash
# Loss-free UDP receive rate of the gateway's socket backend against two
# plain receivers, on wire-like traffic, between two network namespaces.
#
# Wire-like: the sender veth's tx-udp-segmentation and tx-gso-list are off,
# so every GSO send is split into single datagrams before the veth, as a
# NIC puts single frames on a wire (MTU 1500). The sender and its veth
# transmit run on CPU 0; receive processing (RPS) and every receiver on
# CPU 1, so the receiving CPU decides.
#
# Receivers, each searched for its highest loss-free rate:
#   gateway   `daqiri-gateway run`, fed by `daqiri-gateway gen`; delivered
#             = packets its application loop consumed
#   recvmmsg  tests/bench/recvmmsg_loop.c (batch 64, blocking, no GRO), fed
#             by the same `gen`; delivered = datagrams it read
#   sockperf  `sockperf server`, fed by sockperf's own throughput client
#             (it answers only its own message format); delivered = the
#             namespace's Udp InDatagrams (datagrams read by the application)
# Each runs once with the receiving veth's GRO off and once with it on
# (`ethtool -K veth1 gro on` gives the veth NAPI, so the kernel coalesces
# for sockets that ask for UDP GRO, as a NIC's GRO does).
#
# A step passes when nothing sent was lost and the sender really offered
# 95% of the rate. Sent = what `gen` reports it sent, or for sockperf the
# sender namespace's Udp OutDatagrams (one per sendto).
#
# Usage (root): tests/bench/socket_udp.sh [--quick]
#   STEP_SECONDS (5), STEPS (8), SIZES ("64 1472"), GRO_MODES ("off on"),
#   RECEIVERS ("gateway recvmmsg sockperf"), SENDER_CPUS ("0"), RECEIVER_CPU (1);
#   GW and LOOP_BIN run prebuilt binaries (a machine without cargo or gcc).
# A separate, labelled table with GSO super-packets passing the veth intact
# (what the earlier version of this script measured): PASSTHROUGH=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh

STEP_SECONDS=${STEP_SECONDS:-5}
STEPS=${STEPS:-8}
SIZES=${SIZES:-"64 1472"}
GRO_MODES=${GRO_MODES:-"off on"}
RECEIVERS=${RECEIVERS:-"gateway recvmmsg sockperf"}
if [[ ${1:-} == --quick ]]; then STEP_SECONDS=2 STEPS=5; fi

[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
for tool in sockperf ethtool; do
    command -v $tool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $tool >&2
done
SENDER_CPUS=${SENDER_CPUS:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway
    GW=$PWD/target/release/daqiri-gateway
fi
TX=dqbench_tx RX=dqbench_rx RX_IP=10.213.0.2 PORT=5000
WORK=$(mktemp -d)

old_rmem_max=$(sysctl -n net.core.rmem_max) old_rmem_default=$(sysctl -n net.core.rmem_default)
old_backlog=$(sysctl -n net.core.netdev_max_backlog)
cleanup() {
    ip netns pids $RX 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids $TX 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $TX 2>/dev/null || true
    ip netns del $RX 2>/dev/null || true
    sysctl -q -w net.core.rmem_max="$old_rmem_max" net.core.rmem_default="$old_rmem_default" \
        net.core.netdev_max_backlog="$old_backlog"
    rm -rf "$WORK"
}
trap cleanup EXIT
cleanup 2>/dev/null || true
WORK=$(mktemp -d)
LOOP_BIN=${LOOP_BIN:-$WORK/recvmmsg_loop}
[[ -x $LOOP_BIN ]] || gcc -O2 -o "$LOOP_BIN" tests/bench/recvmmsg_loop.c
# Every receiver gets the same 64 MiB socket buffer, and the RPS backlog is
# deep enough not to drop before any socket.
sysctl -q -w net.core.rmem_max=67108864 net.core.rmem_default=67108864 net.core.netdev_max_backlog=65536
veth_bed $TX $RX 10.213.0.1 $RX_IP "$RECEIVER_CPU"
if [[ -n ${PASSTHROUGH:-} ]]; then
    ip netns exec $TX ethtool -K veth0 tx-udp-segmentation on tx-gso-list on tso on >/dev/null
fi
SENDER="ip netns exec $TX taskset -c $SENDER_CPUS"
RECEIVER="ip netns exec $RX taskset -c $RECEIVER_CPU"

socket_receiver_config "$WORK/gateway.yaml" $RX_IP $PORT

snmp() { # namespace column -> Udp counter
    ip netns exec "$1" awk -v col="$2" '/^Udp:/ && $2 ~ /^[0-9]/ {print $col}' /proc/net/snmp
}
out_datagrams() { snmp $TX 5; }
in_datagrams() { snmp $RX 2; }

wait_bound() { wait_udp_bound $RX $PORT; }

gen() { # rate size seconds -> datagrams sent
    $SENDER "$GW" gen --dest $RX_IP:$PORT --rate "$1" --payload-size "$2" --duration "$3" --batch 64 \
        --summary-json "$WORK/gen.json" >/dev/null 2>&1
    python3 -c "import json;print(json.load(open('$WORK/gen.json'))['sent'])"
}

# Each step prints "sent delivered".
step_gateway() {
    $RECEIVER "$GW" run --config "$WORK/gateway.yaml" --no-admin --exit-when-idle 1 \
        --summary-json "$WORK/gw.json" >/dev/null 2>"$WORK/gw.log" &
    local pid=$!
    wait_bound
    local sent; sent=$(gen "$1" "$2" "$STEP_SECONDS")
    wait $pid
    echo "$sent" "$(python3 -c "import json;print(json.load(open('$WORK/gw.json'))['consumed']['packets'])")"
}

step_recvmmsg() {
    $RECEIVER "$LOOP_BIN" $RX_IP $PORT 1 >"$WORK/loop.out" &
    local pid=$!
    wait_bound
    local sent; sent=$(gen "$1" "$2" "$STEP_SECONDS")
    wait $pid
    echo "$sent" "$(cut -d' ' -f1 "$WORK/loop.out")"
}

step_sockperf() {
    $RECEIVER sockperf server -i $RX_IP -p $PORT >/dev/null 2>&1 &
    local pid=$!
    wait_bound
    local out0 in0; out0=$(out_datagrams) in0=$(in_datagrams)
    $SENDER sockperf throughput -i $RX_IP -p $PORT -m "$2" --mps "$1" -t "$STEP_SECONDS" >/dev/null 2>&1 || true
    sleep 1
    local sent=$(($(out_datagrams) - out0)) got=$(($(in_datagrams) - in0))
    kill $pid; wait $pid 2>/dev/null || true
    echo "$sent" "$got"
}

sender_max() { # receiver size -> pps its sender reaches unpaced, into a sink that reads nothing
    ip netns exec $RX python3 -c "import socket,time;s=socket.socket(2,2);s.bind(('$RX_IP',$PORT));time.sleep(4)" &
    local sink=$!
    wait_bound
    if [[ $1 == sockperf ]]; then
        local out0; out0=$(out_datagrams)
        $SENDER sockperf throughput -i $RX_IP -p $PORT -m "$2" -t 2 >/dev/null 2>&1 || true
        echo $((($(out_datagrams) - out0) / 2))
    else
        echo $(($(gen 0 "$2" 2) / 2))
    fi
    wait "$sink" 2>/dev/null || true
}

# A loss-free rate within 5% of what its sender reaches measures the sender.
mark() { # best max
    if (($1 * 100 >= $2 * 95)); then echo "$1 (sender-bound)"; else echo "$1"; fi
}

ratio() { python3 -c "print(f'{$1/$2:.2f}x' if $2 else 'n/a')"; }

table="$WORK/table.md"
echo "| payload | receiving veth GRO | gateway (pps) | recvmmsg loop (pps) | sockperf (pps) | gateway / loop | gateway / sockperf |" >"$table"
echo "|---|---|---|---|---|---|---|" >>"$table"
for gro in $GRO_MODES; do
    ip netns exec $RX ethtool -K veth1 gro "$gro" >/dev/null
    for size in $SIZES; do
        declare -A best=() shown=()
        for receiver in $RECEIVERS; do
            max=$(sender_max "$receiver" "$size")
            echo "gro $gro, $size B, $receiver: its sender reaches $max pps unpaced" >&2
            best[$receiver]=$(search "$receiver" "$size" "$max")
            shown[$receiver]=$(mark "${best[$receiver]}" "$max")
        done
        gw=${best[gateway]:-0} loop=${best[recvmmsg]:-0} sp=${best[sockperf]:-0}
        echo "| $size B | $gro | ${shown[gateway]:-} | ${shown[recvmmsg]:-} | ${shown[sockperf]:-} | $(ratio "$gw" "$loop") | $(ratio "$gw" "$sp") |" | tee -a "$table" >&2
        unset best shown
    done
done
echo
[[ -n ${PASSTHROUGH:-} ]] && echo "GSO PASSTHROUGH (sender veth segmentation on): not a receive figure"
cat "$table"
