#!/usr/bin/env bash
# DAQIRI's own programs, unchanged, on our engine: the examples of DAQIRI
# 2026.7 (the reference tarball, tests/reference/build.sh) compiled from
# their sources by their own CMakeLists against libdaqiri (a CUDA build of
# gateway/capi: the examples link CUDA and call DAQIRI's GPU kernels), and
# its Python example on our `daqiri` module (gateway/python-daqiri), each
# run with its own config. Machines with fewer cores than a config names get
# its cores folded onto theirs (each core modulo the count); other changes
# to a config are named where made. Usage: tests/capi/daqiri_programs.sh
# Exits 3 (said why) when the reference sources are nowhere.
#   tests/capi/daqiri_programs.sh --pack DIR [--release]
# builds them and packs those that send from GPU memory, with libdaqiri
# (optimised with --release) and daqiri_programs_gpu.sh as DIR/run.sh, for
# the GPU machine (tests/gpu/build.sh), instead of running anything here.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/lib.sh
pack="" pack_profile=()
if [[ ${1:-} == --pack ]]; then
    pack=${2:?--pack takes a folder}
    [[ ${3:-} == --release ]] && pack_profile=(--release)
fi
work=target/capi/daqiri-programs
status=0
tarball=$(tests/reference/build.sh tarball daqiri) || status=$?
((status == 0)) || exit "$status"
cuda=$(tests/reference/build.sh cuda)
# With the RoCE backend too: the VM test bed runs daqiri_bench_rdma on it
# (tests/capi/daqiri_rdma_vm.sh).
prefix=$(gateway/capi/package.sh target/capi/prefix-cuda --features cuda,rdma)

# DAQIRI's tree, as released (kept while the tarball is the same).
source=$work/daqiri-$(sha256sum "$tarball" | cut -c1-16)
if [[ ! -d $source ]]; then
    rm -rf "$work" && mkdir -p "$work"
    tar -C "$work" -xzf "$tarball"
    mv "$work"/daqiri-* "$source.partial" && mv "$source.partial" "$source"
fi

# The CUDA toolkit from the reference build (PyPI's wheels); no driver needed to build.
cmake -S tests/capi/daqiri_programs -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DDAQIRI_SOURCE_DIR="$(realpath "$source")" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$prefix/lib:$cuda/lib" >/dev/null
cmake --build "$work/build" --target daqiri_bench_socket >/dev/null
bench=$work/build/examples/daqiri_bench_socket
# These build unchanged too. The first six run on the GPU machine (their
# software-loopback configs send from GPU memory: --pack below; the last
# three's configs, written for two ports and a wire, become one software
# loopback), the first and the reorder benchmark here too, on DPDK's virtual
# devices (daqiri_programs_dpdk.sh), the reorder benchmark on the software
# loopback below, the RDMA one in the VM test bed (soft-RoCE:
# tests/capi/daqiri_rdma_vm.sh).
on_gpu=(daqiri_bench_raw_gpudirect daqiri_example_pcap_writer daqiri_example_gds_write daqiri_example_dynamic_rx_flow
    daqiri_bench_raw_hds daqiri_bench_raw_reorder_quantize)
for target in "${on_gpu[@]}" daqiri_bench_raw_reorder_seq daqiri_bench_rdma; do
    cmake --build "$work/build" --target "$target" >/dev/null
done
echo "daqiri_programs: built unchanged against libdaqiri: daqiri_bench_socket ${on_gpu[*]} daqiri_bench_raw_reorder_seq daqiri_bench_rdma"

# DAQIRI's example configs through parse_network_config into NetworkConfig
# and back through what daqiri_init(NetworkConfig&) writes, in C++
# (tests/capi/config_test.cpp) and in Python: each config libdaqiri accepts
# must come back as the same config;
# those a program below runs must be accepted. The others are templates
# (<CPU_CORE> ...) or hold what a member of DAQIRI's cannot (a uint16_t
# max_payload_size of 1048576), refused by name.
if [[ -z $pack ]]; then
    g++ -std=c++17 -Wall -Wextra -Werror -o "$work/config_test" tests/capi/config_test.cpp \
        -I"$prefix/include" -L"$prefix/lib" -ldaqiri -Wl,-rpath,"$prefix/lib"
    # The RDMA calls' own test, for the VM test bed (tests/capi/daqiri_rdma_vm.sh).
    g++ -std=c++17 -Wall -Wextra -Werror -pthread -o "$work/rdma_test" tests/capi/rdma_test.cpp \
        -I"$prefix/include" -L"$prefix/lib" -ldaqiri -Wl,-rpath,"$prefix/lib"
    rm -rf "$work/configs" && mkdir -p "$work/configs"
    "$work/config_test" "$work/configs" "$source"/examples/*.yaml > "$work/configs.log" 2>/dev/null || {
        echo "daqiri_programs: config_test failed:" >&2
        grep -v "^refused\|^error:\|^$" "$work/configs.log" >&2
        exit 1
    }
    # Python's NetworkConfig (`import daqiri`) the same way, against the same trees.
    "$(tests/python_daqiri/venv.sh)" - "$work/configs" <<'PY'
import pathlib, sys, yaml
import daqiri
out = pathlib.Path(sys.argv[1])
def tree(config):
    config.pop("(derived)", None)
    config.get("memory_regions", []).sort(key=lambda region: region["name"])  # NetworkConfig keeps them by name
    return config
accepted = []
for path_file in sorted(out.glob("*.path")):
    stem = str(path_file)[: -len(".path")]
    name = pathlib.Path(path_file.read_text()).name
    parsed = tree(yaml.safe_load(pathlib.Path(stem + ".parsed.yaml").read_text()))
    written = tree(yaml.safe_load(pathlib.Path(stem + ".written.yaml").read_text()))
    assert parsed == written, f"{name}: C++'s NetworkConfig wrote back another config than it parsed"
    status, config = daqiri.parse_network_config(path_file.read_text())
    assert status == daqiri.Status.SUCCESS, f"{name}: Python's parse_network_config: {daqiri.last_error()}"
    status, again = daqiri.parse_network_config(yaml.safe_dump({"daqiri": {"cfg": config.as_dict()}}))
    assert status == daqiri.Status.SUCCESS and again == config, f"{name}: Python's NetworkConfig: {daqiri.last_error()}"
    accepted.append(name)
run_here = {"daqiri_bench_socket_udp_tx_rx.yaml", "daqiri_bench_socket_tcp_tx_rx.yaml", "daqiri_bench_raw_sw_loopback.yaml",
            "daqiri_bench_raw_sw_loopback_reorder_seq_1024.yaml", "daqiri_example_pcap_writer_sw_loopback.yaml",
            "daqiri_example_gds_write_sw_loopback.yaml"}
assert run_here <= set(accepted), f"refused: {sorted(run_here - set(accepted))}"
print(f"daqiri_programs: {len(accepted)} of DAQIRI's example configs through NetworkConfig (C++ and Python) and back, unchanged")
PY
fi

if [[ -n $pack ]]; then
    rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib" "$pack/configs"
    for target in "${on_gpu[@]}"; do
        cp "$work/build/examples/$target" "$pack/bin/"
        strip --strip-debug "$pack/bin/$target"
    done
    library=$prefix
    ((${#pack_profile[@]})) && library=$(gateway/capi/package.sh target/capi/prefix-cuda-release --release --features cuda)
    cp -L "$library"/lib/libdaqiri.so.? "$pack/lib/"
    strip --strip-debug "$pack"/lib/libdaqiri.so.?
    # The libraries the programs link besides libdaqiri, the C++ runtime
    # and CUDA's (the GPU machine has those: daqiri_programs_gpu.sh finds them).
    copy_linked_libraries "$pack/lib" '/(libstdc\+\+|libgcc_s)\.so|/libcu|/libdaqiri' "$work/build/examples/${on_gpu[0]}"
    cp "$source/examples/daqiri_bench_raw_sw_loopback.yaml" "$source/examples/daqiri_example_pcap_writer_sw_loopback.yaml" \
        "$source/examples/daqiri_example_gds_write_sw_loopback.yaml" "$pack/configs/"
    # DAQIRI ships these examples' configs for two ports and a wire.
    for config in daqiri_example_dynamic_rx_flow daqiri_bench_raw_tx_rx_hds daqiri_bench_raw_tx_rx_reorder_quantize_seq_batch; do
        tests/capi/two_ports_as_loopback.py "$source/examples/$config.yaml" "$pack/configs/${config}_sw_loopback.yaml"
    done
    # A GPU reorder plan reads packets where they land: on the loopback, the CPU lands them.
    sed -i '/- name: Data_RX_GPU$/{n;s/kind: device/kind: host_pinned/}' \
        "$pack/configs/daqiri_bench_raw_tx_rx_reorder_quantize_seq_batch_sw_loopback.yaml"
    cp tests/capi/daqiri_programs_gpu.sh "$pack/run.sh"
    cp tests/capi/gds_write_check.py "$pack/"
    echo "daqiri_programs: packed ${on_gpu[*]} for the GPU machine in $pack ($(du -sh "$pack" | cut -f1))"
    exit 0
fi



# Runs a program with tshark capturing the loopback beside it (to $1), in
# a network namespace of its own where this may (root); elsewhere the
# program alone, its own counts the only ones.
capture_run() {
    local pcap=$1
    shift
    if [[ $EUID != 0 ]]; then
        echo "daqiri_programs: not root: no namespace, no capture; the program's own counts only" >&2
        timeout 60 "$@"
        return
    fi
    unshare --net bash -c '
        ip link set lo up
        pcap=$1; shift
        tshark -i lo -w "$pcap" -q 2> "$pcap.log" & capture=$!
        for _ in $(seq 100); do grep -q "Capturing on" "$pcap.log" && break; sleep 0.1; done
        status=0
        timeout 60 "$@" || status=$?
        sleep 0.5
        kill -INT $capture && wait $capture
        exit $status' capture_run "$(realpath "$pcap")" "$@"
}

# Each config has both sides send and receive 1000 messages of 1024 bytes:
# UDP, datagram for datagram (each received, or dropped and counted by its
# reason where the application fell behind); TCP, the same bytes, in as
# many reads as the stream gives (the program counts reads). Checked from
# the program's report, the engine's counters and the capture.
for transport in udp tcp; do
    config=$work/daqiri_bench_socket_${transport}_tx_rx.yaml
    tests/capi/fold_cores.py "$source/examples/daqiri_bench_socket_${transport}_tx_rx.yaml" "$config"
    log=$work/socket_$transport.log
    pcap=$work/socket_$transport.pcap
    seconds=20
    [[ $transport == tcp ]] && seconds=8
    capture_run "$pcap" "$bench" "$config" --seconds $seconds --mode both > "$log" 2>&1 || {
        echo "daqiri_programs: daqiri_bench_socket ($transport) failed:" >&2
        tail -20 "$log" >&2
        exit 1
    }
    fields=()
    if [[ -s $pcap ]]; then
        tshark -r "$pcap" -T fields -e udp.srcport -e udp.length -e tcp.srcport -e tcp.len -e tcp.seq 2>/dev/null > "$pcap.fields"
        fields=("$pcap.fields")
    fi
    python3 - "$log" "$transport" "${fields[@]}" <<'PY'
import collections, re, sys
log, transport = sys.argv[1], sys.argv[2]
text = open(log).read()
sides = dict(re.findall(r"^(Server|Client) complete: (.*)$", text, re.M))
assert set(sides) == {"Server", "Client"}, f"no completion lines in {log}"
# What each side's RX queue dropped, by the engine's count (print_stats).
dropped = {m[0]: int(m[1]) for m in re.findall(r'rx queue \d+ "(Server|Client)_RX_Queue": .* (\d+) dropped', text)}
for side, fields in sides.items():
    pairs = (kv.split("=") for kv in fields.split() if "=" in kv)
    counts = {k: int(v) for k, v in pairs if k != "seconds"}
    assert counts["sent_packets"] == 1000 and counts["sent_bytes"] == 1024000, f"{side}: {counts}"
    if transport == "udp":
        # Every datagram is received or counted dropped by its reason (a
        # loaded machine's application can fall behind its queue).
        assert counts["recv_packets"] + dropped[side] == 1000, f"{side}: {counts}, dropped {dropped[side]}"
        assert counts["recv_bytes"] == counts["recv_packets"] * 1024, f"{side}: {counts}"
    else:
        assert counts["recv_bytes"] == 1024000 and dropped[side] == 0, f"{side}: {counts}, dropped {dropped[side]}"
        assert 1 <= counts["recv_packets"] <= 1000, f"{side}: {counts}"
seen = ""
if len(sys.argv) > 3:
    datagrams, stream = collections.Counter(), collections.Counter()
    for line in open(sys.argv[3]):
        udp_port, udp_len, tcp_port, tcp_len, tcp_seq = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
        if udp_port and int(udp_len) == 8 + 1024:
            datagrams[udp_port] += 1
        if tcp_port and tcp_len and int(tcp_len) > 0:
            # The stream's length by its highest byte (relative sequence
            # numbers start at 1): a segment the kernel sent again counts once.
            stream[tcp_port] = max(stream[tcp_port], int(tcp_seq) + int(tcp_len) - 1)
    if transport == "udp":
        assert sorted(datagrams.values()) == [1000, 1000], f"capture: datagrams of 1024 B by source port {dict(datagrams)}"
        seen = "; tshark saw 1000 datagrams of 1024 B each way"
    else:
        assert sorted(stream.values()) == [1024000, 1024000], f"capture: TCP bytes by source port {dict(stream)}"
        seen = "; tshark saw 1,024,000 stream bytes each way"
lost = sum(dropped.values())
note = f" ({lost} counted dropped by the engine, the application behind)" if lost else ""
print(f"daqiri_programs: daqiri_bench_socket ({transport}): each side sent 1000 x 1024 B and received them{note}{seen}")
PY
done

# DAQIRI's Python benchmark, examples/daqiri_bench_raw_tx_rx.py, on our
# `daqiri` module, with DAQIRI's software-loopback config: TX bursts of
# 10240 packets of 1064 bytes filled from Python, looped back, received and
# counted. Two changes besides the cores: the config's GPU memory is host
# memory where no GPU is, and its IP addresses "000.000.000.0" become
# "0.0.0.0", which the example can parse (Python's ipaddress refuses
# leading zeros: the example fails on this config under DAQIRI too).
python=$(tests/python_daqiri/venv.sh)
config=$work/daqiri_bench_raw_sw_loopback.yaml
tests/capi/fold_cores.py "$source/examples/daqiri_bench_raw_sw_loopback.yaml" "$config"
nvidia-smi -L >/dev/null 2>&1 || sed -i 's/kind: "device"/kind: "host"/' "$config"
sed -i 's/000\.000\.000\.0/0.0.0.0/' "$config"
log=$work/python_raw_tx_rx.log
timeout 120 "$python" "$source/examples/daqiri_bench_raw_tx_rx.py" "$config" --seconds 5 > "$log" 2>&1 || {
    echo "daqiri_programs: daqiri_bench_raw_tx_rx.py failed:" >&2
    tail -20 "$log" >&2
    exit 1
}
python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def counts(kind):
    line = re.search(rf"^{kind} complete: (.*)$", text, re.M)
    assert line, f"no '{kind} complete' line in {sys.argv[1]}"
    return {k: v for k, v in (kv.split("=") for kv in line.group(1).split())}
tx, rx = counts("TX"), counts("RX")
sent, received = int(tx["packets"]), int(rx["packets"])
assert int(tx["bytes"]) == sent * 1064 and int(rx["bytes"]) == received * 1064, (tx, rx)
assert received >= 10240 and received % 10240 == 0 and sent >= received, (tx, rx)
# Drops only by a counted reason (an application behind its queue), and what
# was sent and neither received nor dropped was in flight at the stop.
dropped = sum(int(n) for n in re.findall(r"(\d+) dropped", text))
assert 0 <= sent - received - dropped <= 4 * 10240, (tx, rx, dropped)
print(f"daqiri_programs: daqiri_bench_raw_tx_rx.py: {sent} packets sent, {received} received, {dropped} counted dropped")
PY


# DAQIRI's reorder benchmark, daqiri_bench_raw_reorder_seq, with its
# software-loopback config (hugepages, a CPU reorder plan of 1024 packets
# per batch over flow 0): TX bursts framed with set_eth_header,
# set_ipv4_header and set_udp_header, each packet's sequence number at its
# payload's start; every aggregate counted and its ReorderBurstInfo read
# (DAQIRI_BENCH_CHECK_REORDER_INFO). Checked against the engine's counters.

config=$work/daqiri_bench_raw_sw_loopback_reorder_seq_1024.yaml
tests/capi/fold_cores.py "$source/examples/daqiri_bench_raw_sw_loopback_reorder_seq_1024.yaml" "$config"
log=$work/reorder_seq.log
DAQIRI_BENCH_CHECK_REORDER_INFO=1 timeout 60 "$work/build/examples/daqiri_bench_raw_reorder_seq" "$config" --seconds 5 \
    > "$log" 2>&1 || {
    echo "daqiri_programs: daqiri_bench_raw_reorder_seq failed:" >&2
    tail -20 "$log" >&2
    exit 1
}
python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
line = re.search(r"^RX complete: (.*)$", text, re.M)
assert line, f"no 'RX complete' line in {sys.argv[1]}"
rx = {k: int(v) for k, v in (kv.split("=") for kv in line[1].split())}
# The engine's own counts (print_stats): what the TX queue sent and the RX
# queue delivered or dropped by its reason.
sent = int(re.search(r'tx queue 0 "tx_q_0": (\d+) packets', text)[1])
delivered, dropped = map(int, re.search(r'rx queue 0 "rx_q_0": (\d+) packets, .* (\d+) dropped', text).groups())
batches = rx["aggregated_batches"]
assert batches > 0 and rx["passthrough_packets"] == 0, rx
# Every aggregate whole (1024 packets of 1000 payload bytes each) but one a
# timeout flushed, its info read.
full = batches - rx["timeout_batches"]
assert rx["aggregated_packets"] == rx["packets"] and 1024 * full <= rx["packets"] <= 1024 * batches, rx
assert rx["bytes"] == 1000 * rx["packets"], rx
assert rx["reorder_info_success"] == batches and rx["reorder_info_errors"] == rx["reorder_info_not_ready"] == 0, rx
# Batch ids count up from the first sequence number; the batches the
# application did not see were dropped by a counted reason or in flight at the stop.
unseen = rx["last_batch_id"] - rx["first_batch_id"] + 1 - batches
assert 0 <= unseen * 1024 <= dropped + 4 * 1024, (rx, dropped)
# The program prints the counters with the engine still running: a TX burst
# the loopback had not yet delivered or dropped is in flight, not lost.
assert 0 <= sent - delivered - dropped <= 4 * 1024, (sent, delivered, dropped)
print(f"daqiri_programs: daqiri_bench_raw_reorder_seq: {batches} aggregates of 1024 packets "
      f"(batch ids {rx['first_batch_id']}..{rx['last_batch_id']}), each ReorderBurstInfo read; "
      f"{sent} sent, {dropped} counted dropped")
PY

# DAQIRI's GDS-write example with its software-loopback config (the file
# writers, synchronous and asynchronous; gds_write_check.py says what is
# checked). Its GPU memory is host memory where no GPU is (the GPU machine
# runs it with GPU memory: --pack); nothing else changes.
config=$work/daqiri_example_gds_write_sw_loopback.yaml
tests/capi/fold_cores.py "$source/examples/daqiri_example_gds_write_sw_loopback.yaml" "$config"
nvidia-smi -L >/dev/null 2>&1 || sed -i 's/kind: "device"/kind: "host"/' "$config"
rm -rf "$work/gds" && mkdir -p "$work/gds"
tests/capi/gds_write_check.py "$work/build/examples/daqiri_example_gds_write" "$config" "$work/gds"

# DAQIRI's raw benchmarks on our DPDK backend over DPDK's virtual devices
# (daqiri_programs_dpdk.sh says what runs and what is checked).
dpdk_programs=0
tests/capi/daqiri_programs_dpdk.sh "$work" "$source" || dpdk_programs=$?
case $dpdk_programs in
    0) ;;
    3) echo "daqiri_programs: DAQIRI's raw benchmarks on our DPDK backend are SKIPPED: no DPDK 25.11 sources (../shared/reference)" >&2 ;;
    *) exit "$dpdk_programs" ;;
esac
