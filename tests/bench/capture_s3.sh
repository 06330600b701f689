#!/usr/bin/env bash
# Capture to S3 during RX: the gateway's REST capture into a bucket (one pcap
# object, streamed as a multipart upload) against the same capture to local
# disk and against `aws s3 cp` of the disk capture's file to the same bucket
# (AWS's own CLI: the reference for moving those bytes into that store), all
# in one run, each while the same traffic arrives (the copy's too, so the
# gateway's receive and the sender load the cores alike). The store is SeaweedFS
# (tests/s3/server.sh) on this machine, so it shares the cores with the
# gateway and the sender: the figures say how the paths compare here, not
# what a remote store sustains.
#
# Throughput = bytes stored / (capture time + what it takes to make them
# durable: fdatasync for the disk, the object's completion for S3).
#
# Usage (root): tests/bench/capture_s3.sh [DIR]
#   DIR: scratch (default /var/tmp/daqiri-capture-s3-bench)
#   SECONDS_PER_RUN (10), RATE pps (20000), PAYLOAD bytes (8000), PART_MB (8),
#   INFLIGHT parts (4; aws s3 cp runs 10 requests at once, 8 MiB parts)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/lib.sh
DIR=${1:-/var/tmp/daqiri-capture-s3-bench}
RUN=${SECONDS_PER_RUN:-10} RATE=${RATE:-20000} PAYLOAD=${PAYLOAD:-8000} PART_MB=${PART_MB:-8} INFLIGHT=${INFLIGHT:-4}
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
venv=target/bench-awscli
[[ -x $venv/bin/aws ]] || { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet awscli; }
cargo build --release -q -p daqiri-gateway
GW=$PWD/target/release/daqiri-gateway
TX=dqs3_tx RX=dqs3_rx RX_IP=10.214.10.2 PORT=5000 ADMIN=127.0.0.1:9464
read -r access secret < <(tests/s3/server.sh credentials)
export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_DEFAULT_REGION=us-east-1
cleanup() {
    [[ -d $DIR/s3 ]] && tests/s3/server.sh stop "$DIR/s3"
    ip netns pids $RX 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $TX 2>/dev/null || true
    ip netns del $RX 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
cleanup
mkdir -p "$DIR"
# A wire-like sender (tests/bench/lib.sh), MTU 9000 for the 8000-byte datagrams.
veth_bed $TX $RX 10.214.10.1 $RX_IP 1 9000
# The store in the receiver's namespace, on its loopback.
endpoint=$(ip netns exec $RX tests/s3/server.sh start "$DIR/s3")
in_rx() { ip netns exec $RX "$@"; }
in_rx "$venv/bin/aws" --endpoint-url "$endpoint" s3 mb s3://bench >/dev/null

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
rate() { python3 -c "print(f'{$1 / ($3 - $2) / 1e6:.1f}')"; } # bytes start end -> MB/s
send() { ip netns exec $TX "$GW" gen --dest $RX_IP:$PORT --rate "$RATE" --payload-size "$PAYLOAD" --duration "$RUN" >/dev/null 2>&1; }
field() { python3 -c "import json,sys;print(json.loads(sys.argv[1])$2)" "$1"; }
in_rx "$GW" run --config "$DIR/gateway.yaml" --capture-dir "$DIR/out" --capture-free-space-floor-mb 256 \
    --capture-s3-endpoint "$endpoint" --capture-s3-path-style --capture-s3-part-mb "$PART_MB" \
    --capture-s3-inflight "$INFLIGHT" >"$DIR/gw.log" 2>&1 &
for _ in $(seq 100); do in_rx curl -sf http://$ADMIN/readyz >/dev/null && break; sleep 0.1; done
capture() { # id body -> the capture's record once stopped, and its start and end times
    local t0 t1 info
    t0=$(now)
    in_rx curl -sf -X POST http://$ADMIN/api/v1/captures -H 'Content-Type: application/json' -d "$2" >/dev/null
    send
    info=$(in_rx curl -sf -X DELETE "http://$ADMIN/api/v1/captures/$1")
    [[ $2 == *s3://* ]] || sync -f "$DIR/out/disk.pcap"
    t1=$(now)
    echo "$t0 $t1 $info"
}

read -r d0 d1 disk < <(capture 1 '{"format": "pcap", "interface": "udp_rx", "name": "disk"}')
disk_bytes=$(stat -c %s "$DIR/out/disk.pcap")
read -r s0 s1 s3 < <(capture 2 '{"format": "pcap", "interface": "udp_rx", "name": "s3", "destination": "s3://bench/run"}')
s3_bytes=$(($(field "$s3" "['bytes']") + 24))
[[ $(field "$s3" "['state']") == finished ]] || { echo "the S3 capture did not finish: $s3" >&2; exit 1; }
send &
sender=$!
c0=$(now)
in_rx "$venv/bin/aws" --endpoint-url "$endpoint" s3 cp --quiet "$DIR/out/disk.pcap" s3://bench/cp/disk.pcap
c1=$(now)
wait $sender

echo "| path | bytes stored | MB/s | capture drops (writer behind) | packets |"
echo "|---|---|---|---|---|"
echo "| capture to disk (fdatasync) | $disk_bytes | $(rate "$disk_bytes" "$d0" "$d1") | $(field "$disk" "['capture_drops']") ($(field "$disk" "['capture_drops_by_reason']['writer_behind']")) | $(field "$disk" "['packets']") |"
echo "| capture to S3 (one multipart object, ${PART_MB} MiB parts, $INFLIGHT in flight) | $s3_bytes | $(rate "$s3_bytes" "$s0" "$s1") | $(field "$s3" "['capture_drops']") ($(field "$s3" "['capture_drops_by_reason']['writer_behind']")) | $(field "$s3" "['packets']") |"
echo "| aws s3 cp of the disk capture's file, during the same traffic | $disk_bytes | $(rate "$disk_bytes" "$c0" "$c1") | | |"
echo "S3 capture / aws s3 cp: $(python3 -c "print(f'{($s3_bytes/($s1-$s0))/($disk_bytes/($c1-$c0)):.2f}')")x;" \
    "S3 capture / disk capture: $(python3 -c "print(f'{($s3_bytes/($s1-$s0))/($disk_bytes/($d1-$d0)):.2f}')")x"
echo "offered: $RATE pps x $PAYLOAD B for $RUN s ($(python3 -c "print(f'{$RATE*$PAYLOAD/1e6:.0f}')") MB/s of payload)"
