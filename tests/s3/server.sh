#!/usr/bin/env bash
# A real S3 server on loopback for the S3 writer's tests: SeaweedFS (Apache-2.0)
# in one process (master, volume, filer and its S3 gateway), with one
# identity's access key and secret, built from its Go module at the version
# tests/s3/seaweedfs/go.mod pins.
#
#   server.sh build       builds `weed` once per pinned version; prints its path
#   server.sh start DIR   starts it with its data in DIR; prints the endpoint URL
#   server.sh stop DIR    stops it and removes DIR
#   server.sh pause DIR   stops it, keeping its data (a store that went away)
#   server.sh resume DIR  starts it again on its data, at the same endpoint
#
# The binary is cached by the hash of the module's files under the user cache
# ($XDG_CACHE_HOME or ~/.cache, daqiri-gateway/seaweedfs/), as the control
# plane is: a fresh machine pays the build (minutes), a clean clone seconds.
# The credentials are fixed (tests only): DAQIRI_TEST_S3_ACCESS_KEY and
# DAQIRI_TEST_S3_SECRET_KEY below, which `start` also prints to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=$here/seaweedfs
log() { echo "s3 server: $*" >&2; }
access_key=daqiri-test-access
secret_key=daqiri-test-secret-0123456789

build() {
    local key cache started
    command -v go >/dev/null || { log "needs the go command (Go 1.26 or later) to build SeaweedFS"; exit 1; }
    key=$(cat "$module/go.mod" "$module/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway/seaweedfs/$key
    if [[ ! -x $cache/weed ]]; then
        log "building SeaweedFS's weed (once per pinned version; minutes on a fresh machine)"
        started=$SECONDS
        rm -rf "$cache.partial" && mkdir -p "$cache.partial"
        (cd "$module" && go build -trimpath -buildvcs=false -o "$cache.partial/weed" github.com/seaweedfs/seaweedfs/weed)
        rm -rf "$cache" && mv "$cache.partial" "$cache"
        log "built in $((SECONDS - started)) s"
    fi
    echo "$cache/weed"
}

# A free TCP port on loopback whose +10000 (SeaweedFS's gRPC port beside
# each HTTP one) is free too, both below 65536.
free_port() {
    python3 - <<'PY'
import random, socket
while True:
    port = random.randrange(20000, 50000)
    try:
        for p in (port, port + 10000):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(port)
    break
PY
}

start() {
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    echo "$(free_port) $(free_port) $(free_port) $(free_port)" >"$dir/ports"
    cat >"$dir/identities.json" <<EOF
{"identities": [{"name": "daqiri-test", "credentials": [{"accessKey": "$access_key", "secretKey": "$secret_key"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
EOF
    launch "$dir"
}

# Runs the server on DIR's data and ports; prints the endpoint once ready.
launch() {
    local dir=$1 weed s3 master volume filer deadline
    weed=$(build)
    read -r s3 master volume filer <"$dir/ports"
    setsid "$weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port="$master" -volume.port="$volume" -filer.port="$filer" \
        -master.volumeSizeLimitMB=64 -volume.max=200 \
        -s3 -s3.port="$s3" -s3.config="$dir/identities.json" >>"$dir/weed.log" 2>&1 &
    echo $! >"$dir/pid"
    deadline=$((SECONDS + 120))
    # Ready once an object can be written: the gateway answering is not
    # enough (the filer's lock service comes up after it).
    local sign=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key")
    until curl -s -o /dev/null "${sign[@]}" -X PUT "http://127.0.0.1:$s3/ready-probe" &&
        [[ $(curl -s -o /dev/null -w '%{http_code}' "${sign[@]}" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT --data probe \
            "http://127.0.0.1:$s3/ready-probe/probe") == 200 ]]; do
        if ((SECONDS > deadline)) || ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            log "SeaweedFS did not come up; its log:"
            tail -20 "$dir/weed.log" >&2
            stop "$dir"
            exit 1
        fi
        sleep 0.5
    done
    log "S3 on http://127.0.0.1:$s3 (access key $access_key), data in $dir"
    echo "http://127.0.0.1:$s3"
}

# Stops the server; its data stays.
pause() {
    local dir=$1
    if [[ -f $dir/pid ]]; then
        local pid
        pid=$(cat "$dir/pid")
        kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 -- "-$pid" 2>/dev/null || true
        rm -f "$dir/pid"
    fi
}

stop() {
    pause "$1"
    rm -rf "$1"
}

case ${1:-} in
build) build ;;
start) start "${2:?data dir}" ;;
stop) stop "${2:?data dir}" ;;
pause) pause "${2:?data dir}" ;;
resume) launch "$(cd "${2:?data dir}" && pwd)" ;;
credentials) echo "$access_key $secret_key" ;;
*)
    echo "usage: $0 build | start DIR | stop DIR | pause DIR | resume DIR | credentials" >&2
    exit 2
    ;;
esac
