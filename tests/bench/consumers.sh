#!/usr/bin/env bash
# The hand-off to a consumer process against the application loop in the
# gateway's own process, on the same traffic: UDP on loopback from `gen`
# (pinned to its own cores) into one RX queue, for RUN_SECONDS each way.
#   in-process  `run`: the application loop takes every burst with
#               get_rx_burst and counts it (what DAQIRI's application does)
#   consumer    `run --consumer-socket` and `consume` in another process:
#               the loop offers each burst, the consumer reads it in place
# Reported: packets a second each took, their ratio, the hand-off's latency
# (gateway delivery to the consumer taking the burst: p50, p99), and what
# is copied per packet (payload: none; a 40-byte segment descriptor, ring layout 3).
#
# Usage: tests/bench/consumers.sh    (GW: a prebuilt daqiri-gateway)
#   RUN_SECONDS (10), SIZE (payload bytes up to 2000, the buffers' 2 KiB; 1024), SENDERS (2),
#   CORES: "worker loop consumer first-sender" (2 3 4 6)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN_SECONDS=${RUN_SECONDS:-10}
SIZE=${SIZE:-1024}
SENDERS=${SENDERS:-2}
read -r WORKER LOOP CONSUMER SENDER <<<"${CORES:-2 3 4 6}"
((SIZE <= 2000)) || { echo "SIZE $SIZE: at most 2000 bytes fit the 2 KiB buffers" >&2; exit 2; }
if [[ -z ${GW:-} ]]; then
    cargo build --release -q -p daqiri-gateway
    GW=$PWD/target/release/daqiri-gateway
fi
WORK=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=47123
cat >"$WORK/gw.yaml" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: socket
    master_core: $LOOP
    rx_meta_buffers: 1024
    memory_regions:
    - { name: rx, kind: host, num_bufs: 65536, buf_size: 2048 }
    interfaces:
    - name: udp_rx
      socket_config: { mode: server, local_addr: "udp://127.0.0.1:$PORT" }
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: $WORKER, batch_size: 64, timeout_us: 200, memory_regions: [rx] }
YAML

send() { # seconds
    local k pids=()
    for ((k = 0; k < SENDERS; k++)); do
        taskset -c $((SENDER + k)) "$GW" gen --dest 127.0.0.1:$PORT --rate 0 --duration "$1" \
            --payload-size "$SIZE" --src-port $((20000 + k)) >/dev/null 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
}

# In-process: the application loop alone.
"$GW" run --config "$WORK/gw.yaml" --no-admin --duration $((RUN_SECONDS + 2)) \
    --summary-json "$WORK/alone.json" >/dev/null 2>&1 &
gateway=$!
sleep 1
send "$RUN_SECONDS"
wait $gateway
alone=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["consumed"]["packets"])' "$WORK/alone.json")

# A consumer process on its own core.
"$GW" run --config "$WORK/gw.yaml" --no-admin --duration $((RUN_SECONDS + 4)) \
    --consumer-socket "$WORK/c.sock" --summary-json "$WORK/with.json" >/dev/null 2>&1 &
gateway=$!
while [[ ! -S $WORK/c.sock ]]; do sleep 0.1; done
taskset -c "$CONSUMER" "$GW" consume --socket "$WORK/c.sock" --interface udp_rx --slots 1024 --idle 2 \
    >"$WORK/consumer.out" &
consumer=$!
sleep 1
send "$RUN_SECONDS"
wait $consumer
wait $gateway
python3 - "$WORK/consumer.out" "$alone" "$RUN_SECONDS" "$SIZE" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split("\n")
seen = json.loads([l for l in lines if l.startswith("{")][-1])
alone = int(sys.argv[2]) / float(sys.argv[3])
consumer = seen["packets_per_s"]
h = seen["handoff_us"]
print(f"payload {sys.argv[4]} B, {sys.argv[3]} s each")
print(f"in-process get_rx_burst   {alone / 1e6:8.3f} Mpps")
print(f"consumer process          {consumer / 1e6:8.3f} Mpps   ratio {consumer / alone:.2f}")
print(f"consumer lost bursts      {seen['lost_bursts']}")
print(f"hand-off latency          p50 {h['p50']:.1f} us   p99 {h['p99']:.1f} us   max {h['max']:.1f} us")
print("copied per packet         payload 0 B, segment descriptor 40 B")
PY
