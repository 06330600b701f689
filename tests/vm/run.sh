#!/usr/bin/env bash
# Runs a command inside the VM test bed and returns its exit status:
#   tests/vm/run.sh [--] <command> [args...]
# Debian's stock kernel boots under QEMU (software emulation: a KVM guest
# hangs on our machines) over this machine's own files, the repository
# writable, 2 vCPUs and 4 GiB. The guest has an emulated IOMMU and four PCI
# NICs on one bridge of a host network namespace of their own (fixed MACs;
# tests/vm/nics.sh finds them in the guest):
#   52:54:00:da:00:01  virtio-net-pci, 4 queue pairs, behind the IOMMU: DPDK over vfio-pci
#   52:54:00:da:00:02  virtio-net-pci, 2 queue pairs: AF_XDP on virtio_net's native XDP
#   52:54:00:da:00:03  virtio-net-pci: the kernel's own NIC, where independent senders send
#   52:54:00:da:00:04  e1000e, behind the IOMMU: DPDK's second PCI driver over vfio-pci
# Frames reach a receiving NIC only when addressed to it (static bridge
# entries, no flooding to them), so beds do not hear each other.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ ${1:-} == -- ]] && shift
(($#)) || { echo "usage: tests/vm/run.sh [--] <command> [args...]" >&2; exit 2; }

cache=$(tests/vm/prepare.sh)
version=$(cat "$cache/kernel/ready")

# The NICs' wire: taps on a bridge, in a namespace that lives as long as the VM.
netns=daqiri-vm-$$
ip netns add "$netns"
trap 'ip netns del "$netns" 2>/dev/null || true' EXIT
in_ns() { ip -n "$netns" "$@"; }
in_ns link add br0 type bridge
in_ns link set br0 up
tap() { # name, queues (a multi-queue tap only with more than one)
    if (($2 > 1)); then in_ns tuntap add mode tap multi_queue name "$1"; else in_ns tuntap add mode tap name "$1"; fi
    in_ns link set "$1" master br0 up
}
receiving() { # tap, MAC of the guest NIC behind it
    ip netns exec "$netns" bridge link set dev "$1" flood off mcast_flood off bcast_flood off
    ip netns exec "$netns" bridge fdb add "$2" dev "$1" master static
}
tap vt-dpdk 4 && receiving vt-dpdk 52:54:00:da:00:01
tap vt-xdp 2 && receiving vt-xdp 52:54:00:da:00:02
tap vt-send 1
tap vt-e1k 1 && receiving vt-e1k 52:54:00:da:00:04

nic() { # tap, id, device options
    local queues=${4:-1}
    local netdev="tap,id=$2,ifname=$1,script=no,downscript=no,vhost=off"
    ((queues > 1)) && netdev+=",queues=$queues"
    qemu+=(-netdev "$netdev" -device "$3,netdev=$2")
}
# A 48-bit IOMMU, as on the servers such NICs sit in (QEMU defaults to 39
# bits, which IOVA-as-VA addresses of mmap()ed regions exceed).
qemu=(-device intel-iommu,aw-bits=48)
nic vt-dpdk nd "virtio-net-pci,mac=52:54:00:da:00:01,mq=on,vectors=10,iommu_platform=on,disable-legacy=on" 4
nic vt-xdp nx "virtio-net-pci,mac=52:54:00:da:00:02,mq=on,vectors=6" 2
nic vt-send ns "virtio-net-pci,mac=52:54:00:da:00:03"
nic vt-e1k ne "e1000e,mac=52:54:00:da:00:04"

command=$(printf '%q ' "$@")
# Hugepages for DPDK and the engine's `huge` regions; the IOMMU on for vfio.
append="intel_iommu=on hugepagesz=2M hugepages=768"
# The host's loader path goes in with PATH: the tests may link a DPDK outside
# the system's folders (tests/run.sh's 25.11).
exec_line="export DAQIRI_VM=1 PATH=$(printf %q "$PATH") LD_LIBRARY_PATH=$(printf %q "${LD_LIBRARY_PATH:-}"); cd $(printf %q "$PWD") && $command"
# QEMU opens the guest's console and script output as files at
# /proc/self/fd/1 and 2, truncating them: where those are a log file
# (`tests/run.sh > log`) everything written before would be lost. Through a
# pipe they are not files (pipefail keeps the guest's exit status).
ip netns exec "$netns" env PATH="$cache/venv/bin:$PATH" timeout "${DAQIRI_VM_TIMEOUT:-1800}" \
    vng --disable-kvm --run "$cache/kernel/boot/vmlinuz-$version" \
    --memory 4G --cpus 2 --rwdir="$PWD" --append "$append" \
    --qemu-opts="${qemu[*]}" --exec "$exec_line" 2>&1 | cat
