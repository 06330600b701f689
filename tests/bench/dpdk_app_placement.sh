#!/usr/bin/env bash
# The single-queue net_null rate with the application draining (`run
# --consumer-cores`) on: the RX worker's own core (1), its SMT sibling (where
# the machine has one), and another core (4); three runs each.
#   GW=<a gateway built with --features dpdk> tests/bench/dpdk_app_placement.sh
#   (on the GPU host: tests/bench/pack_dpdk.sh, then run.sh ./dpdk_app_placement.sh)
set -euo pipefail
: "${GW:?GW names a gateway built with --features dpdk}"
W=$(mktemp -d)
sib=$(cut -d, -f2 /sys/devices/system/cpu/cpu1/topology/thread_siblings_list | cut -d- -f2)
echo "cpu1 siblings: $(cat /sys/devices/system/cpu/cpu1/topology/thread_siblings_list); model: $(grep -m1 'model name' /proc/cpuinfo)"
sed "s/CORE/1/" > "$W/g.yaml" <<'YAML'
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    memory_regions:
    - { name: rx_mem, kind: host, num_bufs: 16384, buf_size: 2048 }
    interfaces:
    - name: bench_port
      address: net_null0,size=64
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: CORE, batch_size: 64, timeout_us: 1000, memory_regions: [rx_mem] }
YAML
for place in "same:1" "sibling:$sib" "other:4"; do
    rates=()
    for i in 1 2 3; do
        "$GW" run --config "$W/g.yaml" --no-admin --duration 4 --consumer-cores "${place#*:}" --summary-json "$W/s.json" >/dev/null 2>&1
        rates+=("$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(round(s["consumed"]["packets"] / s["elapsed_s"] / 1e6, 1))' "$W/s.json")")
    done
    echo "application on ${place%%:*} core (${place#*:}): ${rates[*]} Mpps"
done
