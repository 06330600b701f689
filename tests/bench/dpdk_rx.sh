#!/usr/bin/env bash
# Receive rate of the gateway's DPDK backend against dpdk-testpmd in
# rxonly mode, on the same virtual device, cores and burst size, in one run.
#
# net_null hands out a frame of SIZE bytes on every slot of every
# rte_eth_rx_burst, as fast as it is polled: what is measured is the
# receiver itself (engine overhead alone), with no wire and no sender.
#   testpmd   --forward-mode=rxonly, forwarding lcore 1, main lcore 0,
#             burst 64; rate = the mean of its per-second Rx-pps lines
#             after the first two
#   gateway   `daqiri-gateway run`, RX queue on cpu_core 1, master_core 0,
#             64 mbufs per rte_eth_rx_burst, batch_size 64; rate = packets
#             its application loop consumed / elapsed. The application loop
#             (main thread) is not pinned; testpmd has none.
#
# Usage: tests/bench/dpdk_rx.sh   (SECONDS_EACH=10, SIZES="64 1500";
#   GW runs a prebuilt gateway built with --features dpdk)
set -euo pipefail
cd "$(dirname "$0")/../.."

SECONDS_EACH=${SECONDS_EACH:-10}
SIZES=${SIZES:-"64 1500"}
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway --features dpdk
    GW=$PWD/target/release/daqiri-gateway
fi
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd is missing: tests/setup.sh installs dpdk" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

testpmd_rate() { # size
    timeout -s INT $((SECONDS_EACH + 3)) dpdk-testpmd -l 0,1 --main-lcore 0 --no-huge -m 512 --no-pci --no-shconf \
        --log-level=lib.eal:error --vdev "net_null0,size=$1" -- \
        --forward-mode=rxonly --burst=64 --nb-cores=1 --rxq=1 --txq=1 --total-num-mbufs=16384 \
        --stats-period=1 </dev/null >"$WORK/testpmd.log" 2>&1 || true
    grep -o 'Rx-pps: *[0-9]*' "$WORK/testpmd.log" | awk '{print $2}' | tail -n +3 \
        | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print 0}'
}

gateway_rate() { # size
    cat >"$WORK/gateway.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    memory_regions:
    - { name: rx_mem, kind: host, num_bufs: 16384, buf_size: 2048 }
    interfaces:
    - name: null_port
      address: net_null0,size=$1
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 64, timeout_us: 1000, memory_regions: [rx_mem] }
YAML
    "$GW" run --config "$WORK/gateway.yaml" --duration "$SECONDS_EACH" --summary-json "$WORK/summary.json" \
        >"$WORK/gateway.log" 2>&1
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(round(s["consumed"]["packets"] / s["elapsed_s"]))' \
        "$WORK/summary.json"
}

echo "| device | frame | dpdk-testpmd rxonly (pps) | gateway (pps) | gateway / testpmd |"
echo "|---|---|---|---|---|"
for size in $SIZES; do
    reference=$(testpmd_rate "$size")
    ours=$(gateway_rate "$size")
    ratio=$(python3 -c "print(f'{$ours / $reference:.2f}' if $reference else 'n/a')")
    echo "| net_null | $size B | $reference | $ours | $ratio |"
done
