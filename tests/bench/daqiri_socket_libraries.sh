#!/usr/bin/env bash
# DAQIRI's own socket benchmark, one source, linked twice: once against
# DAQIRI 2026.7 (tests/reference/build.sh daqiri) and once against libdaqiri
# (our engine, tests/capi/daqiri_programs.sh builds it), run alternately with
# the same config: DAQIRI's UDP and TCP example configs, `iterations: 0` (run
# for the time given) and the message size under test. Both sides of each
# config send and receive as fast as they can (the benchmark's unpaced mode).
# Reports what each side received per second (Mb/s: for TCP the benchmark
# counts reads, not messages) and, for UDP, the share of the messages the
# other side sent that arrived.
#   tests/bench/daqiri_socket_libraries.sh   here, as root: cores folded onto
#       this machine's, each run in a network namespace of its own
#       (ROUNDS=3 SECONDS_EACH=5 SIZES="64 1024")
#   tests/bench/daqiri_socket_libraries.sh --pack [DIR]   here: packs both
#       builds, DAQIRI's configs as they ship (cores 3 and 7 to 10) and this
#       script as DIR/run.sh (default target/daqiri-socket-bench), for `carry`
#   DIR/run.sh   on the 16-core GPU machine (no iproute2 there: its loopback)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${ROUNDS:-3} seconds=${SECONDS_EACH:-5} sizes=${SIZES:-64 1024}

# DAQIRI's example config for `proto` with `size`-byte messages, run by time;
# with `fold`, its cores folded onto this machine's.
config() { # source proto size out fold
    local example=$1/daqiri_bench_socket_$2_tx_rx.yaml
    if [[ $5 == fold ]]; then
        "$here/../capi/fold_cores.py" "$example" "$4" iterations=0 message_size="$3"
    else
        sed -E -e 's/\b(iterations:\s*)[0-9]+/\10/' -e "s/\b(message_size:\s*)[0-9]+/\1$3/" "$example" > "$4"
    fi
}

if [[ ${1:-} == --pack ]]; then
    cd "$here/../.."
    source tests/bench/lib.sh
    out=${2:-target/daqiri-socket-bench}
    tests/capi/daqiri_programs.sh >/dev/null
    release=$(gateway/capi/package.sh target/capi/prefix-cuda-release --release --features cuda)
    theirs=$(tests/reference/build.sh daqiri)/bin/daqiri_bench_socket
    rm -rf "$out" && mkdir -p "$out/ours/lib" "$out/daqiri/lib" "$out/configs"
    install -m 0755 --strip target/capi/daqiri-programs/build/examples/daqiri_bench_socket "$out/ours/"
    cp -L "$release/lib/libdaqiri.so.1" "$out/ours/lib/" && strip --strip-unneeded "$out/ours/lib/libdaqiri.so.1"
    install -m 0755 --strip "$theirs" "$out/daqiri/"
    # DPDK's and rdma-core's libraries, which the GPU machine lacks (not
    # libc's, not CUDA's: it has those).
    LD_LIBRARY_PATH=$(tests/reference/build.sh dpdk)/lib:$(tests/reference/build.sh cuda)/lib/stubs \
        copy_linked_libraries "$out/daqiri/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu' "$theirs"
    strip --strip-unneeded "$out"/daqiri/lib/*
    source=$(ls -d target/capi/daqiri-programs/daqiri-*)/examples
    for proto in udp tcp; do
        for size in $sizes; do config "$source" $proto "$size" "$out/configs/$proto-$size.yaml" as-shipped; done
    done
    cp "$0" "$out/run.sh"
    echo "daqiri_socket_libraries: packed in $out ($(du -sh "$out" | cut -f1))" >&2
    exit 0
fi

if [[ -d $here/ours && -d $here/daqiri ]]; then
    # Packed, on the GPU machine: its own loopback, DAQIRI's cores as shipped.
    cd "$here"
    ours=(env "LD_LIBRARY_PATH=$PWD/ours/lib" ours/daqiri_bench_socket)
    theirs=(env "LD_LIBRARY_PATH=$PWD/daqiri/lib" daqiri/daqiri_bench_socket)
    work=$(mktemp -d)
    isolate=()
    prepare() { cp "configs/$1-$2.yaml" "$3"; }
else
    cd "$here/../.."
    source tests/bench/lib.sh
    [[ $EUID == 0 ]] || { echo "daqiri_socket_libraries: needs root (network namespaces)" >&2; exit 1; }
    tests/capi/daqiri_programs.sh >/dev/null
    # The programs link the test build of libdaqiri (its RUNPATH); the optimised
    # one goes first on the library path, as DAQIRI's own is a release build.
    release=$(gateway/capi/package.sh target/capi/prefix-cuda-release --release --features cuda)
    theirs=$(tests/reference/build.sh daqiri)/bin/daqiri_bench_socket
    daqiri_reference_env "$theirs"
    theirs=("$theirs")
    ours=(env "LD_LIBRARY_PATH=$release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        target/capi/daqiri-programs/build/examples/daqiri_bench_socket)
    source=$(ls -d target/capi/daqiri-programs/daqiri-*)/examples
    work=target/bench/daqiri-socket-libraries
    mkdir -p "$work"
    isolate=(unshare --net bash -c 'ip link set lo up && exec "$@"' run)
    prepare() { config "$source" "$1" "$2" "$3" fold; }
fi

run() { # config command...
    local log=$work/run.log config=$1
    shift
    "${isolate[@]}" timeout 60 "$@" "$config" --seconds "$seconds" --mode both > "$log" 2>&1 ||
        { tail -5 "$log" >&2; return 1; }
    python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
side = {s: dict(kv.split("=") for kv in f.split()) for s, f in re.findall(r"^(Server|Client) complete: (.*)$", text, re.M)}
rate = lambda s: int(side[s]["recv_bytes"]) * 8 / float(side[s]["seconds"]) / 1e6
share = lambda rx, tx: int(side[rx]["recv_packets"]) / max(1, int(side[tx]["sent_packets"]))
print(f"{rate('Server'):.1f} {rate('Client'):.1f} {share('Server', 'Client'):.3f} {share('Client', 'Server'):.3f}")
PY
}

echo "| transport | message | round | library | server receives (Mb/s) | client receives (Mb/s) | UDP delivered (server, client) |"
echo "|---|---|---|---|---|---|---|"
for proto in udp tcp; do
    for size in $sizes; do
        cfg=$work/$proto-$size.yaml
        prepare "$proto" "$size" "$cfg"
        for ((round = 1; round <= rounds; round++)); do
            for library in libdaqiri DAQIRI; do
                binary=("${ours[@]}")
                [[ $library == DAQIRI ]] && binary=("${theirs[@]}")
                read -r server client to_server to_client < <(run "$cfg" "${binary[@]}" || echo "failed - - -")
                delivered="$to_server, $to_client"
                [[ $proto == tcp ]] && delivered="(a stream)"
                echo "| $proto | $size B | $round | $library | $server | $client | $delivered |"
            done
        done
    done
done
