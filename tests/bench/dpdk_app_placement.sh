#!/usr/bin/env bash
# The single-queue net_null rate with the application draining (`run
# --consumer-cores`) on: the RX worker's own core (1), its SMT sibling (where
# the machine has one), and another core (4); three runs each.
#   GW=<a gateway built with --features dpdk> tests/bench/dpdk_app_placement.sh
#   (on the GPU host: tests/bench/pack_dpdk.sh, then run.sh ./dpdk_app_placement.sh)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${GW:?GW names a gateway built with --features dpdk}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
sib=$(cut -d, -f2 /sys/devices/system/cpu/cpu1/topology/thread_siblings_list | cut -d- -f2)
echo "cpu1 siblings: $(cat /sys/devices/system/cpu/cpu1/topology/thread_siblings_list); model: $(grep -m1 'model name' /proc/cpuinfo)"
net_null_config "$W/g.yaml" 1 1 64 256
for place in "same:1" "sibling:$sib" "other:4"; do
    rates=()
    for i in 1 2 3; do
        "$GW" run --config "$W/g.yaml" --no-admin --duration 4 --consumer-cores "${place#*:}" --summary-json "$W/s.json" >/dev/null 2>&1
        rates+=("$(python3 -c "print(round($(consumed_rate "$W/s.json") / 1e6, 1))")")
    done
    echo "application on ${place%%:*} core (${place#*:}): ${rates[*]} Mpps"
done
