#!/usr/bin/env bash
# Start-to-start spread of the DPDK backend on net_null (the bimodality
# docs/benchmarks.md describes): the same one-queue `run` started RUNS
# times, the application draining on master_core (as `run` does by
# default) or on a core of its own (`--consumer-cores`), one rate per run.
#   tests/bench/dpdk_null_repeat.sh   (RUNS=6, SECONDS_EACH=4, SIZE=64,
#   GW=<a gateway built with --features dpdk>)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-6}
SECONDS_EACH=${SECONDS_EACH:-4}
SIZE=${SIZE:-64}
: "${GW:?GW names a gateway built with --features dpdk}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
net_null_config "$WORK/gateway.yaml" 1 1 "$SIZE" 256
for mode in master_core own_core; do
    rates=()
    for ((i = 0; i < RUNS; i++)); do
        extra=()
        [[ $mode == own_core ]] && extra=(--consumer-cores 2)
        "$GW" run --config "$WORK/gateway.yaml" --no-admin --duration "$SECONDS_EACH" "${extra[@]}" \
            --summary-json "$WORK/summary.json" >"$WORK/gateway.log" 2>&1 || tail -3 "$WORK/gateway.log" >&2
        rates+=("$(python3 -c "print(round($(consumed_rate "$WORK/summary.json") / 1e6, 1))")")
    done
    echo "application on $mode: ${rates[*]} Mpps"
done
