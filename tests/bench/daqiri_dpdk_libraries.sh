#!/usr/bin/env bash
# DAQIRI's DPDK engine against ours on net_null, 1, 2 and 4 RX queues:
# DAQIRI's raw benchmark (daqiri_bench_raw_gpudirect), one source, linked
# against DAQIRI 2026.7 (tests/reference/build.sh daqiri) and against
# libdaqiri built with our DPDK backend, both on DPDK 25.11.2 (the
# reference build), run alternately with one config, dpdk-testpmd rxonly in
# the same run as the ceiling. net_null puts a SIZE-byte frame on every slot
# of every receive of every queue: the receivers themselves are measured,
# no wire. The config (below) differs between the two in the address only:
# DAQIRI's engine takes PCI addresses alone, so it gets 0000:00:00.0 and
# runs with tests/bench/dpdk_vdev_shim.c preloaded, which has EAL open
# net_null there (the shim's header says what else it changes, and why);
# ours gets net_null0 itself.
#   tests/bench/daqiri_dpdk_libraries.sh --pack [DIR]   here: packs both
#          builds, testpmd, DPDK's libraries and plugins and the shim, with
#          this script as DIR/run.sh (default target/daqiri-dpdk-bench)
#   DIR/run.sh   on the GPU machine (16 cores), as root:
#          QUEUES="1 2 4" ROUNDS=3 SECONDS_EACH=5 SIZE=64 LOGS=folder
# Cores: EAL's main lcore 0, RX queue k on core 1+k, the benchmark's thread
# for queue k on core 1+N+k (DAQIRI's bench_rx, one entry per queue).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [[ ${1:-} == --pack ]]; then
    cd "$here/../.."
    source tests/bench/lib.sh
    out=${2:-target/daqiri-dpdk-bench}
    # DAQIRI's build and ours (the benchmark linked to libdaqiri), DPDK's
    # libraries and the plugins both load, as for the loopback comparison.
    tests/bench/daqiri_raw_libraries.sh --pack "$out" >/dev/null
    mv "$out/run.sh" "$out/loopback.sh"
    dpdk=$(tests/reference/build.sh dpdk)
    # net_null links both buses by name: they go with the libraries, loaded
    # once as its dependencies, not a second time as plugins.
    pmds=$(cat "$out/daqiri/pmds-path")
    cp -L "$pmds/librte_net_null.so" "$out/daqiri/pmds/"
    rm "$out"/daqiri/pmds/librte_bus_*.so
    LD_LIBRARY_PATH=$dpdk/lib copy_linked_libraries "$out/daqiri/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu' \
        "$pmds/librte_net_null.so"
    # libdaqiri with our DPDK backend on the same DPDK, in place of the packed one.
    library=$(PKG_CONFIG_PATH=$dpdk/lib/pkgconfig LD_LIBRARY_PATH=$dpdk/lib \
        gateway/capi/package.sh target/capi/prefix-cuda-dpdk-release --release --features cuda,dpdk)
    rm -f "$out"/ours/lib/libdaqiri.so.?
    cp -L "$library"/lib/libdaqiri.so.? "$out/ours/lib/"
    strip --strip-debug "$out"/ours/lib/libdaqiri.so.?
    LD_LIBRARY_PATH=$dpdk/lib copy_linked_libraries "$out/daqiri/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu|/libdaqiri' \
        "$out"/ours/lib/libdaqiri.so.? "$dpdk/bin/dpdk-testpmd"
    cp "$dpdk/bin/dpdk-testpmd" "$out/daqiri/bin/"
    # shellcheck disable=SC2046 # pkg-config prints separate flags
    cc -shared -fPIC -O2 -o "$out/daqiri/dpdk_vdev_shim.so" tests/bench/dpdk_vdev_shim.c \
        $(PKG_CONFIG_PATH=$dpdk/lib/pkgconfig pkg-config --cflags libdpdk) -ldl
    cp "$0" "$out/run.sh"
    echo "daqiri_dpdk_libraries: packed in $out ($(du -sh "$out" | cut -f1))" >&2
    exit 0
fi

cd "$here"
rounds=${ROUNDS:-3} seconds=${SECONDS_EACH:-5} size=${SIZE:-64} queues=${QUEUES:-"1 2 4"}
[[ $EUID == 0 ]] || { echo "daqiri_dpdk_libraries: needs root (hugepages)" >&2; exit 1; }
cuda_dirs=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
for wheel in cublas cufft cuda_runtime; do
    dir=$(python3 -c "import nvidia.$wheel as m; print(m.__path__[0] + '/lib')" 2>/dev/null) && cuda_dirs+=:$dir
done
# Both engines' regions are hugepage memory (16384 buffers of 2 KiB a queue).
if (($(awk '/HugePages_Free/ {print $2}' /proc/meminfo) < 2048)); then
    echo 3072 > /proc/sys/vm/nr_hugepages || true
fi
mountpoint -q /dev/hugepages || { mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages; } || true
pmds=$(cat daqiri/pmds-path)
[[ -e $pmds ]] || { mkdir -p "$(dirname "$pmds")" && ln -s "$PWD/daqiri/pmds" "$pmds"; }
logs=${LOGS:-$(mktemp -d)}
mkdir -p "$logs"

config() { # file queues address
    local n=$2 k
    {
        printf 'daqiri:\n  cfg:\n    version: 1\n    stream_type: "raw"\n    master_core: 0\n'
        printf '    log_level: "warn"\n    rx_meta_buffers: 4096\n    memory_regions:\n'
        for ((k = 0; k < n; k++)); do
            printf '    - {name: "rx_mem%d", kind: "huge", affinity: 0, num_bufs: 16384, buf_size: 2048}\n' "$k"
        done
        printf '    interfaces:\n    - name: "rx_port"\n      address: "%s"\n      rx:\n        queues:\n' "$3"
        for ((k = 0; k < n; k++)); do
            printf '        - {name: "rx_q_%d", id: %d, cpu_core: %d, batch_size: 64, memory_regions: ["rx_mem%d"]}\n' \
                "$k" "$k" $((1 + k)) "$k"
        done
        printf 'bench_rx:\n'
        for ((k = 0; k < n; k++)); do
            printf -- '- {interface_name: "rx_port", queue_id: %d, cpu_core: %d}\n' "$k" $((1 + n + k))
        done
    } >"$1"
}

# One run of the benchmark: packets a second its threads received, or why it did not run.
run() { # library queues round
    local log=$logs/$1-$2-$3.log yaml=$logs/$1-$2.yaml
    local binary=ours/bin/daqiri_bench_raw_gpudirect libs=$PWD/ours/lib:$PWD/daqiri/lib preload=""
    rm -f /dev/hugepages/*map_* 2>/dev/null || true
    if [[ $1 == DAQIRI ]]; then
        binary=daqiri/bin/daqiri_bench_raw_gpudirect libs=$PWD/daqiri/lib preload=$PWD/daqiri/dpdk_vdev_shim.so
        config "$yaml" "$2" 0000:00:00.0
    else
        config "$yaml" "$2" "net_null0,size=$size"
    fi
    DAQIRI_VDEV="0000:00:00.0=net_null0,size=$size" LD_LIBRARY_PATH=$libs:$cuda_dirs timeout 120 \
        env ${preload:+LD_PRELOAD=$preload} "$binary" "$yaml" --seconds "$seconds" >"$log" 2>&1 ||
        { echo "failed: $(grep -m1 -E 'CRITICAL|rror' "$log" || tail -1 "$log")"; return; }
    python3 - "$log" <<'PY'
import re, sys
lines = re.findall(r"^RX complete: .* queue=\d+ packets=(\d+) .* seconds=([0-9.]+)", open(sys.argv[1]).read(), re.M)
print(f"{sum(int(p) for p, _ in lines) / max(float(s) for _, s in lines):.0f}" if lines else "failed: no RX line")
PY
}

testpmd_rate() { # queues
    local n=$1
    LD_LIBRARY_PATH=$PWD/daqiri/lib timeout -s INT $((seconds + 3)) daqiri/bin/dpdk-testpmd -l "0-$n" --main-lcore 0 \
        --no-huge -m 1024 --no-pci --no-shconf --log-level=lib.eal:error --vdev "net_null0,size=$size" -- \
        --forward-mode=rxonly --burst=64 --nb-cores="$n" --rxq="$n" --txq="$n" --total-num-mbufs=$((16384 * n)) \
        --stats-period=1 </dev/null >"$logs/testpmd-$n.log" 2>&1 || true
    grep -o 'Rx-pps: *[0-9]*' "$logs/testpmd-$n.log" | awk '{print $2}' | tail -n +3 |
        awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print 0}'
}

echo "| RX queues | round | testpmd rxonly (pps) | libdaqiri (pps) | DAQIRI (pps) | libdaqiri / DAQIRI |"
echo "|---|---|---|---|---|---|"
for n in $queues; do
    ceiling=$(testpmd_rate "$n")
    for ((round = 1; round <= rounds; round++)); do
        ours=$(run libdaqiri "$n" "$round")
        theirs=$(run DAQIRI "$n" "$round")
        ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}')" "$ours" "$theirs" 2>/dev/null || echo n/a)
        echo "| $n | $round | $ceiling | $ours | $theirs | $ratio |"
    done
done
