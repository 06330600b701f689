#!/usr/bin/env bash
# DAQIRI's RDMA benchmark (daqiri_bench_rdma, its example program, built
# unchanged against libdaqiri by tests/capi/daqiri_programs.sh on the host)
# on our RoCE backend, inside the VM test bed on soft-RoCE:
#   tests/vm/run.sh -- tests/capi/daqiri_rdma_vm.sh
# Its own config, daqiri_bench_rdma_tx_rx.yaml, with what the VM needs
# changed, each change named: both interfaces on rxe0's one address
# (10.77.0.1; the device loops to itself, tests/vm/soft_roce.sh), host
# memory instead of host_pinned (no GPU here), messages of 1 MB instead of
# 8 MB in regions to match (the VM has 4 GiB), cores folded onto the VM's
# two. Client and server each send and receive, as the example does. The
# program's counts are checked against each other and against rxe0's own
# packet counters (an independent reader). Before it, tests/capi/rdma_test.cpp
# checks what the benchmark does not: every byte, every work request id.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Once per boot: tests/vm/suite.sh has sourced it already (it bound the NICs).
[[ -n ${DAQIRI_VM_VIRTIO_PCI:-} ]] || source tests/vm/guest.sh
tests/vm/soft_roce.sh >/dev/null
SECONDS_RUN=${SECONDS_RUN:-6}
MESSAGE=1000000
work=target/capi/daqiri-programs
bench=$work/build/examples/daqiri_bench_rdma
if [[ ! -x $bench ]]; then
    # daqiri_programs.sh builds it where DAQIRI's sources are (../shared/reference).
    echo "daqiri_rdma_vm: SKIPPED: $bench is not built (tests/capi/daqiri_programs.sh, which needs DAQIRI's sources)" >&2
    exit 0
fi
# First the calls' own test: every message byte for byte, work request ids,
# completions in order, the misuses (tests/capi/rdma_test.cpp).
"$work/rdma_test"
example=$(ls "$work"/daqiri-*/examples/daqiri_bench_rdma_tx_rx.yaml | head -1)
config=$(mktemp --suffix .yaml)
log=$(mktemp)
trap 'rm -f "$config" "$log"' EXIT

python3 - "$example" "$config" "$MESSAGE" <<'PY'
import os, re, sys
source, destination, message = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(source).read()
cores = len(os.sched_getaffinity(0))
changes = {
    r"10\.100\.[13]\.1": "10.77.0.1",                      # rxe0's address, both sides
    r'kind: "host_pinned"': 'kind: "host"',                # no GPU in the VM
    r"buf_size: 90?000000": f"buf_size: {message + 4096}",  # 1 MB messages
    r"message_size: 8000000": f"message_size: {message}",
}
for pattern, value in changes.items():
    text, n = re.subn(pattern, value, text)
    assert n, f"{pattern} is not in {source}"
text = re.sub(r"(\b(?:cpu_core|master_core):\s*)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) % cores}", text)
open(destination, "w").write(text)
PY

counter() { cat "/sys/class/infiniband/rxe0/ports/1/hw_counters/$1"; }
sent_before=$(counter sent_pkts)
timeout 120 "$bench" "$config" --seconds "$SECONDS_RUN" --mode both >"$log" 2>&1 || {
    echo "daqiri_rdma_vm: daqiri_bench_rdma failed:" >&2
    tail -40 "$log" >&2
    exit 1
}
sent=$(($(counter sent_pkts) - sent_before))
mtu=$(ibv_devinfo -d rxe0 | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')
python3 - "$log" "$sent" "$mtu" "$MESSAGE" <<'PY'
import re, sys
log, sent, mtu, message = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
text = open(log).read()
side = {}
for name in ("Server", "Client"):
    m = re.search(rf"^{name} complete: (.*)$", text, re.M)
    assert m, f"no '{name} complete' line:\n{text[-3000:]}"
    side[name] = {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", m.group(1))}
server, client = side["Server"], side["Client"]
for name, counts in side.items():
    for key in ("send_completions", "recv_completions"):
        assert counts[key] > 0, f"{name} {key} is 0:\n{text[-3000:]}"
# What a side received, the other sent. When the run stops, each side stops
# taking completions after a short drain: up to a TX region's buffers (20)
# of SENDs may be in flight, received but not seen complete, or complete
# but not yet received.
for receiver, sender in (("Server", "Client"), ("Client", "Server")):
    got, sent_msgs = side[receiver]["recv_completions"], side[sender]["send_completions"]
    assert abs(got - sent_msgs) <= 20, f"{receiver} received {got} messages, {sender} sent {sent_msgs}:\n{text[-3000:]}"
packets = -(-message // mtu)
messages = server["send_completions"] + client["send_completions"]
assert sent >= messages * packets, f"rxe0 sent {sent} packets; {messages} messages of {message} B need {messages * packets}"
seconds = server["seconds"]
print(f"daqiri_rdma_vm: DAQIRI's daqiri_bench_rdma on libdaqiri, soft-RoCE, {seconds:.1f} s: "
      f"client sent {client['send_completions']:.0f} and received {client['recv_completions']:.0f} messages of {message} B, "
      f"server sent {server['send_completions']:.0f} and received {server['recv_completions']:.0f}; "
      f"rxe0 sent {sent} packets ({messages:.0f} x {packets} of them data)")
PY
