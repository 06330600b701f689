#!/usr/bin/env bash
# Builds the GPU test binaries and benchmarks (engine and gateway with the
# cuda feature) and the gateway binary into one folder, with run.sh beside
# them, for the GPU machine:
#   tests/gpu/build.sh [--dev] [folder]   (default target/gpu-tests)
#   cd target/gpu-tests && ./run.sh       (on the GPU machine)
# cudarc loads libcuda and libnvrtc at run time, so this builds anywhere.
# --dev builds with the test profile instead of release: for a machine with
# no GPU, where the tests only need to build and be listed as skipped, it
# reuses the workspace's test build instead of a second, optimised one.
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=--release
if [[ ${1:-} == --dev ]]; then
    profile=--profile=dev
    shift
fi
out=${1:-target/gpu-tests}
mkdir -p "$out"
rm -rf "$out"/gpu_* "$out"/daqiri-gateway "$out"/conformance "$out"/daqiri_reorder_check "$out"/daqiri-programs "$out"/PROFILE
# run.sh holds the bandwidth bench to a floor only in an optimised build.
echo "${profile#--profile=}" | sed 's/^--//' >"$out/PROFILE"
# The sources these results will be for: tests/conformance_table.py calls the
# GPU table stale once they change (copy conformance/ back to tests/gpu/).
mkdir -p "$out/conformance"
tests/conformance_table.py --sources-hash >"$out/conformance/SOURCES"
cargo build "$profile" -p daqiri -p daqiri-gateway --features daqiri/cuda,daqiri-gateway/cuda \
    --tests --benches --bins --message-format=json-render-diagnostics \
    | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    target = msg["target"]
    if target["name"].startswith("gpu_") and ("test" in target["kind"] or "bench" in target["kind"]):
        print(target["name"], msg["executable"])
    elif target["name"] == "conformance" and "test" in target["kind"]:
        # Its GPU scenarios; run.sh runs only those there.
        print("gpu_conformance", msg["executable"])
    elif target["name"] == "daqiri-gateway" and "bin" in target["kind"] and not msg["profile"]["test"]:
        # The binary itself, not its unit-test harness (also a "bin" target).
        print(target["name"], msg["executable"])
' | while read -r name path; do
    cp "$path" "$out/$name"
    # Debug info would take the folder past what travels to the GPU machine.
    strip --strip-debug "$out/$name"
done
# The Python module (abi3, so any CPython from 3.11 imports it) with its
# test and the config that test reads, laid out as in the repository.
cargo build "$profile" --quiet -p daqiri-gateway-python
profile_dir=release
[[ $profile == --profile=dev ]] && profile_dir=debug
mkdir -p "$out/python/tests/python" "$out/python/configs"
cp "target/$profile_dir/libdaqiri_gateway.so" "$out/python/daqiri_gateway.abi3.so"
strip --strip-debug "$out/python/daqiri_gateway.abi3.so"
cp tests/python/test_consumer.py "$out/python/tests/python/"
cp configs/socket_udp_reorder.yaml "$out/python/configs/"
cp tests/gpu/run.sh "$out/run.sh"
# DAQIRI's reorder kernel behind our driver, for gpu_reorder_vs_daqiri (a
# second oracle): built from the reference build when its sources are here.
reference=0
checker=$(tests/reference/build.sh reorder-check) || reference=$?
case $reference in
    0) cp "$checker/daqiri_reorder_check" "$out/" ;;
    3) echo "build.sh: no DAQIRI reference sources; run.sh will skip gpu_reorder_vs_daqiri" >&2 ;;
    *) exit "$reference" ;;
esac
# DAQIRI's programs that send from GPU memory, built unchanged against
# libdaqiri, for run.sh (tests/capi/daqiri_programs.sh).
programs=0
release=()
[[ $profile == --release ]] && release=(--release)
tests/capi/daqiri_programs.sh --pack "$out/daqiri-programs" "${release[@]}" || programs=$?
case $programs in
    0) ;;
    3) echo "build.sh: no DAQIRI reference sources; run.sh will skip DAQIRI's programs" >&2 ;;
    *) exit "$programs" ;;
esac
ls "$out"
