#!/usr/bin/env bash
# Packs tests/bench/daqiri_socket.sh for a machine without cargo or iproute2
# but with the CUDA toolkit, cmake and g++ (the GPU host): a release gateway,
# Debian's ip, ss and ethtool with the libraries `ldd` names, and DAQIRI's
# source tarball (as tests/reference/build.sh finds and checks it), which
# run.sh builds there (sockets only, as its README's GPU-host build) before
# running the benchmark with GW and DAQIRI_BENCH set.
#   tests/bench/pack_daqiri_socket.sh [folder]   (default target/daqiri-socket-bench)
#   cd <folder> && ./run.sh [VAR=value...]        (on that machine, as root)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/daqiri-socket-bench}
rm -rf "$out" && mkdir -p "$out/lib" "$out/bin" "$out/libexec" "$out/tests/bench"
cargo build --release -q -p daqiri-gateway
cp target/release/daqiri-gateway "$out/bin/"
strip "$out/bin/daqiri-gateway"
# Debian's tools, each behind a wrapper that gives it (and only it) the
# libraries it was linked with: `ip netns exec` finds them on PATH too.
for tool in /usr/sbin/ethtool /usr/bin/ss "$(command -v ip)"; do
    name=$(basename "$tool")
    cp "$tool" "$out/libexec/"
    ldd "$tool" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux.*)\.so' |
        xargs -r cp -L -t "$out/lib/"
    printf '#!/bin/sh\nhere=$(dirname "$(readlink -f "$0")")/..\nLD_LIBRARY_PATH=$here/lib exec "$here/libexec/%s" "$@"\n' \
        "$name" >"$out/bin/$name"
    chmod +x "$out/bin/$name"
done
cp "$(tests/reference/build.sh tarball daqiri)" "$out/"
cp tests/bench/lib.sh tests/bench/daqiri_socket.sh "$out/tests/bench/"
cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Builds DAQIRI's socket bench here (its CMake project, sockets engine only),
# then runs tests/bench/daqiri_socket.sh with the packed gateway and tools.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ ! -x $here/daqiri/build/examples/daqiri_bench_socket ]]; then
    mkdir -p "$here/daqiri" && tar -C "$here/daqiri" --strip-components=1 -xzf "$here/daqiri-1134167.tar.gz"
    cmake -S "$here/daqiri" -B "$here/daqiri/build" -DDAQIRI_ENGINE="" -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release >"$here/daqiri-build.log" 2>&1 || { tail -30 "$here/daqiri-build.log"; exit 1; }
    make -C "$here/daqiri/build" -j"$(nproc)" daqiri_bench_socket >>"$here/daqiri-build.log" 2>&1 ||
        { tail -30 "$here/daqiri-build.log"; exit 1; }
fi
export PATH="$here/bin:$PATH" GW="$here/bin/daqiri-gateway" DAQIRI_BENCH="$here/daqiri/build/examples/daqiri_bench_socket"
for assignment in "$@"; do export "${assignment?}"; done
cd "$here" && exec tests/bench/daqiri_socket.sh
RUN
chmod +x "$out/run.sh" "$out/tests/bench/daqiri_socket.sh"
du -sh "$out"
