#!/usr/bin/env bash
# Installs libdaqiri as DAQIRI installs itself: the shared and static
# library, the daqiri/ headers, daqiri.pc and the CMake package, under
# PREFIX. Usage: gateway/capi/package.sh PREFIX [--release] [cargo build args...]
# Prints PREFIX. With PREFIX on PKG_CONFIG_PATH (PREFIX/lib/pkgconfig) or
# CMAKE_PREFIX_PATH, DAQIRI projects find it as they find DAQIRI.
set -euo pipefail
(($# >= 1)) || { echo "usage: $0 PREFIX [--release] [cargo build args...]" >&2; exit 2; }
prefix=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profile=debug
for arg in "$@"; do [[ $arg == --release ]] && profile=release; done

cd "$root"
# The static library's system dependencies, as rustc states them.
native=$(cargo rustc -p daqiri-capi --lib --crate-type staticlib "$@" --quiet -- --print native-static-libs 2>&1 |
    sed -n 's/.*native-static-libs: //p' | tail -1)
cargo build -p daqiri-capi --lib "$@" --quiet
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')

abi=$(sed -n 's/^#define DAQIRI_ABI_VERSION \([0-9]*\)$/\1/p' "$here/include/daqiri/version.h")
version=$(sed -n 's/^#define DAQIRI_VERSION_STRING "\(.*\)"/\1/p' "$here/include/daqiri/version.h")
[[ -n $abi && -n $version ]] || { echo "package.sh: cannot read the ABI or DAQIRI version" >&2; exit 1; }

rm -rf "$prefix"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/lib/cmake/daqiri" "$prefix/include"
prefix=$(cd "$prefix" && pwd)
cp "$target/$profile/libdaqiri_capi.so" "$prefix/lib/libdaqiri.so.$abi"
ln -s "libdaqiri.so.$abi" "$prefix/lib/libdaqiri.so"
cp "$target/$profile/libdaqiri_capi.a" "$prefix/lib/libdaqiri.a"
cp -r "$here/include/daqiri" "$prefix/include/"
# The library exports exactly what its headers declare (the headers are
# kept by hand); gpu_kernels.h ships with a CUDA build only.
exported=$(nm -D --defined-only "$prefix/lib/libdaqiri.so.$abi" | awk '$2 == "T" {print $3}' | sort -u)
headers=("$prefix/include/daqiri/c_api.h")
if grep -q '^packet_' <<<"$exported"; then
    headers+=("$prefix/include/daqiri/gpu_kernels.h")
else
    rm "$prefix/include/daqiri/gpu_kernels.h"
fi
declared=$(grep -ohE '\b(daqiri_gw|packet)_[a-z_0-9]*\(' "${headers[@]}" | tr -d '(' | sort -u)
if [[ $declared != "$exported" ]]; then
    echo "package.sh: the headers and libdaqiri differ (< declared only, > exported only):" >&2
    diff <(echo "$declared") <(echo "$exported") >&2 || true
    exit 1
fi
fill() {
    sed -e "s|@DAQIRI_VERSION@|$version|g" -e "s|@ABI_VERSION@|$abi|g" \
        -e "s|@NATIVE_LIBS@|$native|g" -e "s|@NATIVE_LIBS_CMAKE@|$(echo "$native" | sed 's/ /;/g')|g" "$1" > "$2"
}
fill "$here/pkg/daqiri.pc.in" "$prefix/lib/pkgconfig/daqiri.pc"
fill "$here/pkg/daqiriConfig.cmake.in" "$prefix/lib/cmake/daqiri/daqiriConfig.cmake"
fill "$here/pkg/daqiriConfigVersion.cmake.in" "$prefix/lib/cmake/daqiri/daqiriConfigVersion.cmake"
echo "$prefix"
