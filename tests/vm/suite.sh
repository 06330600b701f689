#!/usr/bin/env bash
# The VM test bed's suite, run inside it by tests/run.sh through
# tests/vm/run.sh: soft-RoCE proven by independent peers, then the
# conformance suite's rows for the VM's NICs (DPDK over vfio-pci on a
# virtio-net-pci and an e1000e behind the IOMMU, DPDK's net_tap with rte_flow
# as TC filters, AF_XDP on virtio_net), one test at a time: they share the NICs.
# The host built the tests (tests/vm/build.sh); the guest runs them without
# cargo, which would compile under emulation had anything changed. Then
# DAQIRI's own RDMA benchmark on libdaqiri (tests/capi/daqiri_rdma_vm.sh),
# built by tests/capi/daqiri_programs.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/vm/guest.sh
tests/vm/soft_roce.sh
cargo-nextest nextest run --binaries-metadata target/vm/binaries.json --cargo-metadata target/vm/cargo-metadata.json \
    --run-ignored=only -E 'test(/^vm_/)' --test-threads=1 --no-fail-fast "$@"
tests/capi/daqiri_rdma_vm.sh
