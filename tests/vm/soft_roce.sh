#!/usr/bin/env bash
# Inside the VM test bed: a soft-RoCE device on a veth, proven usable by
# rdma-core's own peers (ibv_rc_pingpong), perftest (RC SEND, RC and UC
# WRITE) and pyverbs, none of them ours. Leaves rxe0 (on vr0, 10.77.0.1) in
# place for the RDMA tests. Server and client are separate processes on the
# one device, which loops to itself: Debian 6.1's rxe binds its UDP socket
# in the first network namespace only, so a peer device in a namespace of
# its own hears nothing, and two devices in one namespace reach each other
# through the loopback interface, which no rxe device is on.
set -euo pipefail
[[ ${DAQIRI_VM:-} == 1 ]] || { echo "soft_roce.sh: runs inside tests/vm/run.sh" >&2; exit 1; }

if ! rdma link show rxe0/1 >/dev/null 2>&1; then
    ip link add vr0 type veth peer name vr1
    ip addr add 10.77.0.1/24 dev vr0
    ip link set vr0 up && ip link set vr1 up
    rdma link add rxe0 type rxe netdev vr0
fi
rdma link show

# The GID of each device's IPv4 address (RoCEv2).
gid_index() {
    local dev=$1 address=$2 i
    for i in /sys/class/infiniband/$dev/ports/1/gids/*; do
        local gid; gid=$(cat "$i")
        local ipv4; ipv4=$(printf '%d.%d.%d.%d' $((16#${gid:30:2})) $((16#${gid:32:2})) $((16#${gid:35:2})) $((16#${gid:37:2})))
        [[ ${gid:0:29} == 0000:0000:0000:0000:0000:ffff && $ipv4 == "$address" ]] && { basename "$i"; return 0; }
    done
    return 1
}
g0=$(gid_index rxe0 10.77.0.1)
echo "soft-RoCE: rxe0 GID $g0"

pair() { # server and client command lines; the client runs once the server listens
    local server=$1 client=$2 log; log=$(mktemp)
    $server >"$log" 2>&1 &
    local pid=$! waited=0
    # Both tools exchange queue pair numbers over TCP port 18515 first.
    until [[ -n $(ss -Htln 'sport = :18515') ]]; do
        ((waited++ < 300)) || { kill "$pid" 2>/dev/null || true; cat "$log"; return 1; }
        sleep 0.1
    done
    sleep 1 # perftest's server listens before it is ready to exchange
    if ! timeout 120 $client; then
        kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; cat "$log"; return 1
    fi
    wait "$pid" || { cat "$log"; return 1; }
}
peers() { # the pair, again if its TCP handshake fails under emulation (twice at most)
    local attempt
    for attempt in 1 2 3; do
        pair "$1" "$2" && return 0
        echo "soft_roce.sh: attempt $attempt of \"$2\" failed" >&2
        sleep 2
    done
    return 1
}
peers "ibv_rc_pingpong -d rxe0 -g $g0 -n 200 -s 4096" "ibv_rc_pingpong -d rxe0 -g $g0 -n 200 -s 4096 10.77.0.1"
# -F: perftest times its report by the CPU's clock and, where that reads unsteadily (an
# emulated CPU on a busy host), refuses to report and fails; the transfer is what proves
# the device here, not the figures.
perf="-x $g0 -n 200 -s 4096 -F"
peers "ib_send_bw -d rxe0 -c RC $perf" "ib_send_bw -d rxe0 -c RC $perf 10.77.0.1"
peers "ib_write_bw -d rxe0 -c RC $perf" "ib_write_bw -d rxe0 -c RC $perf 10.77.0.1"
peers "ib_write_bw -d rxe0 -c UC $perf" "ib_write_bw -d rxe0 -c UC $perf 10.77.0.1"
/usr/bin/python3 - <<'PY'
from pyverbs.device import Context, get_device_list
names = sorted(d.name.decode() for d in get_device_list())
assert "rxe0" in names, names
with Context(name="rxe0") as ctx:
    port = ctx.query_port(1)
    assert port.state == 4, f"rxe0 port 1 is not active: {port.state}"
print(f"pyverbs: {names}, rxe0 port 1 active")
PY
echo "soft-RoCE ready: rxe0 passes ibv_rc_pingpong, ib_send_bw RC, ib_write_bw RC and UC, pyverbs"
