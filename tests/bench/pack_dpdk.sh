#!/usr/bin/env bash
# Packs what the DPDK benchmarks need on a machine without DPDK (the GPU
# host): a gateway built with --features dpdk, dpdk-testpmd, the DPDK
# libraries and the PMD plugins they load, and the libraries `ldd` names,
# with run.sh that points the loader at them.
#   tests/bench/pack_dpdk.sh [folder]   (default target/dpdk-bench)
#   cd <folder> && ./run.sh tests/bench/dpdk_scaling.sh ...   (on that machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/dpdk-bench}
rm -rf "$out" && mkdir -p "$out/lib" "$out/pmds" "$out/bin"
cargo build --release -q -p daqiri-gateway --features dpdk
cp target/release/daqiri-gateway "$(command -v dpdk-testpmd)" "$out/bin/"
strip --strip-debug "$out/bin/daqiri-gateway"
# The plugins the benchmarks load: net_null and the ring mempool it needs.
pmds=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
for pmd in librte_net_null librte_mempool_ring librte_bus_vdev; do
    cp -L "$pmds/$pmd.so.23" "$out/pmds/"
done
# Every library the binaries and plugins link, resolved here.
for binary in "$out"/bin/* "$out"/pmds/*; do
    ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux.*)\.so' | while read -r lib; do
    cp -L "$lib" "$out/lib/"
done
cp tests/bench/dpdk_scaling.sh "$out/"
cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a command with the packed DPDK: its libraries first on the loader's
# path, its plugins where EAL looks for them (DPDK's compiled-in folder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pmds=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
mkdir -p "$pmds" && cp -n "$here"/pmds/* "$pmds/"
export LD_LIBRARY_PATH="$here/lib:$here/pmds${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH" GW="$here/bin/daqiri-gateway" TESTPMD="$here/bin/dpdk-testpmd"
exec "$@"
RUN
chmod +x "$out/run.sh" "$out/dpdk_scaling.sh"
du -sh "$out"
