#!/usr/bin/env bash
# The reference tools we measure and compare against, built from the release
# tarballs in ../shared/reference (pinned by hash below; a copy is kept in the
# cache), never copied into the project:
#   build.sh dpdk     DPDK 25.11.2 LTS patched with DAQIRI's dpdk_patches/, as
#                     DAQIRI's Dockerfile builds it (the drivers we use, testpmd)
#   build.sh cuda     the CUDA toolkit from PyPI's wheels (nvcc, runtime, CCCL,
#                     cuFFT, cuBLAS) and a libcuda stub for machines without a driver
#   build.sh daqiri   DAQIRI 2026.7 (1134167) with its sockets, DPDK and ibverbs
#                     engines and its examples (daqiri_bench_socket, _raw, _rdma,
#                     the reorder benches), installed with its example configs
#   build.sh config-check   daqiri_config_check: DAQIRI's own config parser
#                     behind a driver of ours (config_check.cpp), for config_diff.py
#   build.sh reorder-check   daqiri_reorder_check: DAQIRI's GPU reorder kernel
#                     behind a driver of ours (reorder_check.cpp), for the
#                     gpu_reorder_vs_daqiri bench; needs only a GPU driver to run
#   build.sh all      all five
#   build.sh tarball dpdk|daqiri   the release tarball's path, checked
# Each prints the prefix it installed into. Builds are cached by the hash of their
# inputs under the user cache ($XDG_CACHE_HOME or ~/.cache, daqiri-gateway/reference/),
# as tests/k8s/control-plane.sh caches the control plane: seconds once built.
# DAQIRI_REFERENCE_SOURCES says where the tarballs are, if not in ../shared/reference;
# the script exits 3 when it finds them nowhere.
set -euo pipefail
# A build that fails inside $(...) stops the script too.
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway/reference
log() { echo "reference: $*" >&2; }
# Each build's scratch folder, removed however the script ends.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

dpdk_tarball=dpdk-25.11.2.tar.xz
daqiri_tarball=daqiri-1134167.tar.gz
# CUDA 13.0, the GPU host's driver release: what nvcc builds runs there.
cuda_wheels=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
    nvidia-cufft==12.0.0.61 nvidia-cublas==13.0.2.14)
# DAQIRI's Dockerfile builds every driver; we build those our tests and
# benchmarks use (mlx5 for a ConnectX where one is), which takes a third of the time.
dpdk_drivers=bus/pci,bus/vdev,bus/auxiliary,mempool/ring,net/null,net/ring,net/af_packet,net/af_xdp,net/tap
dpdk_drivers+=,net/pcap,net/virtio,net/e1000,net/mlx5,common/mlx5

# The reference releases, pinned by content (../shared/reference/SHA256SUMS).
declare -A pinned=(
    [$dpdk_tarball]=00eb5bc242601163474116109fb7573c15ac7a9013d6ab24bc91dc51408411c8
    [$daqiri_tarball]=bb6134d6b55fb30af1fce94f9eb8c59c9e8c2d5a94bbfd17a1148a8bc5d67d32
)

# The tarball's path, checked against its pinned hash: from
# DAQIRI_REFERENCE_SOURCES, ../shared/reference, or the copy an earlier run
# kept in the cache (so a clone elsewhere on this machine finds it). Exits 3
# when it is nowhere.
tarball() {
    local name=$1 kept=$cache_root/sources/$1 dir
    for dir in ${DAQIRI_REFERENCE_SOURCES:+"$DAQIRI_REFERENCE_SOURCES"} "$root/../shared/reference" "$cache_root/sources"; do
        [[ -f $dir/$name ]] || continue
        echo "${pinned[$name]}  $dir/$name" | sha256sum --quiet -c - ||
            { log "$dir/$name is not the pinned release (sha256 ${pinned[$name]})"; exit 1; }
        if [[ ! -f $kept ]]; then
            mkdir -p "$cache_root/sources"
            cp "$dir/$name" "$kept.partial" && mv "$kept.partial" "$kept"
        fi
        echo "$kept"
        return
    done
    log "no $name: not in ${DAQIRI_REFERENCE_SOURCES:+$DAQIRI_REFERENCE_SOURCES, }$root/../shared/reference or $cache_root/sources (set DAQIRI_REFERENCE_SOURCES)"
    exit 3
}

# Each build's recipe, in the cache key with its inputs: bump one when its
# steps here change what it builds.
dpdk_recipe=2 cuda_recipe=2 daqiri_recipe=2

# The cache folder of a build keyed by its inputs (files, and words).
cache_for() {
    local what=$1
    shift
    mkdir -p "$cache_root"
    echo "$cache_root/$what-$(cat "$@" | sha256sum | cut -c1-16)"
}

# Debian's packages a build needs, installed where missing.
need_packages() {
    local missing=()
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    ((${#missing[@]} == 0)) && return
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
}

build_dpdk() {
    local tar cache started
    tar=$(tarball "$dpdk_tarball")
    local daqiri
    daqiri=$(tarball "$daqiri_tarball")
    cache=$(cache_for dpdk "$tar" "$daqiri" <(echo "recipe $dpdk_recipe $dpdk_drivers"))
    if [[ ! -x $cache/bin/dpdk-testpmd ]]; then
        need_packages meson ninja-build python3-pyelftools libnuma-dev libibverbs-dev libbpf-dev libxdp-dev libpcap-dev pkgconf patch
        log "building DPDK 25.11.2 with DAQIRI's patches (once; minutes)"
        started=$SECONDS
        local work
        work=$(mktemp -d -p "$scratch")
        tar -C "$work" -xf "$tar"
        tar -C "$work" -xzf "$daqiri" --wildcards '*/dpdk_patches/*'
        local tree=("$work"/dpdk-*)
        # As DAQIRI's Dockerfile applies them (the dma-buf patch less its
        # .mailmap and release-notes hunks, which 25.11's tree lacks).
        for patch in "$work"/daqiri-*/dpdk_patches/*.patch; do
            local exclude=()
            [[ $(basename "$patch") == dmabuf.patch ]] &&
                exclude=(--exclude=.mailmap --exclude=doc/guides/rel_notes/release_26_03.rst)
            (cd "${tree[0]}" && git apply "${exclude[@]}" "$patch")
        done
        # Built for its final prefix (the EAL loads its drivers from a path
        # under it; each library finds its siblings there by RUNPATH, outside
        # the loader's default folders), installed into a staging folder,
        # then moved there whole.
        # Debian's python3 (it has elftools), whatever is first on PATH.
        (cd "${tree[0]}" && PATH=/usr/bin:$PATH meson setup build --prefix="$cache" --libdir=lib \
            -Dplatform=generic -Dtests=false -Denable_docs=false -Dexamples= \
            -Denable_drivers="$dpdk_drivers" -Denable_apps=test-pmd -Dc_link_args="-Wl,-rpath,$cache/lib" >&2 &&
            PATH=/usr/bin:$PATH ninja -C build >&2 &&
            PATH=/usr/bin:$PATH meson install -C build --quiet --destdir "$work/staging" >&2)
        rm -rf "$cache"
        mv "$work/staging$cache" "$cache"
        rm -rf "$work"
        log "DPDK built in $((SECONDS - started)) s"
    fi
    echo "$cache"
}

build_cuda() {
    local cache
    cache=$(cache_for cuda <(printf '%s\n' "recipe $cuda_recipe" "${cuda_wheels[@]}"))
    if [[ ! -e $cache/lib/stubs/libcuda.so ]]; then
        log "fetching the CUDA toolkit's wheels from PyPI (once; about 700 MB)"
        local work
        work=$(mktemp -d -p "$scratch")
        python3 -m pip download -q --no-deps -d "$work" "${cuda_wheels[@]}" >&2
        for wheel in "$work"/*.whl; do
            python3 -m zipfile -e "$wheel" "$work/tree" >&2
        done
        rm -rf "$cache.partial"
        mv "$work/tree/nvidia/cu13" "$cache.partial"
        rm -rf "$work"
        chmod +x "$cache.partial"/bin/* "$cache.partial"/nvvm/bin/* 2>/dev/null || true
        # The wheels ship only the versioned sonames; CMake's FindCUDAToolkit links the plain names.
        for lib in "$cache.partial"/lib/lib*.so.*; do
            ln -sf "$(basename "$lib")" "${lib%%.so.*}.so"
        done
        # nvcc links its device runtime from lib64, as a toolkit installs it.
        ln -s lib "$cache.partial/lib64"
        cuda_stub "$cache.partial"
        rm -rf "$cache"
        mv "$cache.partial" "$cache"
    fi
    echo "$cache"
}

# A link-time libcuda (soname libcuda.so.1): every driver entry point cuda.h
# declares, each answering CUDA_ERROR_NO_DEVICE. The driver ships libcuda; no
# wheel does. On the GPU host the real one is found first.
cuda_stub() {
    local cuda=$1
    mkdir -p "$cuda/lib/stubs"
    gcc -E -P -I"$cuda/include" "$cuda/include/cuda.h" |
        grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | tr -d ' (' | sort -u |
        awk '{ printf "int %s(void) { return 100; }\n", $1 }' >"$cuda/lib/stubs/cuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cuda/lib/stubs/libcuda.so" "$cuda/lib/stubs/cuda_stub.c"
    ln -sf libcuda.so "$cuda/lib/stubs/libcuda.so.1"
}

build_daqiri() {
    local tar dpdk cuda cache started
    tar=$(tarball "$daqiri_tarball")
    dpdk=$(build_dpdk)
    cuda=$(build_cuda)
    cache=$(cache_for daqiri "$tar" <(echo "recipe $daqiri_recipe $dpdk $cuda"))
    if [[ ! -x $cache/bin/daqiri_bench_socket ]]; then
        need_packages cmake g++ libibverbs-dev librdmacm-dev pkgconf
        log "building DAQIRI 2026.7 (sockets, DPDK and ibverbs engines; once; minutes)"
        started=$SECONDS
        local work
        work=$(mktemp -d -p "$scratch")
        tar -C "$work" -xzf "$tar"
        local tree=("$work"/daqiri-*)
        rm -rf "$cache.partial"
        # Installed where it will stay (RUNPATH), then moved there whole. The
        # libcuda stub only links: where no driver is, bench.sh's
        # daqiri_reference_env puts it on LD_LIBRARY_PATH.
        # DPDK's instruction set (its x86 headers inline SSSE3 and SSE4.2),
        # which DAQIRI's pool-ring example does not take from pkg-config.
        local march
        march=$(PKG_CONFIG_PATH=$dpdk/lib/pkgconfig pkg-config --cflags-only-other libdpdk | grep -o -- '-march=[^ ]*')
        PKG_CONFIG_PATH=$dpdk/lib/pkgconfig cmake -S "${tree[0]}" -B "$work/build" -G Ninja \
            -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$cache.partial" -DCMAKE_CXX_FLAGS="$march" \
            -DCMAKE_INSTALL_RPATH="$cache/lib;$dpdk/lib;$cuda/lib" \
            -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda" -DCMAKE_CUDA_ARCHITECTURES=90 \
            -DDAQIRI_ENGINE="dpdk ibverbs" -DDAQIRI_BUILD_EXAMPLES=ON \
            -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$cuda/lib/stubs" \
            -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$cuda/lib/stubs" >&2
        cmake --build "$work/build" >&2
        cmake --install "$work/build" >&2
        rm -rf "$work" "$cache"
        mv "$cache.partial" "$cache"
        log "DAQIRI built in $((SECONDS - started)) s"
    fi
    echo "$cache"
}

# Our driver of DAQIRI's parser (config_check.cpp), linked with its static
# libraries; a folder holding daqiri_config_check.
build_config_check() {
    local daqiri dpdk cuda cache
    daqiri=$(build_daqiri)
    dpdk=$(build_dpdk)
    cuda=$(build_cuda)
    cache=$(cache_for config-check "$here/config_check.cpp" <(echo "$daqiri"))
    if [[ ! -x $cache/daqiri_config_check ]]; then
        mkdir -p "$cache.partial"
        # DAQIRI's libraries need each other: one group. Its DPDK and the
        # CUDA runtime by RUNPATH; libcuda is the driver's (the stub links).
        # shellcheck disable=SC2046 # pkg-config prints separate flags
        g++ -O1 -std=c++17 -o "$cache.partial/daqiri_config_check" "$here/config_check.cpp" \
            -I"$daqiri/include" -I"$cuda/include" -L"$daqiri/lib" -Wl,--start-group -ldaqiri -ldaqiri_rdma \
            -ldaqiri_dpdk -ldaqiri_ibverbs -ldaqiri_socket -lyaml-cpp -Wl,--end-group \
            $(PKG_CONFIG_PATH=$dpdk/lib/pkgconfig pkg-config --libs libdpdk) -Wl,-rpath,"$dpdk/lib" \
            -L"$cuda/lib" -lcudart -Wl,-rpath,"$cuda/lib" -L"$cuda/lib/stubs" -lcuda \
            -libverbs -lrdmacm -lmlx5 -lnuma 2> >(grep -v DT_TEXTREL >&2)
        rm -rf "$cache"
        mv "$cache.partial" "$cache"
    fi
    echo "$cache"
}

# Our driver of DAQIRI's reorder kernel (reorder_check.cpp) with the kernel's
# objects from libdaqiri.a and the static CUDA runtime, so that it runs on a
# GPU machine with nothing beside it but the driver; a folder holding
# daqiri_reorder_check.
build_reorder_check() {
    local daqiri cuda cache work
    daqiri=$(build_daqiri)
    cuda=$(build_cuda)
    cache=$(cache_for reorder-check "$here/reorder_check.cpp" <(echo "$daqiri"))
    if [[ ! -x $cache/daqiri_reorder_check ]]; then
        work=$(mktemp -d -p "$scratch")
        # The kernel and the device link of DAQIRI's separable CUDA code.
        (cd "$work" && ar x "$daqiri/lib/libdaqiri.a" kernels.cu.o cmake_device_link.o)
        mkdir -p "$cache.partial"
        g++ -O2 -std=c++17 -o "$cache.partial/daqiri_reorder_check" "$here/reorder_check.cpp" \
            "$work/kernels.cu.o" "$work/cmake_device_link.o" -I"$cuda/include" \
            -L"$cuda/lib" -lcudadevrt -lcudart_static -ldl -lpthread -lrt
        rm -rf "$work" "$cache"
        mv "$cache.partial" "$cache"
    fi
    echo "$cache"
}

# A release tarball by what it holds, checked (the cache's copy).
tarball_of() {
    case ${1:-} in
        dpdk) tarball "$dpdk_tarball" ;;
        daqiri) tarball "$daqiri_tarball" ;;
        *) log "tarball: dpdk or daqiri, not \"${1:-}\""; exit 2 ;;
    esac
}

case ${1:-} in
    tarball) tarball_of "${2:-}" ;;
    dpdk) build_dpdk ;;
    cuda) build_cuda ;;
    daqiri) build_daqiri ;;
    config-check) build_config_check ;;
    reorder-check) build_reorder_check ;;
    all) build_dpdk && build_cuda && build_daqiri && build_config_check && build_reorder_check ;;
    *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
