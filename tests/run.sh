#!/usr/bin/env bash
# The whole test suite, as README.md and .ci/run call it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, with the seconds since the suite began, so a run's log
# shows where its time went.
step() { echo "run.sh: [$(date +%T) +${SECONDS}s] $*" >&2; }
step setup
ignored=$(tests/setup.sh)
# Every compile goes through sccache, whose cache under the user cache keeps
# what a clean clone would build again (the dependencies, from a release to
# the next Cargo.lock) the way the control plane is kept. Incremental builds
# cannot be cached, and a clean clone has nothing to be incremental on.
export RUSTC_WRAPPER=sccache SCCACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway/sccache
export SCCACHE_CACHE_SIZE=${SCCACHE_CACHE_SIZE:-8G} CARGO_INCREMENTAL=0
# The images' release builds and the fuzz targets' instrumented build take
# many minutes of both cores: they start now at idle priority (SCHED_IDLE,
# idle I/O), on the cycles the tests below leave while they wait, in a
# session of their own, and the steps that use them wait for them (one that
# failed there is built again in the foreground, its errors shown).
builds="" builds_log=target/background-builds.log
stop_builds() { [[ -z $builds ]] || kill -- "-$builds" 2>/dev/null || true; }
if [[ $ignored == --run-ignored=all ]]; then
    mkdir -p target
    setsid ionice -c 3 chrt --idle 0 bash -c \
        'tests/k8s/image.sh artifacts bypass socket consumer && tests/fuzz.sh --build-only' >"$builds_log" 2>&1 &
    builds=$!
fi
s3_dir=""
# What runs in the background goes with the suite, however it ends.
cleanup() {
    stop_builds
    sccache --show-stats 2>/dev/null | grep -E '^(Compile requests|Cache hits|Cache misses) ' >&2 || true
    sccache --stop-server >/dev/null 2>&1 || true
    [[ -z $s3_dir ]] || tests/s3/server.sh stop "$s3_dir"
}
trap cleanup EXIT
wait_builds() {
    [[ -n $builds ]] || return 0
    step "waiting for the background builds"
    wait "$builds" || echo "run.sh: a background build failed (target/background-builds.log); built here" >&2
    builds=""
}
step module cycles
# No import cycle between the modules of any crate (the check first proves
# it finds each kind of cycle it claims to).
tests/module_cycles.py --self-test
tests/module_cycles.py gateway/engine/src gateway/config/src gateway/dpdk-sys/src gateway/server/src operator/src \
    gateway/consumer/src gateway/python/src gateway/capi/src gateway/python-daqiri/src
# Lints with warnings denied, on every crate, in the default build and with
# every feature (the backends and the GPU gate whole modules): clippy's
# rules, `missing_docs` and `undocumented_unsafe_blocks` among them.
step clippy
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings
# The conformance suite runs once, below, with every backend built in; the
# operator's cluster suite right after this, against a control plane of its own,
# and the image checks once the images are built.
# The S3 server the S3 writer's tests upload to, for every step below
# (SeaweedFS, built once per pinned version and cached; tests/s3/server.sh).
step S3 server
s3_dir=target/s3
DAQIRI_TEST_S3_ENDPOINT=$(tests/s3/server.sh start "$s3_dir")
export DAQIRI_TEST_S3_ENDPOINT
step workspace tests
cargo nextest run --workspace --no-fail-fast "$ignored" \
    -E 'not binary_id(daqiri::conformance) and not binary_id(daqiri-operator::cluster) and not binary_id(daqiri-operator::image) and not binary_id(daqiri-operator::e2e)'
cargo test --workspace --doc
# DAQIRI's C and C++ API (libdaqiri, gateway/capi): installed, found by
# pkg-config and CMake, linked shared and static, run with UDP traffic.
step C API
tests/capi/run.sh
# DAQIRI's Python API (`import daqiri`, gateway/python-daqiri) in-process.
step python daqiri
tests/python_daqiri/run.sh
# DAQIRI's own programs on it, unchanged: its examples built by their own
# CMakeLists against find_package(daqiri) (a CUDA build of libdaqiri; the
# toolkit from tests/reference/build.sh, cached), run with their configs.
step DAQIRI programs
programs=0
tests/capi/daqiri_programs.sh || programs=$?
case $programs in
    0) ;;
    3) echo "run.sh: DAQIRI's programs on libdaqiri are SKIPPED: no DAQIRI reference sources (../shared/reference)" >&2 ;;
    *) exit "$programs" ;;
esac
# Config acceptance against DAQIRI 2026.7's own parser (tests/reference/build.sh
# builds it once, minutes on a fresh machine, then cached): every disagreement
# with `check` on DAQIRI's examples, ours and 200 seeded mutants of them must be
# a known difference (docs/configs.md).
step config diff
config_diff=0
tests/reference/config_diff.py --mutants 200 --show 1 --gateway target/debug/daqiri-gateway || config_diff=$?
((config_diff == 0 || config_diff == 3)) || exit "$config_diff"
# The operator, the chart and its RBAC against a real kube-apiserver,
# kube-controller-manager and etcd on loopback (built once per release and
# cached; see tests/k8s/control-plane.sh). It needs no root.
step cluster
control_plane=target/k8s/run
trap 'tests/k8s/control-plane.sh stop "$control_plane"; cleanup' EXIT
DAQIRI_TEST_KUBECONFIG=$(tests/k8s/control-plane.sh start "$control_plane") \
    cargo nextest run -p daqiri-operator --test cluster --run-ignored=all --no-fail-fast
tests/k8s/control-plane.sh stop "$control_plane"
trap cleanup EXIT
# The kernel-bypass backends, built together: DPDK on its virtual devices
# and AF_XDP over veth pairs with our XDP program (setup.sh installed clang
# and the BPF headers). DPDK is 25.11 LTS, the release DAQIRI builds on
# (tests/reference/build.sh, cached; the lints above built against Debian's
# 22.11, so both stay buildable); where the reference sources are nowhere,
# Debian's 22.11, said so. The engine's unit tests with them (the rte_flow
# translation, the XDP map layouts), their tests, and the conformance suite,
# every scenario on every backend; its results become docs/conformance.md,
# which must match them when every bed ran.
step kernel-bypass and conformance
dpdk_env=(env)
dpdk_status=0
dpdk=$(tests/reference/build.sh dpdk) || dpdk_status=$?
case $dpdk_status in
    0) dpdk_env=(env PKG_CONFIG_PATH="$dpdk/lib/pkgconfig" LD_LIBRARY_PATH="$dpdk/lib") ;;
    3) echo "run.sh: no DPDK 25.11 sources (../shared/reference): the kernel-bypass tests run on Debian's DPDK" >&2 ;;
    *) exit "$dpdk_status" ;;
esac
rm -rf target/tmp/conformance
"${dpdk_env[@]}" cargo nextest run -p daqiri --features dpdk,af_xdp,rdma --lib --test dpdk --test af_xdp \
    --test conformance --test vm_rdma --no-fail-fast "$ignored" -E 'not test(/^vm_/)'
# The VM test bed (Debian's kernel under QEMU, prepared by tests/vm/prepare.sh):
# soft-RoCE, and the conformance rows of its NICs, with the tests built above
# (the guest sees the host's files, the DPDK build among them).
if [[ $ignored == --run-ignored=all ]]; then
    step VM test bed
    "${dpdk_env[@]}" tests/vm/build.sh
    "${dpdk_env[@]}" tests/vm/run.sh -- tests/vm/suite.sh
    tests/conformance_table.py --check
else
    echo "run.sh: the VM test bed's suite (soft-RoCE, the VM's conformance rows) is SKIPPED: it needs root" >&2
fi
# The Python client (PyO3) against a running gateway: the consumer image's
# wheel, built in the background with the images' binaries.
wait_builds
step python client
tests/python/run.sh
# The tests that compare exact counts (the Python client's among them), again
# beside four busy loops: they must account for every drop by its reason,
# never assume a quiet machine.
step under load
tests/under_load.sh --runs 2
# The appliance's images from the Dockerfile, both variants, built by buildah
# (tests/k8s/image.sh: a runtime base from Debian's packages, release binaries
# from a cargo target dir cached under the user cache), then run by runc as a
# kubelet would run them. Building and running images needs root.
if [[ $ignored == --run-ignored=all ]]; then
    step images and end to end
    images="$(tests/k8s/image.sh build socket) $(tests/k8s/image.sh build bypass)"
    DAQIRI_TEST_IMAGES=$images cargo nextest run -p daqiri-operator --test image --run-ignored=all --no-fail-fast
    # The appliance end to end on two real nodes of this machine (kubelets,
    # containerd, runc, CNI, CoreDNS; tests/k8s/nodes.sh), with the image just
    # built (the kernel-bypass one for an AF_XDP port on a device a device
    # plugin hands out) and the Python consumer image (gateway/python/Dockerfile).
    tests/k8s/image.sh build consumer >/dev/null
    nodes=target/k8s/nodes
    trap 'tests/k8s/nodes.sh down "$nodes"; cleanup' EXIT
    nodes_kubeconfig=$(tests/k8s/nodes.sh up "$nodes" 2)
    for variant in socket bypass consumer; do
        tests/k8s/image.sh archive $variant target/k8s/$variant-image.tar
        tests/k8s/nodes.sh import "$nodes" target/k8s/$variant-image.tar
    done
    DAQIRI_TEST_NODES_KUBECONFIG=$nodes_kubeconfig \
        cargo nextest run -p daqiri-operator --test e2e --run-ignored=all --no-fail-fast
    tests/k8s/nodes.sh down "$nodes"
    trap cleanup EXIT
else
    echo "run.sh: the image build, its checks and the nodes' end-to-end suite are SKIPPED: they need root" >&2
fi
# GPU tests: built with the cuda feature, run where a GPU is, else each
# reported as skipped (tests/gpu/run.sh on the GPU machine runs them).
# Without a GPU here they build with the test profile, beside the builds above.
step GPU
gpu_profile=--dev
nvidia-smi -L >/dev/null 2>&1 && gpu_profile=""
tests/gpu/build.sh $gpu_profile >/dev/null
target/gpu-tests/run.sh
# A short fuzzing run of every target from its seeds (the campaigns behind
# the execution counts in README.md's Tests section ran longer).
wait_builds
step fuzz
tests/fuzz.sh --seconds 30 --fresh
step done
