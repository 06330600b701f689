#!/usr/bin/env bash
# DAQIRI's DPDK engine against ours on net_null and net_af_packet, 1, 2 and
# 4 RX queues: DAQIRI's raw benchmark (daqiri_bench_raw_gpudirect), one
# source, linked against DAQIRI 2026.7 (tests/reference/build.sh daqiri) and
# against libdaqiri built with our DPDK backend, both on DPDK 25.11.2 (the
# reference build), run alternately with one config, dpdk-testpmd rxonly in
# the same run as the ceiling.
#   net_null    a SIZE-byte frame on every slot of every receive of every
#               queue: the receivers themselves, no wire
#   af_packet   net_af_packet (one packet socket a queue, fanned out by
#               flow) on one end of a veth pair between two network
#               namespaces, fed by `daqiri-gateway gen` at full speed over
#               16 flows from core 15, the sender veth's segmentation off
#               (single frames, as on a wire), the receive softirq on core
#               14: the kernel's veth and packet-socket path bounds both
# The config (below) differs between the two in the address (and for
# af_packet the buffers' size, see buf_size) only: DAQIRI's
# engine takes PCI addresses alone, so it gets 0000:00:00.0 and runs with
# tests/bench/dpdk_vdev_shim.c preloaded, which has EAL open the virtual
# device there (the shim's header says what else it changes, and why); ours
# gets the device itself.
#   tests/bench/daqiri_dpdk_libraries.sh --pack [DIR]   here: packs both
#          builds, testpmd, DPDK's libraries and plugins and the shim, with
#          this script as DIR/run.sh (default target/daqiri-dpdk-bench; the
#          gateway for `gen`, `ip` and `ethtool` go with them: GW=<a built
#          daqiri-gateway> skips building one)
#   DIR/run.sh   on the GPU machine (16 cores), as root: DEVICES="net_null
#          af_packet" QUEUES="1 2 4" ROUNDS=3 SECONDS_EACH=5 SIZE=64 LOGS=folder
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
    cp -L "$pmds/librte_net_af_packet.so" "$out/daqiri/pmds/"
    LD_LIBRARY_PATH=$dpdk/lib copy_linked_libraries "$out/daqiri/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu' \
        "$pmds/librte_net_af_packet.so"
    # The af_packet bed: its sender and the tools that make it (the GPU machine has neither).
    if [[ -z ${GW:-} ]]; then
        cargo build --release -q -p daqiri-gateway
        GW=target/release/daqiri-gateway
    fi
    mkdir -p "$out/bed/bin" "$out/bed/lib"
    cp "$GW" "$(command -v ip)" "$(command -v ethtool)" "$out/bed/bin/"
    strip "$out/bed/bin/daqiri-gateway"
    copy_linked_libraries "$out/bed/lib" '' "$out"/bed/bin/*
    # shellcheck disable=SC2046 # pkg-config prints separate flags
    cc -shared -fPIC -O2 -o "$out/daqiri/dpdk_vdev_shim.so" tests/bench/dpdk_vdev_shim.c \
        $(PKG_CONFIG_PATH=$dpdk/lib/pkgconfig pkg-config --cflags libdpdk) -ldl
    cp "$0" "$out/run.sh"
    echo "daqiri_dpdk_libraries: packed in $out ($(du -sh "$out" | cut -f1))" >&2
    exit 0
fi

cd "$here"
rounds=${ROUNDS:-3} seconds=${SECONDS_EACH:-5} size=${SIZE:-64} queues=${QUEUES:-"1 2 4"}
devices=${DEVICES:-"net_null af_packet"}
[[ $EUID == 0 ]] || { echo "daqiri_dpdk_libraries: needs root (hugepages)" >&2; exit 1; }
# Both engines' regions are hugepage memory (16384 buffers of 2 KiB a queue).
source ./daqiri_host_env.sh
daqiri_host_env 2048 3072
logs=${LOGS:-$(mktemp -d)}
mkdir -p "$logs"

config() { # file queues address buf_size
    local n=$2 k
    {
        printf 'daqiri:\n  cfg:\n    version: 1\n    stream_type: "raw"\n    master_core: 0\n'
        printf '    log_level: "warn"\n    rx_meta_buffers: 4096\n    memory_regions:\n'
        for ((k = 0; k < n; k++)); do
            printf '    - {name: "rx_mem%d", kind: "huge", affinity: 0, num_bufs: 16384, buf_size: %d}\n' "$k" "$4"
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

# The device's DPDK arguments, a frame's buffer (by library) and the command
# prefix that runs a receiver where the device is. af_packet: DAQIRI's engine
# sets the port's MTU from its buffers' size, and the PMD takes frames of 1518
# bytes at most, so 1518-byte buffers; the PMD's frame slots (framesz 1536:
# 1504 bytes of frame, in blocks of 8 of them, so that no slot straddles a
# block, which the PMD's walk assumes) must fit an mbuf's room after DPDK's 128 bytes of
# headroom, which DAQIRI adds to buf_size and ours counts in it, so ours gets
# 1646: the same 1518 bytes of room in both. net_null: 2048 for both (the
# room differs by that headroom; its 64-byte frames fit either).
vdev() { # device queues
    case $1 in
        net_null) echo "net_null0,size=$size" ;;
        af_packet) echo "net_af_packet0,iface=veth1,qpairs=$2,blocksz=12288,framesz=1536,framecnt=8192" ;;
    esac
}
buf_size() { # device library
    case $1/$2 in
        af_packet/DAQIRI) echo 1518 ;;
        af_packet/*) echo 1646 ;;
        *) echo 2048 ;;
    esac
}
in_bed() { [[ $1 == af_packet ]] && echo "bed/bin/ip netns exec dq_rx" || true; }

# Two namespaces joined by a veth pair, as tests/bench/lib.sh's veth_bed makes them.
bed_up() {
    local ip="env LD_LIBRARY_PATH=$PWD/bed/lib bed/bin/ip"
    $ip netns add dq_tx && $ip netns add dq_rx
    $ip link add veth0 netns dq_tx type veth peer name veth1 netns dq_rx
    $ip -n dq_tx addr add 10.213.1.1/24 dev veth0 && $ip -n dq_rx addr add 10.213.1.2/24 dev veth1
    for ns in dq_tx dq_rx; do $ip -n $ns link set lo up; done
    $ip -n dq_tx link set veth0 up && $ip -n dq_rx link set veth1 up
    $ip netns exec dq_tx env LD_LIBRARY_PATH="$PWD/bed/lib" bed/bin/ethtool -K veth0 \
        tx-udp-segmentation off tx-gso-list off tso off >/dev/null
    $ip netns exec dq_rx sh -c "printf %x $((1 << 14)) > /sys/class/net/veth1/queues/rx-0/rps_cpus"
}
bed_down() {
    for ns in dq_tx dq_rx; do LD_LIBRARY_PATH=$PWD/bed/lib bed/bin/ip netns del $ns 2>/dev/null || true; done
}
start_sender() { # device
    [[ $1 == af_packet ]] || return 0
    LD_LIBRARY_PATH=$PWD/bed/lib bed/bin/ip netns exec dq_tx taskset -c 15 bed/bin/daqiri-gateway gen \
        --dest 10.213.1.2:5000 --rate 0 --payload-size $((size - 42)) --flows 16 --src-port 6000 \
        --duration $((seconds + 30)) --batch 64 >/dev/null 2>&1 &
    sleep 1
}
stop_sender() {
    LD_LIBRARY_PATH=$PWD/bed/lib bed/bin/ip netns pids dq_tx 2>/dev/null | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
}

# One run of the benchmark: packets a second its threads received, or why it did not run.
run() { # device library queues round
    local log=$logs/$1-$2-$3-$4.log yaml=$logs/$1-$2-$3.yaml
    local binary=ours/bin/daqiri_bench_raw_gpudirect libs=$PWD/ours/lib:$PWD/daqiri/lib preload=""
    rm -f /dev/hugepages/*map_* 2>/dev/null || true
    if [[ $2 == DAQIRI ]]; then
        binary=daqiri/bin/daqiri_bench_raw_gpudirect libs=$PWD/daqiri/lib preload=$PWD/daqiri/dpdk_vdev_shim.so
        config "$yaml" "$3" 0000:00:00.0 "$(buf_size "$1" "$2")"
    else
        config "$yaml" "$3" "$(vdev "$1" "$3")" "$(buf_size "$1" "$2")"
    fi
    start_sender "$1"
    # shellcheck disable=SC2046 # in_bed prints a command prefix, or nothing
    # The bed's libraries last: `ip`'s, where the engines' own come first.
    DAQIRI_VDEV="0000:00:00.0=$(vdev "$1" "$3")" LD_LIBRARY_PATH=$libs:$cuda_dirs:$PWD/bed/lib timeout 120 \
        $(in_bed "$1") env ${preload:+LD_PRELOAD=$preload} "$binary" "$yaml" --seconds "$seconds" >"$log" 2>&1 ||
        { stop_sender; echo "failed: $(grep -m1 -E 'CRITICAL|rror' "$log" || tail -1 "$log")"; return; }
    stop_sender
    python3 - "$log" <<'PY'
import re, sys
lines = re.findall(r"^RX complete: .* queue=\d+ packets=(\d+) .* seconds=([0-9.]+)", open(sys.argv[1]).read(), re.M)
print(f"{sum(int(p) for p, _ in lines) / max(float(s) for _, s in lines):.0f}" if lines else "failed: no RX line")
PY
}

testpmd_rate() { # device queues
    local n=$2 log=$logs/testpmd-$1-$2.log
    start_sender "$1"
    # shellcheck disable=SC2046 # in_bed prints a command prefix, or nothing
    LD_LIBRARY_PATH=$PWD/daqiri/lib:$PWD/bed/lib timeout -s INT $((seconds + 3)) $(in_bed "$1") daqiri/bin/dpdk-testpmd -l "0-$n" \
        --main-lcore 0 --no-huge -m 1024 --no-pci --no-shconf --log-level=lib.eal:error --vdev "$(vdev "$1" "$n")" -- \
        --forward-mode=rxonly --burst=64 --nb-cores="$n" --rxq="$n" --txq="$n" --total-num-mbufs=$((16384 * n)) \
        --mbuf-size=$(($(buf_size "$1" DAQIRI) + 128)) --stats-period=1 </dev/null >"$log" 2>&1 || true
    stop_sender
    grep -o 'Rx-pps: *[0-9]*' "$log" | awk '{print $2}' | tail -n +3 |
        awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print 0}'
}

[[ " $devices " == *" af_packet "* ]] && { bed_down; bed_up; trap bed_down EXIT; }
echo "| device | RX queues | round | testpmd rxonly (pps) | libdaqiri (pps) | DAQIRI (pps) | libdaqiri / DAQIRI |"
echo "|---|---|---|---|---|---|---|"
for device in $devices; do
    for n in $queues; do
        ceiling=$(testpmd_rate "$device" "$n")
        for ((round = 1; round <= rounds; round++)); do
            ours=$(run "$device" libdaqiri "$n" "$round")
            theirs=$(run "$device" DAQIRI "$n" "$round")
            ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}')" "$ours" "$theirs" 2>/dev/null || echo n/a)
            echo "| $device | $n | $round | $ceiling | $ours | $theirs | $ratio |"
        done
    done
done
