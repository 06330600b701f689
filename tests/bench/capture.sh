#!/usr/bin/env bash
# Capture to disk during RX: the gateway's REST capture versus tcpdump -w and
# netsniff-ng on the same traffic, and dd to the same directory (the disk's
# limit), all in one run. Throughput = bytes in the file / (capture time +
# the time to get them onto the disk with fdatasync), for every tool alike.
#
# Usage (root): tests/bench/capture.sh [DIR]
#   DIR: where captures go (default /var/tmp/daqiri-capture-bench)
#   SECONDS_PER_RUN (10), RATE pps (60000), PAYLOAD bytes (8000)
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-/var/tmp/daqiri-capture-bench}
RUN=${SECONDS_PER_RUN:-10} RATE=${RATE:-60000} PAYLOAD=${PAYLOAD:-8000}
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
for tool in tcpdump netsniff-ng; do
    command -v $tool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $tool >&2
done
cargo build --release -q -p daqiri-gateway
GW=$PWD/target/release/daqiri-gateway
TX=dqcap_tx RX=dqcap_rx RX_IP=10.214.9.2 PORT=5000 ADMIN=127.0.0.1:9464
cleanup() {
    ip netns pids $RX 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $TX 2>/dev/null || true
    ip netns del $RX 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
cleanup
mkdir -p "$DIR"
ip netns add $TX; ip netns add $RX
ip link add veth0 netns $TX type veth peer name veth1 netns $RX
ip -n $TX addr add 10.214.9.1/24 dev veth0; ip -n $RX addr add $RX_IP/24 dev veth1
ip -n $TX link set veth0 mtu 9000 up; ip -n $RX link set veth1 mtu 9000 up; ip -n $RX link set lo up

cat >"$DIR/gateway.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: socket
    memory_regions:
    - { name: rx, kind: host, num_bufs: 16384, buf_size: 9000 }
    interfaces:
    - name: udp_rx
      socket_config: { mode: server, local_addr: "udp://$RX_IP:$PORT" }
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 64, timeout_us: 1000, memory_regions: [rx] }
YAML

now() { date +%s.%N; }
rate() { python3 -c "print(f'{$1 / ($3 - $2) / 1e6:.1f}')"; }  # bytes start end -> MB/s
send() { ip netns exec $TX "$GW" gen --dest $RX_IP:$PORT --rate "$RATE" --payload-size "$PAYLOAD" --duration "$RUN" >/dev/null 2>&1; }
start_gateway() {
    ip netns exec $RX "$GW" run --config "$DIR/gateway.yaml" --capture-dir "$DIR/out" --capture-free-space-floor-mb 256 \
        --summary-json "$DIR/gw.json" >/dev/null 2>&1 &
    GW_PID=$!
    for _ in $(seq 100); do ip netns exec $RX curl -sf http://$ADMIN/readyz >/dev/null && return; sleep 0.1; done
    echo "gateway did not start" >&2; exit 1
}
stop_gateway() { kill -TERM $GW_PID; wait $GW_PID || true; }

# dd: the disk's own limit.
t0=$(now); dd if=/dev/zero of="$DIR/dd.bin" bs=1M count=$((RATE * PAYLOAD * RUN / 1048576)) conv=fdatasync status=none; t1=$(now)
dd_bytes=$(stat -c %s "$DIR/dd.bin"); dd_rate=$(rate "$dd_bytes" "$t0" "$t1"); rm -f "$DIR/dd.bin"

# The gateway capturing what it receives.
start_gateway
t0=$(now)
ip netns exec $RX curl -sf -X POST http://$ADMIN/api/v1/captures -H 'Content-Type: application/json' \
    -d '{"format": "pcap", "interface": "udp_rx", "name": "bench"}' >/dev/null
send
info=$(ip netns exec $RX curl -sf -X DELETE http://$ADMIN/api/v1/captures/1)
sync -f "$DIR/out/bench.pcap"; t1=$(now)
stop_gateway
gw_bytes=$(stat -c %s "$DIR/out/bench.pcap"); gw_rate=$(rate "$gw_bytes" "$t0" "$t1")
gw_capture_drops=$(python3 -c "import json,sys;print(json.loads(sys.argv[1])['capture_drops'])" "$info")
gw_rx_drops=$(python3 -c "import json;p=json.load(open('$DIR/gw.json'))['ports'][0];print(sum(p['port_drops'].values())+sum(sum(q['drops'].values()) for q in p['rx_queues']))")
gw_packets=$(python3 -c "import json,sys;print(json.loads(sys.argv[1])['packets'])" "$info")
rm -rf "$DIR/out"

# tcpdump and netsniff-ng on the receiving interface, with the gateway as the sink (no capture).
capture_with() { # name command...
    local name=$1; shift
    start_gateway
    ip netns exec $RX "$@" >"$DIR/$name.log" 2>&1 &
    local pid=$!
    sleep 1
    local t0; t0=$(now)
    send
    sleep 0.5
    kill -INT $pid; wait $pid || true
    sync -f "$DIR/$name.pcap"; local t1; t1=$(now)
    stop_gateway
    echo "$(stat -c %s "$DIR/$name.pcap") $t0 $t1"
}
read -r td_bytes a b < <(capture_with tcpdump tcpdump -i veth1 -w "$DIR/tcpdump.pcap" -s 262144 udp port $PORT)
td_rate=$(rate "$td_bytes" "$a" "$b"); td_drops=$(grep -o '[0-9]* packets dropped by kernel' "$DIR/tcpdump.log" || echo "?")
read -r ns_bytes a b < <(capture_with netsniff netsniff-ng --in veth1 --out "$DIR/netsniff.pcap" --silent)
ns_rate=$(rate "$ns_bytes" "$a" "$b"); ns_drops=$(grep -iE 'drop' "$DIR/netsniff.log" | tail -1 || echo "?")
rm -f "$DIR"/*.pcap

echo "| tool | bytes on disk | MB/s to disk | vs dd | drops |"
echo "|---|---|---|---|---|"
echo "| dd (disk limit) | $dd_bytes | $dd_rate | 1.00 | |"
echo "| daqiri-gateway capture | $gw_bytes | $gw_rate | $(python3 -c "print(f'{$gw_rate/$dd_rate:.2f}')") | $gw_capture_drops capture drops, $gw_rx_drops RX drops, $gw_packets packets |"
echo "| tcpdump -w | $td_bytes | $td_rate | $(python3 -c "print(f'{$td_rate/$dd_rate:.2f}')") | $td_drops |"
echo "| netsniff-ng | $ns_bytes | $ns_rate | $(python3 -c "print(f'{$ns_rate/$dd_rate:.2f}')") | $ns_drops |"
echo "offered: $RATE pps x $PAYLOAD B for $RUN s ($(python3 -c "print(f'{$RATE*$PAYLOAD/1e6:.0f}')") MB/s of payload)"
