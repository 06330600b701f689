#!/usr/bin/env bash
# Runs tests with four busy loops beside them, as on a CI machine whose two
# cores are shared with other builds, and counts the runs that pass:
#   tests/under_load.sh [--runs N] [-- COMMAND...]
# Without a command it runs the tests that compare exact counts against what
# was sent (the Python client's, the consumer and reload tests of the
# gateway): each must account for every packet by its drop reason or the
# aggregate's missing slots, never assume a quiet machine. Exits 1 unless
# every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10
if [[ ${1:-} == --runs ]]; then
    runs=$2
    shift 2
fi
[[ ${1:-} == -- ]] && shift
if (($# == 0)); then
    set -- bash -c 'tests/python/run.sh -q && cargo nextest run --no-fail-fast -p daqiri-gateway --test consumers --test reload --test captures'
fi
busy=()
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
for _ in 1 2 3 4; do
    (while :; do :; done) &
    busy+=($!)
done
passed=0
for ((run = 1; run <= runs; run++)); do
    if "$@" >"target/under-load-$run.log" 2>&1; then
        passed=$((passed + 1))
        echo "under_load: run $run of $runs passed"
    else
        echo "under_load: run $run of $runs FAILED (target/under-load-$run.log):" >&2
        grep -E 'FAIL|Error|assert' "target/under-load-$run.log" | head -20 >&2 || true
    fi
done
echo "under_load: $passed of $runs runs passed beside four busy loops"
((passed == runs))
