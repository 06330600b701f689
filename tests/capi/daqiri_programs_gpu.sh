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
# The HDS benchmark keeps its headers in hugepages (6 MiB of them).
free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
if ((free < 16)) && [[ -w /proc/sys/vm/nr_hugepages ]]; then
    echo $(($(cat /proc/sys/vm/nr_hugepages) + 16 - free)) > /proc/sys/vm/nr_hugepages
fi

# One of DAQIRI's raw benchmarks on a software-loopback config, GPU memory
# both ways: its report (what it sent, where it says) and our engine's
# counts agree. Every frame is the
# config's bench_tx header_size + payload_size bytes. The engine's counts
# (print_stats, while it runs, before the program's shutdown): every frame
# the loop carried landed, was dropped by a counted reason, or was still
# between the loop and the RX queue; what the program sent and the loop had
# not carried yet was queued, and what landed and the program had not taken
# was in the RX queue's ring (each at most a region's buffers).
#   raw_bench PROGRAM CONFIG LABEL [ARG...]
raw_bench() {
    local program=$1 config=$2 label=$3
    shift 3
    local log=$out/$label.log
    timeout 60 "bin/$program" "$config" --seconds 5 "$@" > "$log" 2>&1 || {
        echo "daqiri_programs (GPU): $program $* failed:" >&2
        tail -20 "$log" >&2
        exit 1
    }
    python3 - "$log" "$config" "$program $*" <<'PY'
import re, sys
log, config, label = sys.argv[1:]
text, cfg = open(log).read(), open(config).read()
def counts(kind):
    line = re.search(rf"^{kind} complete: (.*)$", text, re.M)
    assert line, f"no '{kind} complete' line in {log}"
    return {k: float(v) for k, v in (kv.split("=") for kv in line.group(1).split()) if k not in ("interface", "queue", "queues")}
rx = counts("RX")
received = int(rx["packets"])
bench_tx = cfg[cfg.index("bench_tx:"):]
frame = sum(int(re.search(rf"\b{key}: (\d+)", bench_tx)[1]) for key in ("header_size", "payload_size"))
assert received > 0 and rx["bytes"] == received * frame, (frame, rx)
engine = {d: tuple(map(int, m)) for d, *m in re.findall(r'(rx|tx) queue 0 "[^"]*": (\d+) packets, .* (\d+) dropped', text)}
(carried, tx_dropped), (landed, dropped) = engine["tx"], engine["rx"]
buffers = max(int(n) for n in re.findall(r"num_bufs: (\d+)", cfg))
assert tx_dropped == 0 and 0 <= carried - landed - dropped <= buffers, engine
assert 0 <= landed - received <= buffers, (carried, landed, received)
sent = carried  # the HDS benchmark reports no TX line: the engine's count stands
if re.search(r"^TX complete: ", text, re.M):
    tx = counts("TX")
    sent = int(tx["packets"])
    assert tx["bytes"] == sent * frame and 0 <= sent - carried <= buffers, (frame, tx, carried)
gbps = rx["bytes"] * 8 / rx["seconds"] / 1e9
print(f"daqiri_programs (GPU): {label.strip()}: {sent} frames of {frame} B sent from GPU memory, "
      f"{received} received into it ({gbps:.1f} Gb/s), {dropped} counted dropped")
PY
}

# daqiri_bench_raw_gpudirect on DAQIRI's software-loopback config: bursts
# of 10240 packets of 1064 bytes written into GPU memory with cudaMemcpy,
# sent from there, received into GPU memory; then the same with its GEMM
# workload, which reorders each received burst's payloads by sequence number
# with DAQIRI's kernel entry (ours) and multiplies them with cuBLAS.
for workload in none gemm; do
    raw_bench daqiri_bench_raw_gpudirect configs/daqiri_bench_raw_sw_loopback.yaml raw_gpudirect_$workload --workload $workload
done

# daqiri_bench_raw_hds with its two-port config as one software loopback
# (two_ports_as_loopback.py): each packet two segments, its 64 header bytes
# in hugepage memory (set_eth_header, set_ipv4_header, set_udp_header) and
# its 1000 payload bytes in GPU memory, sent so and received split the same
# way (header-data split), matched by a flow on UDP ports and IPv4 length.
raw_bench daqiri_bench_raw_hds configs/daqiri_bench_raw_tx_rx_hds_sw_loopback.yaml raw_hds

# daqiri_bench_raw_reorder_quantize with its two-port config as one software
# loopback, its RX queue landing in pinned host memory (a GPU reorder plan
# reads packets where they land, and on the loopback the CPU lands them):
# int4 samples behind a sequence and a batch number that the benchmark
# writes over the IPv4 header's total length and identification, reordered
# and converted to fp32 on the GPU by the engine's plan; the benchmark checks
# batches of the output against its own conversion and fails on a mismatch.
# Here: that it checked enough of them, and that every frame matched its
# flow (a NIC's flow engine does not read the IPv4 total length).
log=$out/raw_reorder_quantize.log
timeout 90 bin/daqiri_bench_raw_reorder_quantize configs/daqiri_bench_raw_tx_rx_reorder_quantize_seq_batch_sw_loopback.yaml \
    --seconds 5 > "$log" 2>&1 || {
    echo "daqiri_programs (GPU): daqiri_bench_raw_reorder_quantize failed:" >&2
    tail -20 "$log" >&2
    exit 1
}
python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
verify = re.search(r"^Reorder quantize verify: input=(\S+) output=(\S+) verified_batches=(\d+) verified_chunks=(\d+) failures=(\d+)", text, re.M)
assert verify and int(verify[3]) >= 3 and verify[5] == "0", verify and verify.group(0)
delivered = int(re.search(r'rx queue 0 "[^"]*": (\d+) packets', text)[1])
assert delivered > 0 and "unmatched_flow" not in text, "frames went unmatched"
print(f"daqiri_programs (GPU): daqiri_bench_raw_reorder_quantize: {verify[1]} -> {verify[2]} reordered on the GPU, "
      f"{verify[3]} batches ({verify[4]} chunks) equal to the benchmark's own conversion; {delivered} aggregates")
PY


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
