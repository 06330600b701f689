#!/usr/bin/env bash
# libdaqiri, DAQIRI's C and C++ API over our engine, as DAQIRI's users
# build against it: installed by gateway/capi/package.sh, found through
# pkg-config and through CMake's find_package(daqiri), linked shared and
# static, and run (tests/capi/api_test.cpp: UDP bursts both ways between a
# server and a client interface, the writers, and the misuses DAQIRI leaves
# undefined), and DAQIRI's dynamic RX flows on a software-loopback port
# (tests/capi/flows_test.cpp), NetworkConfig parsed, refused and built in
# code (tests/capi/config_test.cpp), and its S3 writer against a real S3 server
# (tests/capi/s3_test.cpp). The pcap it writes is read back by tshark, its
# raw files by Python, its S3 objects by curl; package.sh checks the library
# exports what its headers declare.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=target/capi
prefix=$(gateway/capi/package.sh "$work/prefix")

# pkg-config, as a Makefile project would.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
g++ -std=c++17 -Wall -Wextra -Werror -o "$work/api_test_pkgconfig" tests/capi/api_test.cpp \
    $(pkg-config --cflags --libs daqiri) -Wl,-rpath,"$prefix/lib"
# CMake, as DAQIRI's own projects do.
cmake -S tests/capi -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror -pedantic" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$work/cmake" --parallel 2 >/dev/null

# Each run in a network namespace of its own where this may (root), so the
# fixed loopback ports meet nothing else.
isolated() {
    if [[ $EUID == 0 ]]; then
        unshare --net bash -c 'ip link set lo up && "$@"' isolated "$@"
    else
        "$@"
    fi
}

"$work/cmake/c_api_test"
# Dynamic RX flows on a software-loopback port (no sockets: no namespace needed).
g++ -std=c++17 -Wall -Wextra -Werror -o "$work/flows_test" tests/capi/flows_test.cpp \
    $(pkg-config --cflags --libs daqiri) -Wl,-rpath,"$prefix/lib"
"$work/flows_test"
g++ -std=c++17 -Wall -Wextra -Werror -o "$work/config_test" tests/capi/config_test.cpp \
    $(pkg-config --cflags --libs daqiri) -Wl,-rpath,"$prefix/lib"
isolated "$work/config_test" "$work" 2>/dev/null
for test in "$work/api_test_pkgconfig" "$work/cmake/api_test_shared" "$work/cmake/api_test_static"; do
    out=$work/out/$(basename "$test")
    rm -rf "$out" && mkdir -p "$out"
    isolated "$test" "$(realpath "$out")" > "$out/stdout" 2> "$out/stderr" || {
        echo "capi: $test failed:" >&2
        grep -v '^  ' "$out/stdout" >&2
        exit 1
    }
    tail -1 "$out/stdout"
    pcap_packets=$(sed -n 's/^pcap_packets //p' "$out/stdout")
    raw_packets=$(sed -n 's/^raw_packets //p' "$out/stdout")
    async_packets=$(sed -n 's/^pcap_async_packets //p' "$out/stdout")
    for pcap in rx rx_async; do
        tshark -r "$out/$pcap.pcap" -T fields -e ip.src -e udp.srcport -e ip.dst -e udp.dstport -e data.data \
            2>/dev/null > "$out/$pcap.fields"
    done
    python3 - "$out" "$pcap_packets" "$raw_packets" "$async_packets" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
pcap_packets, raw_packets, async_packets = map(int, sys.argv[2:5])
def payload(seq):  # api_test.cpp's fill()
    return seq.to_bytes(4, "big") + bytes((seq * 7 + i) & 0xFF for i in range(4, 1000))
def frames(name, count):
    rows = [line.split("\t") for line in (out / f"{name}.fields").read_text().splitlines()]
    assert len(rows) == count, f"tshark read {len(rows)} packets from {name}.pcap, api_test wrote {count}"
    for src, sport, dst, dport, data in rows:
        assert (src, sport, dst, dport) == ("127.0.0.1", "47802", "127.0.0.1", "47801"), (src, sport, dst, dport)
        body = bytes.fromhex(data)
        assert body == payload(int.from_bytes(body[:4], "big")), f"a payload in {name}.pcap differs from what was sent"
    return len(rows)
rows = frames("rx", pcap_packets)
frames("rx_async", async_packets)
def raw_files(prefix):
    found = [p for p in out.iterdir() if re.fullmatch(rf"{prefix}_\d+", p.name)]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))
raw = raw_files("raw")
assert len(raw) == raw_packets, f"{len(raw)} raw files, {raw_packets} packets"
for path in raw:
    body = path.read_bytes()
    assert len(body) == 996, f"{path.name}: {len(body)} bytes past the 4-byte offset"
    assert any(body == payload(seq)[4:] for seq in range(1000, 1064)), f"{path.name} differs"
written_later = [p.read_bytes() for p in raw_files("raw_async")]
assert written_later == [p.read_bytes() for p in raw], "the asynchronous raw files differ from the synchronous ones"
print(f"capi: {out.name}: tshark read {rows} + {async_packets} frames (sync, async), {len(raw)} raw files twice, bytes as sent")
PY
done

# DAQIRI's S3 raw writer against the suite's S3 server (tests/run.sh starts
# it: tests/s3/server.sh), each object read back by curl, which signs with
# AWS SigV4 itself, and compared with what the program sent.
g++ -std=c++17 -Wall -Wextra -Werror -o "$work/s3_test" tests/capi/s3_test.cpp \
    $(pkg-config --cflags --libs daqiri) -Wl,-rpath,"$prefix/lib"
if [[ -z ${DAQIRI_TEST_S3_ENDPOINT:-} ]]; then
    echo "capi: s3_test SKIPPED: no S3 server (DAQIRI_TEST_S3_ENDPOINT; tests/run.sh starts one with tests/s3/server.sh)" >&2
    exit 0
fi
read -r access secret < <(tests/s3/server.sh credentials)
bucket=capi-$$
s3_get() { # path out: the HTTP status
    curl -s -o "$2" -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
        -X "${3:-GET}" "$DAQIRI_TEST_S3_ENDPOINT/$1"
}
[[ $(s3_get "$bucket" /dev/null PUT) == 200 ]] || { echo "capi: cannot create bucket $bucket" >&2; exit 1; }
out=$work/out/s3_test
rm -rf "$out" && mkdir -p "$out"
AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret "$work/s3_test" "$DAQIRI_TEST_S3_ENDPOINT" "$bucket" \
    > "$out/stdout" 2>&1 || { echo "capi: s3_test failed:" >&2; cat "$out/stdout" >&2; exit 1; }
objects=$(sed -n 's/^s3_objects //p' "$out/stdout")
for ((i = 0; i < objects; i++)); do
    [[ $(s3_get "$bucket/capi/run1/packet_$i" "$out/packet_$i") == 200 ]] || { echo "capi: object $i missing" >&2; exit 1; }
done
python3 - "$out" "$objects" <<'PY'
import pathlib, sys
out, objects = pathlib.Path(sys.argv[1]), int(sys.argv[2])
assert objects == 16, f"s3_test uploaded {objects} objects of 16"
for i in range(objects):  # s3_test.cpp's payload(i, b), payload_len(i)
    want = bytes((b * 13 + i) & 0xFF for b in range(200 + 37 * i))
    got = (out / f"packet_{i}").read_bytes()
    assert got == want, f"object {i}: {len(got)} bytes read back, {len(want)} sent, or they differ"
print(f"capi: s3_test: {objects} objects read back by curl, bytes as sent")
PY
