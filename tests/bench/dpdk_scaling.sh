#!/usr/bin/env bash
# How the DPDK backend's receive scales with RX queues, each on its own
# core, against dpdk-testpmd rxonly with as many queues and forwarding
# cores, on net_null (a frame of SIZE bytes on every slot of every
# rte_eth_rx_burst of every queue: the receivers themselves, no wire).
#
#   testpmd   -l 0-N, main lcore 0, --nb-cores=N --rxq=N, burst 64; rate =
#             the mean of its per-second Rx-pps lines after the first two
#   hand-off  tests/bench/dpdk_handoff.c, -l 0-2N: queue k received on lcore
#             k (burst 64) and handed through an rte_ring to lcore N+k, which
#             reads each packet's length and frees it: the least a receiver
#             that hands packets to another core does, as the gateway does
#   gateway   `daqiri-gateway run`, master_core 0, RX queue k on cpu_core k
#             (1..N), 64 mbufs per rte_eth_rx_burst, batch_size 64, and
#             `--consumer-cores N+1..2N`: each queue drained by its own
#             application thread on a core of its own, so the application
#             side is not what limits the figure; rate = packets those
#             threads consumed / elapsed
#
# Needs 2N+1 cores (the GPU host has 16). Usage:
#   tests/bench/dpdk_scaling.sh   (QUEUES="1 2 4", SIZE=64, SECONDS_EACH=10,
#   GW=<a gateway built with --features dpdk>, TESTPMD=dpdk-testpmd,
#   HANDOFF=<dpdk_handoff.c built>)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$here/../.."

QUEUES=${QUEUES:-"1 2 4"}
SIZE=${SIZE:-64}
SECONDS_EACH=${SECONDS_EACH:-10}
# The gateway's buffers: one region for every queue (shared), or one each (per-queue).
REGIONS=${REGIONS:-shared}
TESTPMD=${TESTPMD:-dpdk-testpmd}
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway --features dpdk
    GW=$PWD/target/release/daqiri-gateway
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [[ -z ${HANDOFF:-} ]]; then
    HANDOFF=$WORK/dpdk-handoff
    # shellcheck disable=SC2046 # pkg-config prints separate flags
    cc -O2 -o "$HANDOFF" tests/bench/dpdk_handoff.c $(pkg-config --cflags --libs libdpdk)
fi

testpmd_rate() { # queues
    local n=$1
    timeout -s INT $((SECONDS_EACH + 3)) "$TESTPMD" -l "0-$n" --main-lcore 0 --no-huge -m 1024 --no-pci --no-shconf \
        --log-level=lib.eal:error --vdev "net_null0,size=$SIZE" -- \
        --forward-mode=rxonly --burst=64 --nb-cores="$n" --rxq="$n" --txq="$n" --total-num-mbufs=$((16384 * n)) \
        --stats-period=1 </dev/null >"$WORK/testpmd.log" 2>&1 || true
    grep -o 'Rx-pps: *[0-9]*' "$WORK/testpmd.log" | awk '{print $2}' | tail -n +3 \
        | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print 0}'
}

handoff_rate() { # queues
    local n=$1
    "$HANDOFF" -l "0-$((2 * n))" --main-lcore 0 --no-huge -m 1024 --no-pci --no-shconf --log-level=lib.eal:error \
        --vdev "net_null0,size=$SIZE" -- "$n" "$SECONDS_EACH" </dev/null 2>"$WORK/handoff.log" \
        | awk '/consumed-pps:/ {print $2}' | grep . || { tail -3 "$WORK/handoff.log" >&2; echo 0; }
}

gateway_rate() { # queues
    local n=$1
    net_null_config "$WORK/gateway.yaml" "$n" 1 "$SIZE" 1024 "$REGIONS"
    "$GW" run --config "$WORK/gateway.yaml" --no-admin --duration "$SECONDS_EACH" --consumer-cores "$((n + 1))-$((2 * n))" \
        --summary-json "$WORK/summary.json" >"$WORK/gateway.log" 2>&1 || { tail -5 "$WORK/gateway.log" >&2; }
    consumed_rate "$WORK/summary.json"
}

ratio() { python3 -c "print(f'{$1 / $2:.2f}' if $2 else 'n/a')"; }
echo "| RX queues (cores) | dpdk-testpmd rxonly (pps) | hand-off reference (pps) | gateway (pps) | gateway / testpmd | gateway / hand-off | gateway / its 1-queue rate |"
echo "|---|---|---|---|---|---|---|"
one=""
for n in $QUEUES; do
    reference=$(testpmd_rate "$n")
    handoff=$(handoff_rate "$n")
    ours=$(gateway_rate "$n")
    one=${one:-$ours}
    echo "| $n | $reference | $handoff | $ours | $(ratio "$ours" "$reference") | $(ratio "$ours" "$handoff") | $(ratio "$ours" "$one") |"
done
