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
rm -rf "$out" && mkdir -p "$out/lib" "$out/bin"
cargo build --release -q -p daqiri-gateway --features dpdk
cp target/release/daqiri-gateway "$(command -v dpdk-testpmd)" "$out/bin/"
# shellcheck disable=SC2046 # pkg-config prints separate flags
cc -O2 -o "$out/bin/dpdk-handoff" tests/bench/dpdk_handoff.c $(pkg-config --cflags --libs libdpdk)
strip --strip-debug "$out/bin/daqiri-gateway"
# The plugins the benchmarks load (net_null, the ring mempool it needs, the
# virtual-device bus), kept with the libraries: EAL then loads the very
# files the binaries link, never a second copy.
pmds=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
for pmd in librte_net_null librte_mempool_ring librte_bus_vdev; do
    cp -L "$pmds/$pmd.so.23" "$out/lib/"
    echo "$pmd.so.23" >>"$out/plugins"
done
# Every library the binaries and plugins link, resolved here.
for binary in "$out"/bin/* "$out"/lib/*; do
    ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux.*)\.so' | while read -r lib; do
    [[ -e $out/lib/$(basename "$lib") ]] || cp -L "$lib" "$out/lib/"
done
cp tests/bench/lib.sh tests/bench/dpdk_scaling.sh tests/bench/dpdk_null_repeat.sh tests/bench/dpdk_app_placement.sh "$out/"
cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a command with the packed DPDK, on a machine without DPDK: its
# libraries first on the loader's path, and links to its plugins where EAL
# looks for them (DPDK's compiled-in folder, which takes names ending in .so),
# so EAL loads the same files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pmds=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
if [[ ! -d $pmds ]]; then
    mkdir -p "$pmds"
    while read -r plugin; do ln -s "$here/lib/$plugin" "$pmds/${plugin%.23}"; done <"$here/plugins"
fi
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH" GW="$here/bin/daqiri-gateway" TESTPMD="$here/bin/dpdk-testpmd" HANDOFF="$here/bin/dpdk-handoff"
exec "$@"
RUN
chmod +x "$out/run.sh" "$out"/dpdk_*.sh
du -sh "$out"
