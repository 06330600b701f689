#!/usr/bin/env bash
# DAQIRI's raw benchmarks, unchanged, on our DPDK backend over DPDK 25.11's
# virtual devices (the reference build, tests/reference/build.sh dpdk):
# libdaqiri built with `dpdk` against it, in place of the CUDA build the
# programs were linked to (the same soname, found first on the library path).
# Each runs with one of DAQIRI's two-port configs, its PCI address
# placeholders filled with virtual devices, its cores folded; any other change
# is named where made. Called by tests/capi/daqiri_programs.sh, which built
# the programs: tests/capi/daqiri_programs_dpdk.sh WORK SOURCE
# Exits 3 (said why) when the DPDK sources are nowhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$1 source=$2
examples=$work/build/examples
status=0
dpdk=$(tests/reference/build.sh dpdk) || status=$?
((status == 0)) || exit "$status"
prefix=$(PKG_CONFIG_PATH=$dpdk/lib/pkgconfig LD_LIBRARY_PATH=$dpdk/lib \
    gateway/capi/package.sh target/capi/prefix-cuda-dpdk --features cuda,dpdk)
on_dpdk=(env LD_LIBRARY_PATH="$prefix/lib:$dpdk/lib")
out=$work/dpdk
rm -rf "$out" && mkdir -p "$out"

# Copies DAQIRI config $1 to $2 with its cores folded and the placeholders
# filled: each `address: <...>` in turn with the next argument, every other
# `<value>` (the benchmark's addresses) with the value.
place() {
    local from=$1 to=$2
    shift 2
    tests/capi/fold_cores.py "$from" "$to"
    python3 - "$to" "$@" <<'PY'
import re, sys
path, *addresses = sys.argv[1:]
text = open(path).read()
for address in addresses:
    text = re.sub(r"address: <[^>]*>", f'address: "{address}"', text, count=1)
assert "address: <" not in text, f"{path}: more addresses than given"
open(path, "w").write(re.sub(r"<([0-9A-Fa-f.:]+)>", r"\1", text))
PY
}

# daqiri_bench_raw_gpudirect with daqiri_bench_raw_tx_rx.yaml: its RX port is
# net_pcap replaying a capture made here, 20480 datagrams its flow matches
# (UDP 4096 to 4096: two whole bursts of its batch size, which it delivers
# only whole) and 2048 it does not (4095), written by Wireshark's text2pcap;
# its TX port is net_null. Two changes: its GPU memory is host memory (our
# DPDK backend lands in host memory; the GPU machine has no DPDK), and its
# bench_tx goes, since that thread fills frames with cudaMemcpy, which needs
# a GPU. The program must count every matching frame and byte, tshark must
# read the same from the capture, and the engine must have dropped and
# counted the rest as unmatched (flow_isolation).
python3 - "$out" <<'PY'
import sys
def dump(path, count):
    with open(path, "w") as hexdump:
        for n in range(count):
            payload = n.to_bytes(4, "big") + bytes(i & 0xFF for i in range(4, 1000))
            for offset in range(0, len(payload), 16):
                hexdump.write(f"{offset:06x} " + " ".join(f"{b:02x}" for b in payload[offset:offset + 16]) + "\n")
dump(f"{sys.argv[1]}/matching.txt", 20480)
dump(f"{sys.argv[1]}/other.txt", 2048)
PY
text2pcap -q -F pcap -4 1.2.3.4,5.6.7.8 -u 4096,4096 "$out/matching.txt" "$out/matching.pcap" >/dev/null
text2pcap -q -F pcap -4 1.2.3.4,5.6.7.8 -u 4095,4095 "$out/other.txt" "$out/other.pcap" >/dev/null
mergecap -F pcap -w "$out/replay.pcap" "$out/matching.pcap" "$out/other.pcap"
config=$out/daqiri_bench_raw_tx_rx.yaml
place "$source/examples/daqiri_bench_raw_tx_rx.yaml" "$config" net_null0 "net_pcap0,rx_pcap=$(realpath "$out/replay.pcap")"
sed -i 's/kind: "device"/kind: "host"/' "$config"
python3 - "$config" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
open(sys.argv[1], "w").write(re.sub(r"\nbench_tx:\n(?:[ -].*\n?)*", "\n", text))
PY
log=$out/gpudirect.log
timeout 60 "${on_dpdk[@]}" "$examples/daqiri_bench_raw_gpudirect" "$config" --seconds 3 > "$log" 2>&1 || {
    echo "daqiri_programs: daqiri_bench_raw_gpudirect on net_pcap failed:" >&2
    tail -20 "$log" >&2
    exit 1
}
tshark -r "$out/replay.pcap" -T fields -e udp.srcport -e udp.dstport -e frame.len 2>/dev/null > "$out/replay.fields"
python3 - "$log" "$out/replay.fields" <<'PY'
import collections, re, sys
text = open(sys.argv[1]).read()
frames, lengths = collections.Counter(), collections.Counter()
for line in open(sys.argv[2]):
    src, dst, length = line.split()
    frames[(src, dst)] += 1
    lengths[(src, dst)] += int(length)
assert frames == {("4096", "4096"): 20480, ("4095", "4095"): 2048}, f"tshark read {dict(frames)}"
rx = re.search(r"^RX complete: interface=rx_port queue=0 packets=(\d+) bytes=(\d+) bursts=(\d+)", text, re.M)
assert rx, f"no RX line in {sys.argv[1]}"
packets, size, bursts = map(int, rx.groups())
assert (packets, size, bursts) == (20480, lengths[("4096", "4096")], 2), rx.group(0)
queue = re.search(r'rx queue 0 "rq_q_0": (\d+) packets, (\d+) bytes, \d+ bursts, (\d+) dropped', text)
assert queue and tuple(map(int, queue.groups())) == (packets, size, 0), queue and queue.group(0)
unmatched = re.search(r"rx dropped before a queue: (\d+) \(unmatched_flow=(\d+)\)", text)
assert unmatched and unmatched.groups() == ("2048", "2048"), unmatched and unmatched.group(0)
print(f"daqiri_programs: daqiri_bench_raw_gpudirect on net_pcap: {packets} frames, {size} bytes in {bursts} bursts, "
      f"as tshark reads the capture; its 2048 other frames dropped and counted unmatched")
PY

# daqiri_bench_raw_reorder_seq with daqiri_bench_raw_tx_rx_reorder_seq_1024_cpu.yaml
# (hugepages, a CPU reorder plan of 1024 packets per batch): its TX port is
# net_af_packet on one end of a veth pair, its RX port net_af_packet on the
# other, in a network namespace of their own: a wire the kernel counts. The
# sender outruns the receiver on this machine's cores, and the kernel's packet
# socket drops what its ring cannot hold: every frame the veth carried must be
# delivered or counted dropped by its reason, but for those still in flight
# when the program prints (the receiver reads the PMD's drop counter every
# 100 ms; the application has stopped taking bursts): half a second's worth.
if [[ $EUID != 0 ]]; then
    echo "daqiri_programs: daqiri_bench_raw_reorder_seq on net_af_packet is SKIPPED: a veth pair needs root" >&2
    exit 0
fi
ns=dq-programs-$$
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns add "$ns"
ip -n "$ns" link add veth0 type veth peer name veth1
for end in veth0 veth1; do
    # No IPv6 neighbour discovery: the veth carries the benchmark's frames alone.
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$end.disable_ipv6=1"
    ip -n "$ns" link set "$end" up
done
counter() { ip netns exec "$ns" cat "/sys/class/net/$1/statistics/$2"; }
# The PMD's frame slots must hold a whole frame in an mbuf of 2048-byte
# buffers (its default 2048-byte slots do not, after DPDK's headroom).
slots=blocksz=12288,framesz=1536
config=$out/daqiri_bench_raw_tx_rx_reorder_seq_1024_cpu.yaml
place "$source/examples/daqiri_bench_raw_tx_rx_reorder_seq_1024_cpu.yaml" "$config" \
    "net_af_packet0,iface=veth0,$slots" "net_af_packet1,iface=veth1,$slots"
log=$out/reorder_seq.log
seconds=5
DAQIRI_BENCH_CHECK_REORDER_INFO=1 timeout 60 ip netns exec "$ns" "${on_dpdk[@]}" \
    "$examples/daqiri_bench_raw_reorder_seq" "$config" --seconds $seconds > "$log" 2>&1 || {
    echo "daqiri_programs: daqiri_bench_raw_reorder_seq on net_af_packet failed:" >&2
    tail -20 "$log" >&2
    exit 1
}
# The pair is new: its counters count this run alone.
python3 - "$log" "$config" $seconds "$(counter veth0 tx_packets)" "$(counter veth0 tx_bytes)" <<'PY'
import re, sys
text, config = open(sys.argv[1]).read(), open(sys.argv[2]).read()
seconds, wire, wire_bytes = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tx_buffers = int(re.search(r'name: "Data_TX_CPU"\n(?:\s+\w+: .*\n)*?\s+num_bufs: (\d+)', config)[1])
line = re.search(r"^RX complete: (.*)$", text, re.M)
assert line, f"no 'RX complete' line in {sys.argv[1]}"
rx = {k: int(v) for k, v in (kv.split("=") for kv in line[1].split())}
sent, sent_bytes = map(int, re.search(r'tx queue 0 "tx_q_0": (\d+) packets, (\d+) bytes', text).groups())
delivered, queue_dropped = map(int, re.search(r'rx queue 0 "rx_q_0": (\d+) packets, .* (\d+) dropped', text).groups())
port_dropped = re.search(r"rx dropped before a queue: (\d+)", text)
dropped = queue_dropped + (int(port_dropped[1]) if port_dropped else 0)
# TX: each frame 64 + 1000 bytes; what the kernel carried after the count
# was printed is what the TX worker still held then (at most its region's buffers).
assert (sent_bytes, wire_bytes) == (1064 * sent, 1064 * wire), (sent, sent_bytes, wire, wire_bytes)
assert 0 <= wire - sent <= tx_buffers, f"the veth carried {wire} frames, the engine says it sent {sent}"
# RX: each frame the wire carried delivered or counted dropped, but for
# half a second's worth in flight. The engine counts an aggregate delivered
# when it reaches the queue's ring; the program, when it takes it (those it
# left there at its stop, at most the reorder region's 128).
unaccounted = wire - delivered - dropped
assert delivered > 0 and 0 <= unaccounted <= wire / seconds / 2, (wire, delivered, dropped)
batches = rx["aggregated_batches"]
assert batches > 0 and rx["passthrough_packets"] == 0 and rx["aggregated_packets"] == rx["packets"], rx
assert 0 <= delivered - rx["packets"] <= 128 * 1024, (delivered, rx)
assert rx["reorder_info_success"] == batches and rx["reorder_info_errors"] == rx["reorder_info_not_ready"] == 0, rx
assert rx["last_batch_id"] - rx["first_batch_id"] + 1 >= batches, rx
print(f"daqiri_programs: daqiri_bench_raw_reorder_seq on net_af_packet over veth: {sent} frames sent "
      f"(the veth carried {wire}), {delivered} delivered in {batches} aggregates with their ReorderBurstInfo, "
      f"{dropped} counted dropped, {unaccounted} in flight")
PY
