#!/usr/bin/env bash
# Restart windows of config reloads that restart the engine, under a 50 kpps
# stream: first one PUT at a time, then PARALLEL PUTs at once (they are
# serialised by the gateway; each still restarts). Prints each window as the
# gateway reports it (restart_ms) and the min / median / max of each series.
#
# Usage: tests/bench/restart_windows.sh    COUNT (10 sequential), PARALLEL (20)
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNT=${COUNT:-10} PARALLEL=${PARALLEL:-20}
cargo build --release -q -p daqiri-gateway
GW=$PWD/target/release/daqiri-gateway
WORK=$(mktemp -d)
ADMIN=127.0.0.1:$((20000 + RANDOM % 20000)) UDP=$((40000 + RANDOM % 20000))
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"; }
PIDS=()
trap cleanup EXIT
config() { # batch_size
    cat <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: socket
    memory_regions:
    - { name: m, kind: host, num_bufs: 8192, buf_size: 2048 }
    interfaces:
    - name: udp_rx
      socket_config: { mode: server, local_addr: "udp://127.0.0.1:$UDP" }
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 0, batch_size: $1, timeout_us: 500, memory_regions: [m] }
YAML
}
config 32 >"$WORK/gw.yaml"
"$GW" run --config "$WORK/gw.yaml" --admin-addr "$ADMIN" >/dev/null 2>"$WORK/gw.log" &
PIDS+=($!)
until curl -sf "http://$ADMIN/healthz" >/dev/null; do sleep 0.1; done
"$GW" gen --dest "127.0.0.1:$UDP" --rate 50000 --duration 600 >/dev/null &
PIDS+=($!)
put() { # batch_size -> restart_ms
    config "$1" | curl -s -X PUT --data-binary @- -H 'Content-Type: application/yaml' "http://$ADMIN/api/v1/config" |
        python3 -c 'import json,sys; a=json.load(sys.stdin); print(a.get("restart_ms") or "refused:" + a.get("change", a.get("message", "?")))'
}
summary() { sort -g | awk '{v[NR]=$1} END {printf "n=%d min %.1f ms, median %.1f ms, max %.1f ms\n", NR, v[1], v[int((NR+1)/2)], v[NR]}'; }
sleep 1
echo "sequential: $COUNT restarts, one at a time"
for i in $(seq "$COUNT"); do put $((16 + i % 2 * 8)); sleep 0.3; done | tee "$WORK/seq" | tr '\n' ' '; echo
grep -v : "$WORK/seq" | summary
echo "parallel: $PARALLEL PUTs at once"
PUTS=()
for i in $(seq "$PARALLEL"); do put $((8 + i)) >"$WORK/par.$i" & PUTS+=($!); done
wait "${PUTS[@]}"
cat "$WORK"/par.* | tee "$WORK/par" | tr '\n' ' '; echo
grep -v : "$WORK/par" | summary
