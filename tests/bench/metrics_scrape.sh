#!/usr/bin/env bash
# What scraping /metrics at 10 Hz costs the receive path: the same 10 s of
# traffic twice, without and with a scraper, comparing delivered packets and
# the gateway's CPU time per delivered packet.
#
# Usage (root): tests/bench/metrics_scrape.sh    RATE (1000000 pps), PAYLOAD (64 B), RUN (10 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
RATE=${RATE:-1000000} PAYLOAD=${PAYLOAD:-64} RUN=${RUN:-10}
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
cargo build --release -q -p daqiri-gateway
GW=$PWD/target/release/daqiri-gateway
TX=dqm_tx RX=dqm_rx RX_IP=10.214.8.2 PORT=5000 ADMIN=127.0.0.1:9464
WORK=$(mktemp -d)
cleanup() {
    ip netns pids $RX 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $TX 2>/dev/null || true; ip netns del $RX 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
ip netns del $TX 2>/dev/null || true; ip netns del $RX 2>/dev/null || true
ip netns add $TX; ip netns add $RX
ip link add veth0 netns $TX type veth peer name veth1 netns $RX
ip -n $TX addr add 10.214.8.1/24 dev veth0; ip -n $RX addr add $RX_IP/24 dev veth1
ip -n $TX link set veth0 up; ip -n $RX link set veth1 up; ip -n $RX link set lo up
cat >"$WORK/gw.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: socket
    rx_meta_buffers: 1024
    memory_regions:
    - { name: rx, kind: host, num_bufs: 32768, buf_size: 2048 }
    interfaces:
    - name: udp_rx
      socket_config: { mode: server, local_addr: "udp://$RX_IP:$PORT" }
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 64, timeout_us: 1000, memory_regions: [rx] }
YAML

run_once() { # scrape: 0|1 -> "delivered cpu_seconds"
    ip netns exec $RX "$GW" run --config "$WORK/gw.yaml" --exit-when-idle 1 --summary-json "$WORK/s.json" >/dev/null 2>&1 &
    local wrapper=$!
    for _ in $(seq 100); do ip netns exec $RX curl -sf http://$ADMIN/readyz >/dev/null && break; sleep 0.1; done
    local pid; pid=$(ip netns pids $RX | head -1)
    local scraper=""
    if [[ $1 == 1 ]]; then
        ( while sleep 0.1; do ip netns exec $RX curl -sf http://$ADMIN/metrics >/dev/null || true; done ) &
        scraper=$!
    fi
    local ticks=$(getconf CLK_TCK) cpu0 cpu1
    cpu0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    ip netns exec $TX "$GW" gen --dest $RX_IP:$PORT --rate "$RATE" --payload-size "$PAYLOAD" --duration "$RUN" >/dev/null 2>&1
    sleep 0.5
    cpu1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    [[ -n $scraper ]] && kill $scraper
    wait $wrapper || true
    local got; got=$(python3 -c "import json;print(json.load(open('$WORK/s.json'))['consumed']['packets'])")
    echo "$got $(python3 -c "print(($cpu1 - $cpu0) / $ticks)")"
}

read -r base_pkts base_cpu < <(run_once 0)
read -r scr_pkts scr_cpu < <(run_once 1)
python3 - "$base_pkts" "$base_cpu" "$scr_pkts" "$scr_cpu" "$RUN" <<'PY'
import sys
bp, bc, sp, sc, run = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
print("| run | packets delivered | gateway CPU s | CPU us per 1k packets |")
print("|---|---|---|---|")
print(f"| no scraping | {bp} | {bc:.2f} | {bc / bp * 1e9:.1f} |")
print(f"| /metrics at 10 Hz | {sp} | {sc:.2f} | {sc / sp * 1e9:.1f} |")
print(f"delivered: {100 * (sp - bp) / bp:+.2f}%; CPU per packet: {100 * (sc / sp - bc / bp) / (bc / bp):+.2f}%")
PY
