#!/usr/bin/env bash
# Runs every GPU test binary in this folder (see build.sh), one test at a
# time, printing one line per test and a closing count. Without a GPU every
# test is reported as skipped, never as passed. Two benchmarks run as checks:
# gpu_reorder_bandwidth held to a floor of device copy (an optimised build
# only) and gpu_reorder_vs_daqiri, whose outputs must equal DAQIRI's and the
# CPU's; the other benchmarks (gpu_*) run when BENCH=1.
set -uo pipefail
cd "$(dirname "$0")"
# The gateway tests run the binary built beside them.
export DAQIRI_GATEWAY=$PWD/daqiri-gateway
# Where the conformance suite's GPU scenarios record their results
# (tests/conformance_table.py reads them from tests/gpu/conformance).
export CONFORMANCE_RESULTS=${CONFORMANCE_RESULTS:-$PWD/conformance}
passed=0 failed=0 skipped=0
gpu=yes
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    gpu=""
fi
# cuFile reads a file's filesystem type from udev's database, which a
# container without udevd lacks: it then refuses to register any file, even
# in compatibility mode. Describe the temp directory's disk the way udev would.
if [ -n "$gpu" ] && [ "$(id -u)" = 0 ]; then
    disk=$(stat -c '%Hd:%Ld' "${TMPDIR:-/tmp}")
    fstype=$(stat -f -c '%T' "${TMPDIR:-/tmp}")
    if [ "$disk" != "0:0" ] && [ ! -e "/run/udev/data/b$disk" ]; then
        mkdir -p /run/udev/data
        printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "${fstype/ext2\/ext3/ext4}" >"/run/udev/data/b$disk"
    fi
fi
# Records one check's outcome: result NAME (ok|FAILED|skipped: why) [LOG].
result() {
    case $2 in
        ok) echo "ok      $1"; passed=$((passed + 1)) ;;
        FAILED) echo "FAILED  $1"; echo "$3" | sed 's/^/    /' | tail -40; failed=$((failed + 1)) ;;
        *) echo "$2  $1"; skipped=$((skipped + 1)) ;;
    esac
}
# The benchmarks that guard something: a drop of the reorder kernels below
# 50% of device copy from 128 MB (64-88% on an H200; a plan's slot
# tables growing mid-run once took plain copy to 30-32% at 128 MB), and any byte where
# our kernels' output differs from DAQIRI's.
bench_check() {
    local bin=$1 name
    case $bin in
        gpu_reorder_bandwidth)
            name="$bin (at least 50% of device copy from 128 MB)"
            if [ -z "$gpu" ]; then
                result "$name" "skipped: no GPU"
            elif [ "$(cat PROFILE 2>/dev/null)" != release ]; then
                result "$name" "skipped: a test-profile build times its own unoptimised host code"
            else
                bench_as_check "$name" env BENCH_FLOOR=50 "./$bin"
            fi
            ;;
        gpu_reorder_vs_daqiri)
            name="$bin (outputs equal DAQIRI's and the CPU's)"
            if [ -z "$gpu" ]; then
                result "$name" "skipped: no GPU"
            elif [ ! -x daqiri_reorder_check ]; then
                result "$name" "skipped: no daqiri_reorder_check (no reference sources where build.sh ran)"
            else
                bench_as_check "$name" env DAQIRI_REORDER_CHECK="$PWD/daqiri_reorder_check" "./$bin"
            fi
            ;;
        *) if [ -n "${BENCH:-}" ] && [ -n "$gpu" ]; then "./$bin"; fi ;;
    esac
}
# Runs a benchmark as a check: its table printed, NAME ok when it exits 0.
bench_as_check() { # name command...
    local name=$1 log
    shift
    if log=$("$@" 2>&1); then
        echo "$log"
        result "$name" ok
    else
        result "$name" FAILED "$log"
    fi
}
for bin in gpu_*; do
    [ -x "$bin" ] || continue
    tests=$("./$bin" --list --format terse 2>/dev/null | sed -n 's/: test$//p')
    # The conformance suite's GPU scenarios only; the rest run in tests/run.sh.
    [ "$bin" = gpu_conformance ] && tests=$(echo "$tests" | grep '^gpu_')
    if [ -z "$tests" ]; then
        # A benchmark, not a test binary.
        bench_check "$bin"
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
# The Python client's GPU test: a GPU plan's aggregates read through
# DLPack by PyTorch ($DAQIRI_PYTHON: a Python with torch, numpy and pytest).
if [ -f python/daqiri_gateway.abi3.so ]; then
    py=${DAQIRI_PYTHON:-python3}
    name="python::test_consumer.py (GPU)"
    if [ -z "$gpu" ]; then
        echo "skipped: no GPU  $name"
        skipped=$((skipped + 1))
    elif ! "$py" -c 'import torch, numpy, pytest' 2>/dev/null; then
        echo "skipped: $py lacks torch, numpy or pytest  $name"
        skipped=$((skipped + 1))
    elif log=$(cd python && PYTHONPATH=$PWD "$py" -m pytest -q -p no:cacheprovider -rs -k gpu tests/python 2>&1) \
        && summary=$(echo "$log" | tail -1) && [[ $summary =~ (^|[^0-9])1\ passed && ! $summary =~ skipped ]]; then
        echo "ok      $name: $summary"
        passed=$((passed + 1))
    elif [[ ${summary:-} =~ skipped && ! ${summary:-} =~ (failed|error) ]]; then
        # pytest skipped it (its reason is in the log): a skip, never a pass.
        echo "skipped: $(echo "$log" | grep -m1 '^SKIPPED' || echo "$summary")  $name"
        skipped=$((skipped + 1))
    else
        echo "FAILED  $name"
        echo "$log" | sed 's/^/    /' | tail -40
        failed=$((failed + 1))
    fi
fi
# DAQIRI's programs that send from GPU memory, on libdaqiri (build.sh packs them).
name="daqiri_programs (DAQIRI's raw GPUDirect, HDS and quantize benches and its pcap-writer, GDS-write and dynamic-flow examples, unchanged)"
if [ ! -x daqiri-programs/run.sh ]; then
    result "$name" "skipped: not packed (no DAQIRI reference sources where build.sh ran)"
elif [ -z "$gpu" ]; then
    result "$name" "skipped: no GPU"
else
    status=0
    log=$(daqiri-programs/run.sh 2>&1) || status=$?
    case $status in
        0) echo "$log"; result "$name" ok ;;
        3) result "$name" "skipped: $(echo "$log" | tail -1)" ;;
        *) result "$name" FAILED "$log" ;;
    esac
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
