#!/usr/bin/env bash
# SEND throughput of the RoCE backend against perftest's ib_send_bw on the
# same soft-RoCE link, inside the VM test bed (software emulation: only the
# ratio means anything, and it goes into no doc):
#   tests/vm/run.sh -- tests/bench/roce_vm.sh
# Ours: gateway/engine/benches/roce_send.rs (cargo build --release -p daqiri
# --features rdma --bench roce_send, on the host), a client and a server
# port of one engine; perftest: ib_send_bw's own server and client. Both
# send MESSAGES messages of SIZE bytes (20000 x 65536).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/vm/guest.sh
tests/vm/soft_roce.sh >/dev/null
MESSAGES=${MESSAGES:-20000}
SIZE=${SIZE:-65536}
ours=${ROCE_SEND:-$(ls -t target/release/deps/roce_send-* | grep -v '\.d$' | head -1)}
work=$(mktemp -d)
ib_send_bw -d rxe0 -s "$SIZE" -n "$MESSAGES" -F >"$work/server" 2>&1 &
server=$!
sleep 1
ib_send_bw -d rxe0 -s "$SIZE" -n "$MESSAGES" -F 10.77.0.1 >"$work/client" 2>&1
wait $server
# The receiver's report: bytes, iterations, peak and average MB/s, message rate.
perftest=$(awk -v size="$SIZE" '$1 == size && NF >= 4 { print $4 }' "$work/server" | tail -1)
ours_line=$("$ours" 10.77.0.1 18790 "$MESSAGES" "$SIZE" | tail -1)
python3 - "$perftest" "$ours_line" "$SIZE" "$MESSAGES" <<'PY'
import json, sys
perftest, ours, size, messages = float(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"{messages} SENDs of {size} B on soft-RoCE (rxe0), receiver's rate")
print(f"ib_send_bw     {perftest:10.1f} MB/s")
print(f"daqiri RoCE    {ours['mb_per_s']:10.1f} MB/s   ({ours['messages']} received)")
print(f"ratio          {ours['mb_per_s'] / perftest:10.2f}")
PY
