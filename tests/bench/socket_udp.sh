#!/usr/bin/env bash
# Loss-free UDP receive rate of the gateway's socket backend versus sockperf
# and iperf3, between two network namespaces over a veth pair.
#
# For each payload size a binary search runs over the paced sender rate; a
# step passes when every datagram sent was delivered (gateway: handed to the
# application; sockperf: taken by its socket with no receive-buffer error;
# iperf3: 0 lost datagrams in its report). Then the gateway runs at 90% of its
# loss-free rate for STABLE_SECONDS and must lose nothing.
#
# Sender: `daqiri-gateway gen` (sendmmsg with UDP GSO, veth MTU 9000) for
# the gateway and sockperf; iperf3's server
# only receives from an iperf3 client (it needs the client's control
# connection), so its column uses `iperf3 -c -u` at the same rates and sizes.
#
# Usage (root): tests/bench/socket_udp.sh [--quick]
#   STEP_SECONDS (10), STEPS (7), STABLE_SECONDS (60), SIZES ("64 8192"),
#   STABLE_ONLY ("SIZE=PPS": skip the search, run only the stability check)
set -euo pipefail
cd "$(dirname "$0")/../.."

STEP_SECONDS=${STEP_SECONDS:-10}
STEPS=${STEPS:-7}
STABLE_SECONDS=${STABLE_SECONDS:-60}
SIZES=${SIZES:-"64 8192"}
if [[ ${1:-} == --quick ]]; then STEP_SECONDS=2 STEPS=4 STABLE_SECONDS=5; fi

[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
for tool in sockperf iperf3; do
    command -v $tool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $tool >&2
done
cargo build --release -q -p daqiri-gateway
GW=$PWD/target/release/daqiri-gateway
WORK=$(mktemp -d)
TX=dqbench_tx RX=dqbench_rx RX_IP=10.213.0.2 PORT=5000

old_rmem_max=$(sysctl -n net.core.rmem_max) old_rmem_default=$(sysctl -n net.core.rmem_default)
old_backlog=$(sysctl -n net.core.netdev_max_backlog)
cleanup() {
    ip netns pids $RX 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $TX 2>/dev/null || true
    ip netns del $RX 2>/dev/null || true
    sysctl -q -w net.core.rmem_max="$old_rmem_max" net.core.rmem_default="$old_rmem_default" net.core.netdev_max_backlog="$old_backlog"
    rm -rf "$WORK"
}
trap cleanup EXIT
cleanup 2>/dev/null || true
WORK=$(mktemp -d)
# Every receiver gets the same 64 MiB socket receive buffer, and the RPS
# backlog between the CPUs is deep enough not to drop before any socket.
sysctl -q -w net.core.rmem_max=67108864 net.core.rmem_default=67108864 net.core.netdev_max_backlog=65536
ip netns add $TX; ip netns add $RX
ip link add veth0 netns $TX type veth peer name veth1 netns $RX
ip -n $TX addr add 10.213.0.1/24 dev veth0; ip -n $RX addr add $RX_IP/24 dev veth1
for ns in $TX $RX; do ip -n $ns link set lo up; done
ip -n $TX link set veth0 mtu 9000 up; ip -n $RX link set veth1 mtu 9000 up
# The sender and its veth transmit run on CPU 0; receive processing (RPS)
# and every receiver run on CPU 1, so the receiver's own cost decides.
ip netns exec $RX sh -c "echo 2 > /sys/class/net/veth1/queues/rx-0/rps_cpus"
SENDER="ip netns exec $TX taskset -c 0"
RECEIVER="ip netns exec $RX taskset -c 1"

cat >"$WORK/gateway.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: socket
    rx_meta_buffers: 1024
    memory_regions:
    - { name: rx, kind: host, num_bufs: 32768, buf_size: 9000 }
    interfaces:
    - name: udp_rx
      socket_config: { mode: server, local_addr: "udp://$RX_IP:$PORT" }
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 64, timeout_us: 1000, memory_regions: [rx] }
YAML

udp_in() { ip netns exec $RX awk '/^Udp:/ && $2 ~ /^[0-9]/ {print $2, $6}' /proc/net/snmp; }

wait_bound() {
    for _ in $(seq 100); do
        ip netns exec $RX ss -Hlun | grep -q ":$PORT " && return 0
        sleep 0.05
    done
    echo "receiver did not bind" >&2; return 1
}

send() { # rate size seconds -> datagrams sent
    $SENDER "$GW" gen --dest $RX_IP:$PORT --rate "$1" --payload-size "$2" --duration "$3" \
        --batch 64 --summary-json "$WORK/gen.json" >/dev/null 2>&1
    python3 -c "import json;print(json.load(open('$WORK/gen.json'))['sent'])"
}

# Each step prints "lost delivered sent".
step_gateway() {
    $RECEIVER "$GW" run --config "$WORK/gateway.yaml" --exit-when-idle 1 \
        --summary-json "$WORK/gw.json" >/dev/null 2>"$WORK/gw.log" &
    local pid=$!
    wait_bound
    local sent; sent=$(send "$1" "$2" "$STEP_SECONDS")
    wait $pid
    local got; got=$(python3 -c "import json;print(json.load(open('$WORK/gw.json'))['consumed']['packets'])")
    echo $((sent - got)) "$got" "$sent"
}

step_sockperf() {
    $RECEIVER sockperf server -i $RX_IP -p $PORT >/dev/null 2>&1 &
    local pid=$!
    wait_bound
    read -r in0 _ < <(udp_in)
    local sent; sent=$(send "$1" "$2" "$STEP_SECONDS")
    sleep 1
    # InDatagrams counts datagrams the application has read.
    read -r in1 _ < <(udp_in)
    kill $pid; wait $pid 2>/dev/null || true
    local got=$((in1 - in0))
    echo $((sent - got)) "$got" "$sent"
}

step_iperf3() {
    $RECEIVER iperf3 -s -1 -p $PORT -B $RX_IP >/dev/null 2>&1 &
    local pid=$!
    sleep 0.3
    local bps; bps=$(python3 -c "print(int($1 * $2 * 8))")
    $SENDER iperf3 -c $RX_IP -p $PORT -u -l "$2" -b "$bps" -t "$STEP_SECONDS" -J >"$WORK/iperf.json" 2>/dev/null || true
    wait $pid 2>/dev/null || true
    python3 - "$WORK/iperf.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["end"]["sum"]
# The server's view: datagrams the client sent vs lost at the receiver.
print(s["lost_packets"], s["packets"] - s["lost_packets"], s["packets"])
PY
}

# Binary search for the highest rate with zero loss; prints the rate (pps).
search() { # receiver size max_rate
    local lo=0 hi=$3 best=0
    for _ in $(seq "$STEPS"); do
        local mid=$(((lo + hi) / 2))
        read -r lost got sent < <("step_$1" "$mid" "$2")
        # A step only counts when the sender really offered the rate (95%).
        local offered=$((mid * STEP_SECONDS * 95 / 100))
        local verdict=pass
        if ((lost != 0)); then verdict=fail; elif ((sent < offered)); then verdict="fail (sender short)"; fi
        echo "  $1 size=$2 rate=$mid pps: sent $sent delivered $got lost $lost: $verdict" >&2
        if [[ $verdict == pass ]]; then best=$mid lo=$mid; else hi=$mid; fi
    done
    echo $best
}

max_sender_rate() { # size -> pps the sender reaches unpaced into a sockperf sink
    $RECEIVER sockperf server -i $RX_IP -p $PORT >/dev/null 2>&1 &
    local pid=$!; wait_bound
    $SENDER "$GW" gen --dest $RX_IP:$PORT --rate 0 --payload-size "$1" --duration 3 --batch 64 \
        --summary-json "$WORK/gen.json" >/dev/null 2>&1
    kill $pid; wait $pid 2>/dev/null || true
    python3 -c "import json;print(int(json.load(open('$WORK/gen.json'))['rate_pps']))"
}

rss_outside_pools() { # pid -> "kB outside pools" "kB total"
    # Buffer pools are the mappings the engine marks MADV_DONTDUMP ("dd").
    taskset -c 0 python3 - "$1" <<'PY'
import sys
total = pool = rss = 0
for line in open(f"/proc/{sys.argv[1]}/smaps"):
    if line.startswith("Rss:"):
        rss = int(line.split()[1])
        total += rss
    elif line.startswith("VmFlags:") and " dd" in line:
        pool += rss
print(total - pool, total)
PY
}

{
    echo "| payload | sender max (pps) | gateway loss-free (pps) | sockperf loss-free (pps) | iperf3 loss-free (pps) | gateway / sockperf | gateway / iperf3 |"
    echo "|---|---|---|---|---|---|---|"
} >"$WORK/table.md"
# STABLE_ONLY="64=3344393" skips the search and checks stability at 90% of that rate.
if [[ -n ${STABLE_ONLY:-} ]]; then
    echo "${STABLE_ONLY%=*} ${STABLE_ONLY#*=}" >"$WORK/rates"
    SIZES=""
fi
for size in $SIZES; do
    max=$(max_sender_rate "$size")
    hi=$((max * 11 / 10))
    echo "payload $size: sender reaches $max pps unpaced; searching 0..$hi" >&2
    gw=$(search gateway "$size" $hi)
    sp=$(search sockperf "$size" $hi)
    ip3=$(search iperf3 "$size" $hi)
    ratio() { python3 -c "print(f'{$1/$2:.2f}x' if $2 else 'n/a')"; }
    echo "| $size B | $max | $gw | $sp | $ip3 | $(ratio "$gw" "$sp") | $(ratio "$gw" "$ip3") |" >>"$WORK/table.md"
    echo "| $size B | $max | $gw | $sp | $ip3 |" >&2
    echo "$size $gw" >>"$WORK/rates"
done

# Stability: 90% of the loss-free rate for STABLE_SECONDS, and memory outside the pools.
read -r size gw < <(head -1 "$WORK/rates")
rate=$((gw * 9 / 10))
$RECEIVER "$GW" run --config "$WORK/gateway.yaml" --exit-when-idle 1 --summary-json "$WORK/gw.json" >/dev/null 2>&1 &
wrapper=$!
wait_bound
gw_pid=$(ip netns pids $RX | head -1)
softnet_drops() { python3 -c "print(sum(int(l.split()[1], 16) for l in open('/proc/net/softnet_stat')))"; }
backlog0=$(softnet_drops)
sent=$(send "$rate" "$size" "$STABLE_SECONDS" &
       sleep $((STABLE_SECONDS / 2)); rss_outside_pools "$gw_pid" >"$WORK/rss"; wait)
sent=$(echo "$sent" | tail -1)
wait $wrapper
got=$(python3 -c "import json;print(json.load(open('$WORK/gw.json'))['consumed']['packets'])")
read -r outside total <"$WORK/rss"
backlog_drops=$(($(softnet_drops) - backlog0))
gw_drops=$(python3 -c "import json;d=json.load(open('$WORK/gw.json'))['ports'][0];print(d['port_drops'], [q['drops'] for q in d['rx_queues']])")

cat "$WORK/table.md"
echo
echo "stability: $size B at $rate pps for $STABLE_SECONDS s: sent $sent, delivered $got, lost $((sent - got))"
echo "  gateway drops (port, queues): $gw_drops; kernel backlog drops (all CPUs): $backlog_drops"
echo "gateway resident memory: $((total / 1024)) MiB total, $((outside / 1024)) MiB outside its buffer pool"
