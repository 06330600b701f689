# Sourced inside the VM test bed (tests/vm/run.sh): loads the modules the
# beds need, mounts hugetlbfs, binds the DPDK NICs to vfio-pci and exports
# where each bed is:
#   DAQIRI_VM_VIRTIO_PCI   virtio-net-pci under vfio-pci, 4 queue pairs
#   DAQIRI_VM_E1000E_PCI   e1000e under vfio-pci
#   DAQIRI_VM_XDP_NETDEV   virtio_net netdev for AF_XDP, 2 queue pairs
#   DAQIRI_VM_SEND_NETDEV  the kernel NIC independent senders use
#   DAQIRI_VM_SEND_MAC     its MAC
[[ ${DAQIRI_VM:-} == 1 ]] || { echo "guest.sh: not inside the VM test bed (tests/vm/run.sh)" >&2; return 1; }

vm_log() { echo "vm guest: $*" >&2; }

# vfio-pci for DPDK; rdma_rxe for soft-RoCE; veth for its pair; the TC
# classifier and actions DPDK's net_tap programs rte_flow with.
for module in vfio-pci rdma_rxe veth sch_multiq sch_ingress sch_prio cls_flower cls_bpf \
    act_skbedit act_gact act_mirred act_pedit act_bpf tun; do
    modprobe "$module" || { vm_log "modprobe $module failed"; return 1; }
done

# No IPv6 on any interface, those DPDK's net_tap creates included: a NIC
# coming up would send router solicitations into the beds' counts.
sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1

mkdir -p /dev/hugepages
mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages

netdev_with_mac() {
    local dev
    for dev in /sys/class/net/*; do
        [[ $(cat "$dev/address") == "$1" ]] && { basename "$dev"; return 0; }
    done
    return 1
}
pci_of_netdev() { basename "$(readlink -f "/sys/class/net/$1/device/..")"; }
pci_with_vendor_device() { # e1000e has no driver loaded (no udev here): found by its IDs
    local dev
    for dev in /sys/bus/pci/devices/*; do
        [[ $(cat "$dev/vendor"):$(cat "$dev/device") == "$1" ]] && { basename "$dev"; return 0; }
    done
    return 1
}
bind_vfio() {
    local pci=$1 dev=/sys/bus/pci/devices/$1
    echo vfio-pci > "$dev/driver_override"
    [[ -e $dev/driver ]] && echo "$pci" > "$dev/driver/unbind"
    echo "$pci" > /sys/bus/pci/drivers_probe
    [[ $(basename "$(readlink -f "$dev/driver")") == vfio-pci ]] || { vm_log "$pci did not bind to vfio-pci"; return 1; }
}

# virtio-net-pci devices appear as netdevs under virtio-pci; the PCI
# function is the netdev's device's parent.
virtio_netdev=$(netdev_with_mac 52:54:00:da:00:01) || { vm_log "no NIC 52:54:00:da:00:01"; return 1; }
export DAQIRI_VM_VIRTIO_PCI=$(pci_of_netdev "$virtio_netdev")
export DAQIRI_VM_E1000E_PCI=$(pci_with_vendor_device 0x8086:0x10d3) || { vm_log "no e1000e"; return 1; }
export DAQIRI_VM_XDP_NETDEV=$(netdev_with_mac 52:54:00:da:00:02)
export DAQIRI_VM_SEND_NETDEV=$(netdev_with_mac 52:54:00:da:00:03)
export DAQIRI_VM_SEND_MAC=52:54:00:da:00:03
bind_vfio "$DAQIRI_VM_VIRTIO_PCI"
bind_vfio "$DAQIRI_VM_E1000E_PCI"
ip link set "$DAQIRI_VM_XDP_NETDEV" up
ip link set "$DAQIRI_VM_SEND_NETDEV" up
vm_log "virtio $DAQIRI_VM_VIRTIO_PCI and e1000e $DAQIRI_VM_E1000E_PCI under vfio-pci;" \
    "AF_XDP on $DAQIRI_VM_XDP_NETDEV; senders on $DAQIRI_VM_SEND_NETDEV"
