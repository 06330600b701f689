#!/usr/bin/env bash
# DAQIRI's own socket benchmark, one source, linked twice: once against
# DAQIRI 2026.7 (tests/reference/build.sh daqiri) and once against libdaqiri
# (our engine, tests/capi/daqiri_programs.sh builds it), run alternately with
# the same config: DAQIRI's UDP and TCP example configs, cores folded onto
# this machine's, `iterations: 0` (run for the time given) and the message
# size under test. Both sides of each config send and receive as fast as
# they can (the benchmark's unpaced mode); each run in a network namespace
# of its own. Reports what each side received per second (Mb/s: for TCP
# the benchmark counts reads, not messages) and, for UDP, the share of the
# messages the other side sent that arrived.
#   tests/bench/daqiri_socket_libraries.sh   (as root; ROUNDS=3 SECONDS_EACH=5 SIZES="64 1024")
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/lib.sh
rounds=${ROUNDS:-3} seconds=${SECONDS_EACH:-5} sizes=${SIZES:-64 1024}
[[ $EUID == 0 ]] || { echo "daqiri_socket_libraries: needs root (network namespaces)" >&2; exit 1; }
tests/capi/daqiri_programs.sh >/dev/null
# The programs link the test build of libdaqiri (its RUNPATH); the optimised
# one goes first on the library path, as DAQIRI's own is a release build.
release=$(gateway/capi/package.sh target/capi/prefix-cuda-release --release --features cuda)
theirs=$(tests/reference/build.sh daqiri)/bin/daqiri_bench_socket
daqiri_reference_env "$theirs"
ours=(env "LD_LIBRARY_PATH=$release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    target/capi/daqiri-programs/build/examples/daqiri_bench_socket)
source=$(ls -d target/capi/daqiri-programs/daqiri-*)
work=target/bench/daqiri-socket-libraries
mkdir -p "$work"

# DAQIRI's example config for `proto`, with `size`-byte messages, run by time.
config() { # proto size out
    tests/capi/fold_cores.py "$source/examples/daqiri_bench_socket_$1_tx_rx.yaml" "$3" iterations=0 message_size="$2"
}

# One run: "server_rate client_rate server_delivered client_delivered".
run() { # config command...
    local log=$work/run.log config=$1
    shift
    unshare --net bash -c 'ip link set lo up && exec timeout 60 "$@"' run "$@" "$config" --seconds "$seconds" --mode both \
        > "$log" 2>&1 || { tail -5 "$log" >&2; return 1; }
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
        config "$proto" "$size" "$cfg"
        for ((round = 1; round <= rounds; round++)); do
            for library in libdaqiri DAQIRI; do
                binary=("${ours[@]}")
                [[ $library == DAQIRI ]] && binary=("$theirs")
                read -r server client to_server to_client < <(run "$cfg" "${binary[@]}")
                delivered="$to_server, $to_client"
                [[ $proto == tcp ]] && delivered="(a stream)"
                echo "| $proto | $size B | $round | $library | $server | $client | $delivered |"
            done
        done
    done
done
