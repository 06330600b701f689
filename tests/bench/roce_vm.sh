#!/usr/bin/env bash
# Throughput of the RoCE backend against perftest on the same soft-RoCE
# link, inside the VM test bed (software emulation: only the ratios mean
# anything, and they go into no doc):
#   cargo build --release -p daqiri --features rdma --bench roce_bw   (on the host)
#   tests/vm/run.sh -- tests/bench/roce_vm.sh
# SEND: gateway/engine/benches/roce_bw.rs `send` (a client and a server
# port of one engine) against ib_send_bw's own client and server, the
# receiver's rate, MESSAGES x SIZE (20000 x 65536). WRITE: `roce_bw write`
# into a pyverbs peer's registered memory (tests/vm/rdma_target.py sink: a
# WRITE is one-sided, the peer's CPU does nothing) against ib_write_bw,
# WRITES x 4096 (the peer's slot size; 50000).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/vm/guest.sh
tests/vm/soft_roce.sh >/dev/null
MESSAGES=${MESSAGES:-20000}
SIZE=${SIZE:-65536}
WRITES=${WRITES:-50000}
ours=${ROCE_BW:-$(ls -t target/release/deps/roce_bw-* | grep -v '\.d$' | head -1)}
work=$(mktemp -d)

perftest() { # tool size iterations: the server's average MB/s
    "$1" -d rxe0 -s "$2" -n "$3" -F >"$work/server" 2>&1 &
    local server=$!
    sleep 1
    "$1" -d rxe0 -s "$2" -n "$3" -F 10.77.0.1 >"$work/client" 2>&1
    wait $server
    # For ib_write_bw only the client reports the rate.
    awk -v size="$2" '$1 == size && NF >= 4 { print $4 }' "$work/server" "$work/client" | tail -1
}
rate() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["mb_per_s"])' "$1"; }

send_perftest=$(perftest ib_send_bw "$SIZE" "$MESSAGES")
send_ours=$(rate "$("$ours" send 10.77.0.1 18790 "$MESSAGES" "$SIZE" | tail -1)")

write_perftest=$(perftest ib_write_bw 4096 "$WRITES")
# The peer announces its memory on one FIFO (read by our bench) and waits
# for a line on another before it lets go.
mkfifo "$work/announce" "$work/stop"
/usr/bin/python3 tests/vm/rdma_target.py 10.77.0.1 18791 256 sink <"$work/stop" >"$work/announce" 2>/dev/null &
sink=$!
exec {stop}>"$work/stop"
write_ours=$(rate "$("$ours" write 10.77.0.1 18791 "$WRITES" 4096 256 <"$work/announce" | tail -1)")
echo stop >&"$stop"
exec {stop}>&-
wait $sink || true

python3 - "$send_perftest" "$send_ours" "$write_perftest" "$write_ours" "$MESSAGES x $SIZE" "$WRITES x 4096" <<'PY'
import sys
sp, so, wp, wo = map(float, sys.argv[1:5])
print("soft-RoCE (rxe0) in the VM test bed: emulation, ratios only")
print(f"SEND  {sys.argv[5]:>16} B  ib_send_bw {sp:8.1f} MB/s  daqiri {so:8.1f} MB/s  ratio {so / sp:.2f}")
print(f"WRITE {sys.argv[6]:>16} B  ib_write_bw {wp:7.1f} MB/s  daqiri {wo:8.1f} MB/s  ratio {wo / wp:.2f}")
PY
