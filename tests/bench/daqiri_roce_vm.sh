#!/usr/bin/env bash
# DAQIRI's RDMA engine against our RoCE backend on the same soft-RoCE device,
# inside the VM test bed (software emulation: the ratio means something, the
# rates nothing, and only the ratio goes into docs/benchmarks.md):
#   cargo build --release -p daqiri --features rdma --bench roce_bw   (host)
#   tests/reference/build.sh daqiri                                  (host, once)
#   tests/vm/run.sh -- tests/bench/daqiri_roce_vm.sh
# One direction, RC SENDs of SIZE bytes (65536) from a client to a server
# port on rxe0 (10.77.0.1). DAQIRI: its own daqiri_bench_rdma (--mode both:
# its client and server threads in one process, as its example runs them)
# on the config below, run for SHORT and LONG seconds (5 and 15); its rate
# is the difference of the bytes received over the difference of the
# times, so its connection set-up (inside its timing) cancels out. Ours:
# roce_bw send (a client and a server port of one engine), MESSAGES (40000)
# from first to last received. Alternating, ROUNDS (3) times.
# DAQIRI 2026.7 connects RC with retry_count 0, and on soft-RoCE in the VM the
# first SEND's ACK misses the local-ACK timeout, which then ends the
# connection (docs/benchmarks.md). So DAQIRI runs with rdma_retry_shim.c
# preloaded, which gives its connections the retry count ours and perftest
# use (7); its log must show that count on both queue pairs.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/vm/guest.sh
source tests/bench/lib.sh
tests/vm/soft_roce.sh >/dev/null
SIZE=${SIZE:-65536}
MESSAGES=${MESSAGES:-40000}
SHORT=${SHORT:-5} LONG=${LONG:-15}
ROUNDS=${ROUNDS:-3}
DEPTH=${DEPTH:-128}
ours=${ROCE_BW:-$(ls -t target/release/deps/roce_bw-* | grep -v '\.d$' | head -1)}
daqiri=${DAQIRI:-$(tests/reference/build.sh daqiri)}
daqiri_reference_env "$daqiri/bin/daqiri_bench_rdma"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -shared -fPIC -O2 -o "$work/rdma_retry_shim.so" tests/bench/rdma_retry_shim.c -ldl

# Its example's shape (daqiri_bench_rdma_tx_rx.yaml) on the VM's two CPUs and
# one device, host memory (no GPU here), one direction.
region() { printf '    - {name: %s, kind: host, affinity: 0, num_bufs: %d, buf_size: %d}\n' "$1" $((2 * DEPTH)) "$SIZE"; }
port() { # name mode local_addr core
    cat <<PORT
    - name: $1
      address: 10.77.0.1
      socket_config: {mode: $2, local_addr: "$3"}
      roce_config: {transport_mode: RC}
      tx: {queues: [{name: ${1}_tx, id: 0, batch_size: 1, cpu_core: $4}]}
      rx: {queues: [{name: ${1}_rx, id: 0, batch_size: 1, cpu_core: $4}]}
PORT
}
{
    printf 'daqiri:\n  cfg:\n    version: 1\n    stream_type: "socket"\n    master_core: 0\n    log_level: "info"\n'
    printf '    memory_regions:\n'
    for name in DATA_RX_GPU_SERVER DATA_TX_GPU_SERVER DATA_TX_GPU_CLIENT DATA_RX_GPU_CLIENT; do region "$name"; done
    printf '    interfaces:\n'
    port my_client client "roce://10.77.0.1" 1
    port my_server server "roce://10.77.0.1:18792" 0
    cat <<BENCH
rdma_bench_server: {server: true, server_address: 10.77.0.1, server_port: 18792, message_size: $SIZE,
  send: false, receive: true, rx_depth: $DEPTH, cpu_core: 0}
rdma_bench_client: {server: false, client_address: 10.77.0.1, server_address: 10.77.0.1, server_port: 18792,
  message_size: $SIZE, send: true, receive: false, tx_depth: $DEPTH, cpu_core: 1}
BENCH
} >"$work/rdma.yaml"

daqiri_run() { # seconds: "recv_bytes seconds" of its server
    LD_PRELOAD="$work/rdma_retry_shim.so" "$daqiri/bin/daqiri_bench_rdma" "$work/rdma.yaml" --seconds "$1" --mode both \
        >"$work/daqiri.log" 2>&1 || { cat "$work/daqiri.log" >&2; return 1; }
    (($(grep -c 'retry_cnt=7 ' "$work/daqiri.log") == 2)) ||
        { echo "the shim did not give both queue pairs retry_cnt 7:" >&2; grep 'rdma-qp' "$work/daqiri.log" >&2; return 1; }
    local result
    result=$(sed -n 's/^Server complete: .* recv_bytes=\([0-9]*\) seconds=\([0-9.]*\).*/\1 \2/p' "$work/daqiri.log")
    [[ -n $result && ${result%% *} != 0 ]] ||
        { echo "daqiri_bench_rdma received nothing in $1 s:" >&2; cat "$work/daqiri.log" >&2; return 1; }
    echo "$result"
}
for round in $(seq "$ROUNDS"); do
    read -r short_bytes short_seconds <<<"$(daqiri_run "$SHORT")"
    read -r long_bytes long_seconds <<<"$(daqiri_run "$LONG")"
    theirs=$(python3 -c "import sys; b1,t1,b2,t2=map(float,sys.argv[1:]); print(f'{(b2-b1)/(t2-t1)/1e6:.2f}')" \
        "$short_bytes" "$short_seconds" "$long_bytes" "$long_seconds")
    ours_rate=$("$ours" send 10.77.0.1 18793 "$MESSAGES" "$SIZE" | tail -1 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])')
    python3 -c "import sys; o,t=map(float,sys.argv[2:4]); print(f'round {sys.argv[1]}: SEND {int(sys.argv[4])} B  DAQIRI {t:8.2f} MB/s  gateway {o:8.2f} MB/s  gateway/DAQIRI {o/t:.2f}  (emulation: ratio only)')" \
        "$round" "$ours_rate" "$theirs" "$SIZE"
done
