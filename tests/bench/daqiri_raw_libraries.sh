#!/usr/bin/env bash
# DAQIRI's GPUDirect raw benchmark (daqiri_bench_raw_gpudirect), one source,
# linked twice: against DAQIRI 2026.7 (tests/reference/build.sh daqiri, its
# DPDK engine's software loopback) and against libdaqiri (our engine's
# software loopback, tests/capi/daqiri_programs.sh), run alternately on the
# GPU machine with DAQIRI's own software-loopback config, untouched: bursts
# of 10240 packets of 1064 bytes written into GPU memory, sent from it and
# received into it, as fast as each library goes. Reports what each run sent
# and received per second.
#   tests/bench/daqiri_raw_libraries.sh --pack [DIR]   here: packs both builds
#                                  and this script as DIR/run.sh (default
#                                  target/daqiri-raw-bench), for `carry`
#   DIR/run.sh   on the GPU machine, as root (ROUNDS=3 SECONDS_EACH=5 WORKLOAD=none LOGS=folder)
# DAQIRI's DPDK engine needs hugepages (run.sh reserves and mounts them) and
# finds DPDK's plugins at the path DPDK was built for (run.sh links it there).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [[ ${1:-} == --pack ]]; then
    cd "$here/../.."
    source tests/bench/lib.sh
    out=${2:-target/daqiri-raw-bench}
    rm -rf "$out" && mkdir -p "$out/daqiri/bin" "$out/daqiri/lib"
    tests/capi/daqiri_programs.sh --pack "$out/ours" --release >/dev/null
    theirs=$(tests/reference/build.sh daqiri)/bin/daqiri_bench_raw_gpudirect
    dpdk=$(tests/reference/build.sh dpdk)
    cp "$theirs" "$out/daqiri/bin/"
    strip --strip-debug "$out/daqiri/bin/daqiri_bench_raw_gpudirect"
    # DPDK's libraries and every other library it links that a machine
    # without DPDK or rdma-core lacks (not libc's, not CUDA's: the GPU
    # machine has those).
    LD_LIBRARY_PATH=$dpdk/lib:$(tests/reference/build.sh cuda)/lib/stubs \
        copy_linked_libraries "$out/daqiri/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu' "$theirs"
    # EAL loads every plugin in the folder DPDK was built to use; the
    # software loopback needs the ring mempool and the buses (one file each:
    # EAL would load a copy under each of a plugin's names).
    pmds=$(find "$dpdk/lib/dpdk" -maxdepth 1 -name 'pmds-*' | head -1)
    mkdir -p "$out/daqiri/pmds"
    for plugin in librte_mempool_ring librte_bus_pci librte_bus_vdev; do
        cp -L "$pmds/$plugin.so" "$out/daqiri/pmds/"
        LD_LIBRARY_PATH=$dpdk/lib copy_linked_libraries "$out/daqiri/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu' \
            "$pmds/$plugin.so"
    done
    echo "$pmds" > "$out/daqiri/pmds-path"
    cp "$0" "$out/run.sh"
    cp tests/bench/daqiri_host_env.sh "$out/"
    echo "daqiri_raw_libraries: packed in $out ($(du -sh "$out" | cut -f1))" >&2
    exit 0
fi

cd "$here"
rounds=${ROUNDS:-3} seconds=${SECONDS_EACH:-5} workload=${WORKLOAD:-none}
[[ $EUID == 0 ]] || { echo "daqiri_raw_libraries: needs root (hugepages for DAQIRI's DPDK engine)" >&2; exit 1; }
nvidia-smi -L >/dev/null 2>&1 || { echo "daqiri_raw_libraries: no GPU" >&2; exit 3; }
# Hugepages for EAL (DAQIRI's preflight asks for about 200 MiB with this config).
source ./daqiri_host_env.sh
daqiri_host_env 512 1024
config=ours/configs/daqiri_bench_raw_sw_loopback.yaml
# Each run's output, kept (LOGS=folder; a temporary one by default).
logs=${LOGS:-$(mktemp -d)}
mkdir -p "$logs"

# One run: "sent_mpps received_mpps received_gbps", or why it did not run.
run() { # library round
    local binary=ours/bin/daqiri_bench_raw_gpudirect libs=$PWD/ours/lib log=$logs/$1-$2.log
    if [[ $1 == DAQIRI ]]; then
        binary=daqiri/bin/daqiri_bench_raw_gpudirect libs=$PWD/daqiri/lib:$PWD/daqiri/pmds
    fi
    LD_LIBRARY_PATH=$libs:$cuda_dirs timeout 120 "$binary" "$config" --seconds "$seconds" --workload "$workload" \
        > "$log" 2>&1 || { echo "failed: $(grep -m1 -E 'CRITICAL|rror:' "$log" || tail -1 "$log")"; return; }
    python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def counts(kind):
    line = re.search(rf"^{kind} complete: (.*)$", text, re.M)
    return {k: float(v) for k, v in (kv.split("=") for kv in line[1].split()) if k not in ("interface", "queue", "queues")}
tx, rx = counts("TX"), counts("RX")
print(f"{tx['packets'] / tx['seconds'] / 1e6:.2f} {rx['packets'] / rx['seconds'] / 1e6:.2f} {rx['bytes'] * 8 / rx['seconds'] / 1e9:.1f}")
PY
}

echo "| round | library | sent (Mpps) | received (Mpps) | received (Gb/s) |"
echo "|---|---|---|---|---|"
for ((round = 1; round <= rounds; round++)); do
    for library in libdaqiri DAQIRI; do
        result=$(run $library $round)
        if [[ $result == failed* ]]; then
            echo "| $round | $library | $result | | |"
        else
            read -r sent received gbps <<<"$result"
            echo "| $round | $library | $sent | $received | $gbps |"
        fi
    done
done
