#!/usr/bin/env bash
# Prepares the VM test bed on a fresh machine and prints the folder it
# cached it in: Debian's QEMU and busybox (virtme-ng's initramfs), the guest's
# tools (rdma-core, perftest, pyverbs, iproute2, ethtool, pciutils; the guest
# runs on this machine's own files), Debian's stock kernel unpacked with its
# modules, and virtme-ng from PyPI. Changes nothing already in place: the
# kernel and virtme-ng are kept under the user cache, as the control plane
# is, so a clean clone boots without fetching them again.
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { echo "vm: $*" >&2; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway/vm
mkdir -p "$cache"

need_apt=()
command -v qemu-system-x86_64 >/dev/null || need_apt+=(qemu-system-x86)
command -v busybox >/dev/null || need_apt+=(busybox-static)
command -v depmod >/dev/null || need_apt+=(kmod)
command -v rdma >/dev/null || need_apt+=(iproute2)
command -v ethtool >/dev/null || need_apt+=(ethtool)
command -v lspci >/dev/null || need_apt+=(pciutils)
command -v ibv_rc_pingpong >/dev/null || need_apt+=(ibverbs-utils rdma-core)
command -v ib_send_bw >/dev/null || need_apt+=(perftest)
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || need_apt+=(python3-pyverbs)
if ((${#need_apt[@]})); then
    log "installing ${need_apt[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi

# The kernel Debian's metapackage points at today, unsigned (the same build).
if [[ ! -e $cache/kernel/ready ]]; then
    image=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    [[ -n $image ]] || { log "apt knows no linux-image-amd64: run apt-get update"; exit 1; }
    log "fetching ${image}-unsigned"
    rm -rf "$cache/kernel" && mkdir -p "$cache/kernel"
    (cd "$cache" && apt-get download -qq "${image}-unsigned" 2>/dev/null)
    dpkg -x "$cache/${image}-unsigned"_*.deb "$cache/kernel"
    rm -f "$cache/${image}-unsigned"_*.deb
    version=${image#linux-image-}
    depmod -b "$cache/kernel" "$version"
    echo "$version" > "$cache/kernel/ready"
fi

# virtme-ng runs a command in that kernel over this machine's filesystem.
# Pinned: its command line is our interface to it.
if [[ ! -x $cache/venv/bin/vng ]]; then
    log "installing virtme-ng (PyPI)"
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install --quiet --disable-pip-version-check virtme-ng==1.42 >&2
fi
echo "$cache"
