#!/usr/bin/env bash
# UDP receive on the socket engines, the gateway against DAQIRI itself
# (`daqiri_bench_socket`, built by tests/reference/build.sh), on one DAQIRI
# config file, one wire-like sender (`daqiri-gateway gen`, tests/bench/lib.sh's
# veth_bed: two namespaces, a veth of MTU 9000 so 8 KiB datagrams are single
# frames), the same cores, one run each, alternating.
#
# The config is DAQIRI's own example's shape (daqiri_bench_socket_udp_tx_rx.yaml,
# server side): one RX queue on its core, its application thread on another
# (`socket_bench_server`, which the gateway ignores as a section that is not
# `daqiri:`), batch_size 64 and the payload size as max_payload_size.
# Delivered: DAQIRI's "recv_packets" (its bench's application thread) and the
# gateway's "consumed" packets (its application loop), both after the sender
# stopped. DAQIRI's UDP receive thread calls recvmmsg for 32 datagrams with
# no MSG_WAITFORONE and no timeout, so it returns only once 32 arrived: the
# last 1 to 31 of a stream wait in the socket until more come. Those count
# as held back, not lost (the fixed-rate table shows them as its shortfall).
#
# For each payload size: each receiver's loss-free rate (bisection, as in
# socket_udp.sh), then the delivered fraction at fixed offered rates, ROUNDS
# rounds alternating gateway and DAQIRI.
#
# TCP (`tcp://` in the same config): nothing is lost on a stream, its sender
# slows to what the receiver takes, so each receiver's figure is the goodput
# of `gen --proto tcp` unpaced (chunks of each size), ROUNDS rounds
# alternating; a receiver that delivered fewer bytes than were sent is named.
# Each round also runs the sender into a plain reader (Python, 1 MiB per
# recv): when it gets no more than the two, the sender is what limits.
#
# Usage (root): tests/bench/daqiri_socket.sh [--quick]
#   PROTOS ("udp tcp"), SIZES ("64 1024 8192"), RATES (offered pps, "100000 200000 400000"),
#   STEP_SECONDS (4), STEPS (7), ROUNDS (2), SENDER_CPUS (0), QUEUE_CPU (1),
#   APP_CPU (the queue's), RPS_CPU (the core the receiver's kernel receive
#   path runs on: the queue's, so that core decides; another core takes that
#   work off it); GW and DAQIRI_BENCH run prebuilt binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh

STEP_SECONDS=${STEP_SECONDS:-4}
STEPS=${STEPS:-7}
ROUNDS=${ROUNDS:-2}
# DAQIRI 2026.7's recvmmsg batch (src/engines/socket: kUdpRxBatch).
DAQIRI_RECVMMSG=32
PROTOS=${PROTOS:-"udp tcp"}
SIZES=${SIZES:-"64 1024 8192"}
RATES=${RATES:-"100000 200000 400000"}
if [[ ${1:-} == --quick ]]; then STEP_SECONDS=2 STEPS=4 ROUNDS=1; fi
SENDER_CPUS=${SENDER_CPUS:-0}
QUEUE_CPU=${QUEUE_CPU:-1}
APP_CPU=${APP_CPU:-$QUEUE_CPU}
RPS_CPU=${RPS_CPU:-$QUEUE_CPU}

[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
command -v ethtool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ethtool >&2
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway
    GW=$PWD/target/release/daqiri-gateway
fi
if [[ -z ${DAQIRI_BENCH:-} ]]; then
    DAQIRI_BENCH=$(tests/reference/build.sh daqiri)/bin/daqiri_bench_socket
fi
daqiri_reference_env "$DAQIRI_BENCH"

TX=dqvs_tx RX=dqvs_rx RX_IP=10.214.0.2 PORT=5001
WORK=$(mktemp -d)
old_rmem_max=$(sysctl -n net.core.rmem_max) old_rmem_default=$(sysctl -n net.core.rmem_default)
cleanup() {
    for ns in $TX $RX; do
        ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del $ns 2>/dev/null || true
    done
    sysctl -q -w net.core.rmem_max="$old_rmem_max" net.core.rmem_default="$old_rmem_default"
    rm -rf "$WORK"
}
trap cleanup EXIT
cleanup 2>/dev/null || true
WORK=$(mktemp -d)
# Both engines leave the socket buffer at the system default: the same for both.
sysctl -q -w net.core.rmem_max=67108864 net.core.rmem_default=67108864
veth_bed $TX $RX 10.214.0.1 $RX_IP "$RPS_CPU" 9000
SENDER="ip netns exec $TX taskset -c $SENDER_CPUS"
RECEIVER="ip netns exec $RX taskset -c $QUEUE_CPU,$APP_CPU"

config() { # size [proto] -> the config file both run
    local proto=${2:-udp}
    local file=$WORK/${proto}_$1.yaml
    cat >"$file" <<YAML
%YAML 1.2
---
daqiri:
  cfg:
    version: 1
    stream_type: "socket"
    master_core: $APP_CPU
    log_level: "warn"
    memory_regions:
    - { name: "DATA_RX", kind: "host", affinity: 0, num_bufs: 16384, buf_size: 9216 }
    interfaces:
    - name: udp_server
      address: $RX_IP
      socket_config:
        mode: server
        local_addr: "$proto://$RX_IP:$PORT"
        max_payload_size: 9000
      rx:
        queues:
        - { name: "Server_RX_Queue", id: 0, cpu_core: $QUEUE_CPU, batch_size: 64, memory_regions: ["DATA_RX"] }

socket_bench_server:
  server: true
  send: false
  receive: true
  cpu_core: $APP_CPU
  iterations: 0
  message_size: $1
  server_address: $RX_IP
  server_port: $PORT
YAML
    echo "$file"
}

gen() { # rate size -> datagrams sent
    $SENDER "$GW" gen --dest $RX_IP:$PORT --rate "$1" --payload-size "$2" --duration "$STEP_SECONDS" --batch 64 \
        --summary-json "$WORK/gen.json" >/dev/null 2>&1
    python3 -c "import json;print(json.load(open('$WORK/gen.json'))['sent'])"
}

# One receiver run while a sender sends: prints "sent delivered". The
# sender is the command after the size (gen or gen_tcp, printing what it
# sent); delivered counts packets on UDP, bytes on TCP, as each reports them.
receive_gateway() { # proto size sender...
    local proto=$1 size=$2 unit=packets
    shift 2
    [[ $proto == tcp ]] && unit=bytes
    $RECEIVER "$GW" run --config "$(config "$size" "$proto")" --no-admin --exit-when-idle 1 \
        --summary-json "$WORK/gw.json" >/dev/null 2>"$WORK/gw.log" &
    local pid=$!
    wait_udp_bound $RX $PORT "${proto:0:1}"
    local sent; sent=$("$@")
    wait $pid
    echo "$sent" "$(python3 -c "import json;print(json.load(open('$WORK/gw.json'))['consumed']['$unit'])")"
}

receive_daqiri() { # proto size sender...
    local proto=$1 size=$2 unit=packets
    shift 2
    [[ $proto == tcp ]] && unit=bytes
    # It runs for whole seconds: the sender's time, and more to drain.
    $RECEIVER "$DAQIRI_BENCH" "$(config "$size" "$proto")" --mode server --seconds $((STEP_SECONDS + 2)) \
        >"$WORK/daqiri.out" 2>"$WORK/daqiri.log" &
    local pid=$!
    wait_udp_bound $RX $PORT "${proto:0:1}"
    local sent; sent=$("$@")
    wait $pid || { echo "daqiri_bench_socket failed:" >&2; tail -5 "$WORK/daqiri.log" >&2; }
    echo "$sent" "$(sed -n "s/.*recv_$unit=\([0-9]*\).*/\1/p" "$WORK/daqiri.out" | head -1)"
}

# The search's steps (rate size) and the TCP runs (size).
step_gateway() { receive_gateway udp "$2" gen "$1" "$2"; }
step_daqiri() { receive_daqiri udp "$2" gen "$1" "$2"; }
tcp_gateway() { receive_gateway tcp "$1" gen_tcp "$1"; }
tcp_daqiri() { receive_daqiri tcp "$1" gen_tcp "$1"; }
# The ceiling: the same sender into a reader that does nothing but read,
# 1 MiB per recv, on the queue's core.
tcp_plain_reader() { # size -> bytes sent
    ip netns exec $RX taskset -c "$QUEUE_CPU" python3 -c "
import socket
listener = socket.create_server(('$RX_IP', $PORT))
connection, _ = listener.accept()
buffer = memoryview(bytearray(1 << 20))
while connection.recv_into(buffer):
    pass" &
    local reader=$!
    wait_udp_bound $RX $PORT t
    gen_tcp "$1"
    wait "$reader"
}

sender_max() { # size -> pps gen reaches unpaced, into a sink that reads nothing
    ip netns exec $RX python3 -c "import socket,time;s=socket.socket(2,2);s.bind(('$RX_IP',$PORT));time.sleep($STEP_SECONDS+1)" &
    local sink=$!
    wait_udp_bound $RX $PORT
    echo $(($(gen 0 "$1") / STEP_SECONDS))
    wait "$sink" 2>/dev/null || true
}

# TCP: bytes gen sent unpaced for STEP_SECONDS.
gen_tcp() { # size -> bytes sent
    $SENDER "$GW" gen --proto tcp --dest $RX_IP:$PORT --rate 0 --payload-size "$1" --duration "$STEP_SECONDS" \
        --summary-json "$WORK/gen.json" >/dev/null 2>&1
    python3 -c "import json;print(json.load(open('$WORK/gen.json'))['payload_bytes'])"
}

gbps() { python3 -c "print(f'{$1*8/$STEP_SECONDS/1e9:.2f}')"; }

ratio() { python3 -c "print(f'{$1/$2:.2f}x' if $2 else 'n/a')"; }
fraction() { python3 -c "print(f'{$2/$1:.3f}' if $1 else 'n/a')"; }

lossless="$WORK/lossless.md" fixed="$WORK/fixed.md" tcp="$WORK/tcp.md"
echo "| payload | gateway loss-free (pps) | DAQIRI loss-free (pps) | gateway / DAQIRI | gen unpaced (pps) |" >"$lossless"
echo "|---|---|---|---|---|" >>"$lossless"
echo "| payload | offered (pps) | round | gateway delivered | DAQIRI delivered |" >"$fixed"
echo "|---|---|---|---|---|" >>"$fixed"
echo "| chunk | round | gateway (Gb/s) | DAQIRI (Gb/s) | gateway / DAQIRI | plain reader (Gb/s) |" >"$tcp"
echo "|---|---|---|---|---|---|" >>"$tcp"
for size in $SIZES; do
    [[ " $PROTOS " == *" udp "* ]] || continue
    max=$(sender_max "$size")
    echo "$size B: gen reaches $max pps unpaced" >&2
    gw=$(search gateway "$size" "$max")
    dq=$(search daqiri "$size" "$max" $((DAQIRI_RECVMMSG - 1)))
    echo "| $size B | $gw | $dq | $(ratio "$gw" "$dq") | $max |" | tee -a "$lossless" >&2
    for rate in $RATES; do
        for ((round = 1; round <= ROUNDS; round++)); do
            read -r gs gd < <(step_gateway "$rate" "$size")
            read -r ds dd < <(step_daqiri "$rate" "$size")
            echo "| $size B | $rate | $round | $(fraction "$gs" "$gd") | $(fraction "$ds" "$dd") |" | tee -a "$fixed" >&2
        done
    done
done
for size in $SIZES; do
    [[ " $PROTOS " == *" tcp "* ]] || continue
    for ((round = 1; round <= ROUNDS; round++)); do
        read -r gs gd < <(tcp_gateway "$size")
        read -r ds dd < <(tcp_daqiri "$size")
        ((gd < gs)) && echo "  gateway delivered $gd of $gs bytes ($size B chunks)" >&2
        ((dd < ds)) && echo "  DAQIRI delivered $dd of $ds bytes ($size B chunks)" >&2
        ps=$(tcp_plain_reader "$size")
        echo "| $size B | $round | $(gbps "$gs") | $(gbps "$ds") | $(ratio "$gs" "$ds") | $(gbps "$ps") |" | tee -a "$tcp" >&2
    done
done
echo
if [[ " $PROTOS " == *" udp "* ]]; then
    echo "UDP loss-free rate (${STEPS} bisections of ${STEP_SECONDS} s):"
    cat "$lossless"
    echo
    echo "UDP delivered fraction at fixed offered rates (${STEP_SECONDS} s each, alternating):"
    cat "$fixed"
    echo
fi
if [[ " $PROTOS " == *" tcp "* ]]; then
    echo "TCP goodput of an unpaced sender (${STEP_SECONDS} s each, alternating):"
    cat "$tcp"
fi
