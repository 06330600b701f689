#!/usr/bin/env bash
# DAQIRI's programs that send from and receive into GPU memory, unchanged,
# on our engine, on the GPU machine: packed by `tests/capi/daqiri_programs.sh
# --pack DIR` (tests/gpu/build.sh does it) as DIR/run.sh beside the programs
# (DIR/bin), libdaqiri and yaml-cpp (DIR/lib) and DAQIRI's software-loopback
# configs, untouched (DIR/configs). tests/gpu/run.sh runs it. Each program
# runs with its own config; its report, our engine's counters and (for the
# pcap writer) its output file are checked. Exits 3, saying why, where no GPU
# or no CUDA library the programs link is found.
set -euo pipefail
cd "$(dirname "$0")"
nvidia-smi -L >/dev/null 2>&1 || { echo "daqiri_programs (GPU): no GPU" >&2; exit 3; }

# The programs link cudart, cuFFT and cuBLAS: the machine's CUDA toolkit, or
# the wheels of its Python.
dirs=("$PWD/lib" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
for wheel in cublas cufft cuda_runtime; do
    dir=$(python3 -c "import nvidia.$wheel as m; print(m.__path__[0] + '/lib')" 2>/dev/null) && dirs+=("$dir")
done
LD_LIBRARY_PATH=$(IFS=:; echo "${dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
for program in bin/*; do
    if missing=$(ldd "$program" | grep "not found"); then
        echo "daqiri_programs (GPU): $program lacks a library here:" >&2
        echo "$missing" >&2
        exit 3
    fi
done
ldd bin/daqiri_bench_raw_gpudirect | grep -q "$PWD/lib/libdaqiri.so" || {
    echo "daqiri_programs (GPU): the programs do not load this folder's libdaqiri" >&2
    exit 1
}
out=${DAQIRI_PROGRAMS_OUT:-$(mktemp -d)}
mkdir -p "$out"

# daqiri_bench_raw_gpudirect on DAQIRI's software-loopback config: bursts
# of 10240 packets of 1064 bytes written into GPU memory with cudaMemcpy,
# sent from there, received into GPU memory; then the same with its GEMM
# workload, which reorders each received burst's payloads by sequence number
# with DAQIRI's kernel entry (ours) and multiplies them with cuBLAS.
for workload in none gemm; do
    log=$out/raw_gpudirect_$workload.log
    timeout 60 bin/daqiri_bench_raw_gpudirect configs/daqiri_bench_raw_sw_loopback.yaml \
        --seconds 5 --workload $workload > "$log" 2>&1 || {
        echo "daqiri_programs (GPU): daqiri_bench_raw_gpudirect --workload $workload failed:" >&2
        tail -20 "$log" >&2
        exit 1
    }
    python3 - "$log" "$workload" <<'PY'
import re, sys
log, workload = sys.argv[1], sys.argv[2]
text = open(log).read()
def counts(kind):
    line = re.search(rf"^{kind} complete: (.*)$", text, re.M)
    assert line, f"no '{kind} complete' line in {log}"
    return {k: float(v) for k, v in (kv.split("=") for kv in line.group(1).split()) if k not in ("interface", "queue", "queues")}
tx, rx = counts("TX"), counts("RX")
sent, received = int(tx["packets"]), int(rx["packets"])
assert sent > 0 and received > 0, (tx, rx)
assert tx["bytes"] == sent * 1064 and rx["bytes"] == received * 1064, (tx, rx)
# The engine's counts (print_stats, while it runs, before the program's
# shutdown): every frame the loop carried landed, was dropped by a counted
# reason, or was still between the loop and the RX queue; what the program
# sent and the loop had not carried yet was queued (at most the TX region's
# buffers), and what landed and the program had not taken, in the RX
# queue's ring (at most the RX region's).
engine = {d: tuple(map(int, m)) for d, *m in re.findall(r'(rx|tx) queue 0 "[^"]*": (\d+) packets, .* (\d+) dropped', text)}
(carried, tx_dropped), (landed, dropped) = engine["tx"], engine["rx"]
buffers = [int(n) for n in re.findall(r"num_bufs: (\d+)", open("configs/daqiri_bench_raw_sw_loopback.yaml").read())]
assert tx_dropped == 0 and 0 <= carried - landed - dropped <= buffers[1], engine
assert 0 <= sent - carried <= buffers[0] and 0 <= landed - received <= buffers[1], (sent, carried, landed, received)
gbps = rx["bytes"] * 8 / rx["seconds"] / 1e9
print(f"daqiri_programs (GPU): daqiri_bench_raw_gpudirect (--workload {workload}): {sent} packets sent from GPU memory, "
      f"{received} received into it ({gbps:.1f} Gb/s), {dropped} counted dropped")
PY
done

# The pcap-writer example with its software-loopback config and its demo
# transmitter: it captures what comes back into GPU memory, copying each
# packet to the host itself, until SIGINT; every record must be the frame it
# wrote into GPU memory (the port's MAC as source where the TX queue asks
# for tx_eth_src), as many as it says it wrote.
pcap=$out/pcap_writer.pcap
log=$out/pcap_writer.log
status=0
timeout -s INT 3 bin/daqiri_example_pcap_writer configs/daqiri_example_pcap_writer_sw_loopback.yaml "$pcap" --tx \
    > "$log" 2>&1 || status=$?
if ((status != 0 && status != 124)); then
    echo "daqiri_programs (GPU): the pcap-writer example failed ($status):" >&2
    tail -20 "$log" >&2
    exit 1
fi
python3 - "$log" "$pcap" configs/daqiri_example_pcap_writer_sw_loopback.yaml <<'PY'
import ipaddress, re, struct, sys
log, pcap, config = sys.argv[1:]
text = open(log).read()
written = re.search(r"^Wrote (\d+) packets \((\d+) packet bytes\)", text, re.M)
assert written, f"no 'Wrote N packets' line in {log}"
packets, packet_bytes = int(written[1]), int(written[2])
cfg = open(config).read()
def value(key):
    return re.search(rf"^\s*{key}:\s*\"?([^\"\s]+)\"?", cfg, re.M)[1]
header, payload = int(value("header_size")), int(value("payload_size"))
length = header + payload
mac = lambda s: bytes(int(b, 16) for b in s.split(":"))
# The frame DAQIRI's example builds, field by field from its config.
ip_len, udp_len = length - 14, length - 34
def checksum(raw):
    words = sum(struct.unpack(f"!{len(raw) // 2}H", raw + b"\0" * (len(raw) % 2)))
    while words >> 16:
        words = (words & 0xFFFF) + (words >> 16)
    return ~words & 0xFFFF
src, dst = (ipaddress.IPv4Address(value(k)).packed for k in ("ip_src_addr", "ip_dst_addr"))
ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 17, 0, src, dst))
ip[10:12] = struct.pack("!H", checksum(bytes(ip)))
data = bytes(i & 0xFF for i in range(length - 42))
udp = bytearray(struct.pack("!HHHH", int(value("udp_src_port")), int(value("udp_dst_port")), udp_len, 0))
udp[6:8] = struct.pack("!H", checksum(src + dst + struct.pack("!BBH", 0, 17, udp_len) + bytes(udp) + data) or 0xFFFF)
eth_src = mac(value("eth_src_addr"))
if "tx_eth_src" in cfg:
    eth_src = None  # the port's own MAC, which the engine writes
body = bytes(ip) + bytes(udp)
with open(pcap, "rb") as f:
    magic, = struct.unpack("<I", f.read(24)[:4])
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)
    records = 0
    while head := f.read(16):
        _, _, caplen, wirelen = struct.unpack("<IIII", head)
        frame = f.read(caplen)
        assert caplen == wirelen == length, (records, caplen, wirelen)
        assert frame[:6] == mac(value("eth_dst_addr")) and frame[12:14] == b"\x08\x00", records
        assert eth_src is None or frame[6:12] == eth_src, records
        assert frame[14:42] == body, (records, frame[14:42].hex(), body.hex())
        assert frame[42:] == data, records
        records += 1
assert records == packets and packet_bytes == packets * length, (records, packets, packet_bytes)
assert packets > 0
print(f"daqiri_programs (GPU): pcap-writer example: {packets} frames of {length} B sent from GPU memory, captured from it, each as written")
PY

# DAQIRI's dynamic-flow example, its two ports one software loopback
# (tests/capi/two_ports_as_loopback.py; its regions stay GPU memory): an
# isolated RX port receives nothing until the example adds a flow to queue 0,
# then one to queue 1, then one spreading over both, each deleted in turn;
# the example itself checks that each phase reached its queues alone, with
# that flow's id, and that the spread is even within its tolerance. Here:
# that it did, and the engine's counts: what the drop window and the drains
# sent was dropped and counted unmatched, and each frame the loop carried
# landed, was counted dropped, or was in flight.
config=configs/daqiri_example_dynamic_rx_flow_sw_loopback.yaml
log=$out/dynamic_rx_flow.log
timeout 60 bin/daqiri_example_dynamic_rx_flow "$config" > "$log" 2>&1 || {
    echo "daqiri_programs (GPU): the dynamic-flow example failed:" >&2
    tail -20 "$log" >&2
    exit 1
}
python3 - "$log" "$config" <<'PY'
import re, sys
log, config = sys.argv[1:]
text = open(log).read()
spread = re.search(r"^RSS queue packets: q0=(\d+) q1=(\d+)", text, re.M)
assert spread, f"no RSS line in {log}"
queues = {int(q): (int(p), int(u)) for q, p, u in
          re.findall(r"^RX complete: interface=\S+ queue=(\d) packets=(\d+) .* unexpected_flow_ids=(\d+)", text, re.M)}
assert set(queues) == {0, 1} and all(u == 0 and p > 0 for p, u in queues.values()), queues
sent = int(re.search(r"^TX complete: .* packets=(\d+)", text, re.M)[1])
carried = int(re.search(r'tx queue 0 "[^"]*": (\d+) packets', text)[1])
landed = [tuple(map(int, m)) for m in re.findall(r'rx queue \d "[^"]*": (\d+) packets, .* (\d+) dropped', text)]
unmatched = re.search(r"rx dropped before a queue: (\d+) \(.*unmatched_flow=(\d+)", text)
assert unmatched and int(unmatched[2]) > 0, "the drop window's frames were not counted unmatched"
dropped = int(unmatched[1]) + sum(d for _, d in landed)
buffers = [int(n) for n in re.findall(r"num_bufs: (\d+)", open(config).read())]
in_flight = carried - sum(p for p, _ in landed) - dropped
assert 0 <= sent - carried <= buffers[0] and 0 <= in_flight <= sum(buffers[1:]), (sent, carried, landed, dropped)
# The program counts what it took; the engine, what landed in each queue's
# ring (the example's last drain leaves it time to take it all).
assert all(0 <= p - queues[q][0] <= buffers[1 + q] for q, (p, _) in enumerate(landed)), (queues, landed)
print(f"daqiri_programs (GPU): dynamic-flow example: {sent} frames sent from GPU memory; queue 0 took "
      f"{queues[0][0]}, queue 1 {queues[1][0]} (spread q0={spread[1]} q1={spread[2]}), each with its flow's id; "
      f"{unmatched[2]} counted unmatched while no flow took them")
PY

# The GDS-write example with its software-loopback config, GPU memory both
# ways (gds_write_check.py says what is checked). Our writers copy GPU
# segments to the host: no GDS needed.
python3 gds_write_check.py bin/daqiri_example_gds_write configs/daqiri_example_gds_write_sw_loopback.yaml "$out"
