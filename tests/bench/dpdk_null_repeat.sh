#!/usr/bin/env bash
# Start-to-start spread of the DPDK backend on net_null (the bimodality
# docs/benchmarks.md describes): the same one-queue `run` started RUNS
# times, the application draining on master_core (as `run` does by
# default) or on a core of its own (`--consumer-cores`), one rate per run.
#   tests/bench/dpdk_null_repeat.sh   (RUNS=6, SECONDS_EACH=4, SIZE=64,
#   GW=<a gateway built with --features dpdk>)
set -euo pipefail
RUNS=${RUNS:-6}
SECONDS_EACH=${SECONDS_EACH:-4}
SIZE=${SIZE:-64}
: "${GW:?GW names a gateway built with --features dpdk}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/gateway.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    memory_regions:
    - { name: rx_mem, kind: host, num_bufs: 16384, buf_size: 2048 }
    interfaces:
    - name: bench_port
      address: net_null0,size=$SIZE
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 64, timeout_us: 1000, memory_regions: [rx_mem] }
YAML
for mode in master_core own_core; do
    rates=()
    for ((i = 0; i < RUNS; i++)); do
        extra=()
        [[ $mode == own_core ]] && extra=(--consumer-cores 2)
        "$GW" run --config "$WORK/gateway.yaml" --no-admin --duration "$SECONDS_EACH" "${extra[@]}" \
            --summary-json "$WORK/summary.json" >"$WORK/gateway.log" 2>&1 || tail -3 "$WORK/gateway.log" >&2
        rates+=("$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(round(s["consumed"]["packets"] / s["elapsed_s"] / 1e6, 1))' "$WORK/summary.json")")
    done
    echo "application on $mode: ${rates[*]} Mpps"
done
