#!/usr/bin/env bash
# Builds the DPDK the kernel-bypass image ships, from a release tarball: the
# Dockerfile's dpdk-source stage runs it, and tests/k8s/image.sh runs it here
# for the prebuilt stage, so both images carry the same build.
#   build-dpdk.sh TARBALL PREFIX DESTDIR
# installs DPDK for PREFIX (where the EAL will look for its drivers) under
# DESTDIR (DESTDIR/PREFIX/lib, .../include, the pkg-config files). Needs
# meson, ninja, pyelftools and the headers of libnuma, rdma-core, libbpf and
# libxdp (the Dockerfile's stage installs them).
set -euo pipefail
tarball=${1:?tarball} prefix=${2:?prefix} destdir=${3:?destdir}
# The drivers the gateway's DPDK backend uses in a pod: a ConnectX (mlx5, on
# the PCI and auxiliary buses), AF_PACKET and AF_XDP on a pod's interface,
# and the virtual devices its tests and examples use; the ring mempool.
drivers=bus/pci,bus/vdev,bus/auxiliary,mempool/ring,common/mlx5,net/mlx5,net/af_packet,net/af_xdp,net/null,net/ring
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$tarball"
tree=("$work"/dpdk-*)
# Generic x86-64 code: the image runs on whatever CPU the node has.
meson setup "$work/build" "${tree[0]}" --prefix="$prefix" --libdir=lib --buildtype=release \
    -Dplatform=generic -Dtests=false -Denable_docs=false -Dexamples= -Ddisable_apps="*" \
    -Denable_drivers="$drivers" >&2
ninja -C "$work/build" >&2
meson install -C "$work/build" --quiet --destdir "$destdir" >&2
