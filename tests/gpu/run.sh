#!/usr/bin/env bash
# Runs every GPU test binary in this folder (see build.sh), one test at a
# time, printing one line per test and a closing count. Without a GPU every
# test is reported as skipped, never as passed. Benchmarks (gpu_*) that are
# not test binaries run with --bench when BENCH=1.
set -uo pipefail
cd "$(dirname "$0")"
passed=0 failed=0 skipped=0
gpu=yes
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    gpu=""
fi
for bin in gpu_*; do
    [ -x "$bin" ] || continue
    tests=$("./$bin" --list --format terse 2>/dev/null | sed -n 's/: test$//p')
    if [ -z "$tests" ]; then
        # A benchmark, not a test binary.
        if [ -n "${BENCH:-}" ] && [ -n "$gpu" ]; then "./$bin"; fi
        continue
    fi
    for test in $tests; do
        if [ -z "$gpu" ]; then
            echo "skipped: no GPU  $bin::$test"
            skipped=$((skipped + 1))
            continue
        fi
        start=$EPOCHREALTIME
        if log=$("./$bin" --exact "$test" --test-threads 1 2>&1); then
            echo "ok      $bin::$test ($(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $start }") s)"
            passed=$((passed + 1))
        else
            echo "FAILED  $bin::$test"
            echo "$log" | sed 's/^/    /' | tail -30
            failed=$((failed + 1))
        fi
    done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
