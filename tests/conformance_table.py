#!/usr/bin/env python3
"""Writes docs/conformance.md from the conformance suite's recorded results
(target/tmp/conformance/<scenario>/<bed>), so the table says what the suite
saw, not what someone wrote. A cell with no result says so: that scenario
failed or did not run on that bed. The GPU scenarios run on the GPU
machine (tests/gpu/run.sh); their results are kept in tests/gpu/conformance,
copied from that machine's run, with the hash of the sources they were run
on (tests/gpu/build.sh writes it): once those sources change, the GPU cells
say the results are stale until the GPU machine runs them again.

    tests/conformance_table.py [--check]
    tests/conformance_table.py --sources-hash    what build.sh records

With --check, exits 1 when docs/conformance.md differs from what the
results give (the suite ran, and the page was not regenerated)."""

import hashlib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "target" / "tmp" / "conformance"
GPU_RESULTS = ROOT / "tests" / "gpu" / "conformance"
# What the GPU results depend on: the engine, its config model and the
# suite, and the locked dependencies.
GPU_SOURCES = ["gateway/engine", "gateway/config", "Cargo.lock"]
PAGE = ROOT / "docs" / "conformance.md"

# Rows and columns in a fixed order: the table is stable between runs.
BEDS = [
    "udp socket",
    "tcp socket",
    "sw loopback",
    "dpdk net_ring",
    "dpdk net_af_packet (veth)",
    "dpdk net_af_xdp (veth)",
    "af_xdp (veth)",
]
SCENARIOS = {
    "delivery": "delivery byte-exact, in order, with flow ids",
    "flows_to_queues": "flows steer to their queues",
    "worker_per_core": "one pinned worker per named core",
    "pools_back_after_drain": "every buffer back after a drain",
    "cpu_reorder": "CPU reorder equals the oracle",
    "writers": "raw and pcap writers byte-exact",
    "header_data_split": "header-data split",
    "drops_counted_when_stalled": "drops counted when the application stalls",
    "flow_reload_loses_nothing": "a flow reload loses nothing",
    "isolation": "flow isolation drops and counts the rest",
    "tx_byte_exact": "TX byte-exact to an independent reader, buffers back",
    "port_mac": "the port's MAC address is the source of its tx_eth_src frames (`get_mac_addr`)",
    "rss_spread": "one flow spread over two queues, each sender on one",
    "ethernet_steering": "flows by Ethernet address steer to their queues",
    "ethernet_rss_spread": "an Ethernet-address flow spread over two queues by MAC",
    "ipv4_steering": "flows by IPv4 source and destination address steer to their queues",
}
# The VM test bed's NICs (tests/vm/run.sh): DPDK over vfio-pci behind an
# emulated IOMMU, DPDK's net_tap with rte_flow as TC filters, AF_XDP on
# virtio_net's native XDP, RoCE on soft-RoCE.
VM_BEDS = [
    "dpdk virtio-net-pci vfio (vm)",
    "dpdk net_tap (vm)",
    "af_xdp virtio_net (vm)",
    "roce rc soft-RoCE (vm)",
]
# The beds the GPU machine runs: it has no DPDK and the suite makes no veth there.
GPU_BEDS = ["udp socket", "tcp socket", "sw loopback"]
GPU_SCENARIOS = {
    "gpu_landing": "packets land in a device region, byte-exact, buffers back",
    "gpu_tx": "packets sent from a device region, byte-exact, buffers back",
    "gpu_reorder": "GPU reorder from pinned landing equals the oracle",
    "gpu_writers": "raw and pcap writers write GPU bytes, copied to the host",
}


def sources_hash() -> str:
    """SHA-256 over the paths and bytes of every file of GPU_SOURCES."""
    digest = hashlib.sha256()
    for root in GPU_SOURCES:
        top = ROOT / root
        for path in sorted([top] if top.is_file() else (p for p in top.rglob("*") if p.is_file())):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def gpu_staleness() -> str | None:
    """Why the recorded GPU results no longer describe these sources, if so."""
    recorded = GPU_RESULTS / "SOURCES"
    if not recorded.exists():
        return "no sources hash was recorded with them"
    if recorded.read_text().strip() != sources_hash():
        return f"they were run on sources {recorded.read_text().strip()[:12]}, and the engine, config model, suite or dependencies changed since"
    return None


def result(scenario: str, bed: str, results: pathlib.Path = RESULTS) -> str:
    path = results / scenario / bed
    return path.read_text().strip() if path.exists() else "no result"


def short(text: str) -> str:
    """A result as a matrix cell: the outcome, the details below."""
    if text == "passed":
        return "passed"
    if text.startswith("refused by path: "):
        return "refused: " + text.removeprefix("refused by path: ")
    if text.startswith("not applicable"):
        return "n/a"
    if text.startswith("passed within a limit: "):
        return "passed, within a limit"
    return "**no result** (failed or not run)"


def table(beds: list[str], scenarios: dict[str, str], results: pathlib.Path) -> list[str]:
    """The matrix, then why each n/a cell does not apply and the limits passes were within."""
    lines = ["| scenario | " + " | ".join(beds) + " |", "|---|" + "---|" * len(beds)]
    for scenario, title in scenarios.items():
        cells = [short(result(scenario, bed, results)) for bed in beds]
        lines.append(f"| {title} (`{scenario}`) | " + " | ".join(cells) + " |")
    lines += notes(beds, scenarios, results, "not applicable: ", "Why a scenario does not apply:")
    lines += notes(beds, scenarios, results, "passed within a limit: ", "The limits a pass was within:")
    return lines


def notes(beds: list[str], scenarios: dict[str, str], results: pathlib.Path, prefix: str, heading: str) -> list[str]:
    """Under `heading`, what each result starting with `prefix` says after it (nothing when none does)."""
    said = [
        f"- `{scenario}` on {bed}: {text.removeprefix(prefix)}."
        for scenario in scenarios
        for bed in beds
        if (text := result(scenario, bed, results)).startswith(prefix)
    ]
    return ["", heading, ""] + said if said else []


def page() -> str:
    lines = [
        "# Conformance: every shared feature on every backend",
        "",
        "Generated by `tests/conformance_table.py` from the results of the conformance suite",
        "(`gateway/engine/tests/conformance/`), which `tests/run.sh` runs; do not edit by hand.",
        "Each scenario is written once and run against every backend. A backend either passes it,",
        "refuses the config with `NOT_SUPPORTED` naming the YAML path (the suite checks both), or",
        "the scenario does not apply to it, for the reason given below the table. The DPDK beds",
        "here and in the VM run DPDK 25.11.2 LTS, the release DAQIRI builds on (docs/dpdk.md).",
        "",
    ]
    lines += table(BEDS, SCENARIOS, RESULTS)
    lines += [
        "",
        "## The VM test bed",
        "",
        "The same scenarios inside the VM test bed (`tests/vm/run.sh`: Debian's own kernel under",
        "QEMU's software emulation, see docs/vm.md), which `tests/run.sh` boots once: DPDK drives",
        "an emulated `virtio-net-pci` (4 queue pairs) bound to `vfio-pci` behind QEMU's",
        "`intel-iommu`, so its DMA goes through the IOVA mappings of our regions; DPDK's",
        "`net_tap` programs its rte_flow rules as TC filters (`cls_flower`, `act_skbedit`,",
        "`sch_multiq`, which this machine's kernel lacks); AF_XDP runs on `virtio_net`'s native",
        "XDP. Senders and readers are raw sockets on the guest kernel's own NIC on the same",
        "bridge. RoCE runs on soft-RoCE (`rdma_rxe`, which this machine's kernel lacks): the engine",
        "is an RC server, and its senders and TX reader are RC clients written with rdma-core's",
        "pyverbs (`tests/vm/rdma_pipe.py`), one process each. RDMA messages carry no headers of",
        "their own for flows to match, so every scenario built on flows is refused there by",
        "`rx.flows`. Emulation says nothing about speed: no figure from it goes into benchmarks.",
        "DPDK's virtio PMD (25.11, the release these beds run) has no rte_flow, so flows among several queues are refused there",
        "by `rx.flows`. Its RSS without flows (the host's tap spreads by flow hash), DPDK on an",
        "emulated `e1000e` (a second PCI driver) under `vfio-pci`, the IOMMU refusing the NIC's",
        "writes once our mapping is withdrawn, and native XDP on `virtio_net` are tested in",
        "`gateway/engine/tests/vm.rs` (a row of every scenario for the `e1000e` too would take the",
        "VM past its 15 minutes).",
        "",
    ]
    lines += table(VM_BEDS, SCENARIOS, RESULTS)
    lines += [
        "",
        "## GPU scenarios",
        "",
        "The same suite built with `cuda`, run on the GPU machine by `tests/gpu/run.sh`",
        "(`tests/gpu/build.sh` packs it as `gpu_conformance`); the results below are that run's,",
        "kept in `tests/gpu/conformance`. The GPU machine has no DPDK and the suite makes no veth",
        "pairs there, so its beds are the socket and loopback backends. The DPDK and AF_XDP",
        "backends land and send packets with the NIC's DMA or the kernel's copy from host memory: at",
        "start, a queue of theirs that names a `device` region stops the engine with `NOT_SUPPORTED`",
        "naming `interfaces[i].rx.queues[j].memory_regions` (DPDK; `tx.queues` the same) or",
        "`rx.queues[j].memory_regions` / `tx.queues[j].memory_regions` (AF_XDP). That check, and",
        "a GPU plan over their `host_pinned` landing, need a `cuda` build on a host with a GPU",
        "and DPDK or XDP, which none of our test machines is: not run yet.",
        "",
    ]
    stale = gpu_staleness()
    if stale:
        lines += [
            f"**Stale:** {stale}. Every GPU cell below is that older run's until `tests/gpu/run.sh`",
            "runs them again on the GPU machine (`tests/gpu/build.sh` records the new hash).",
            "",
        ]
    lines += table(GPU_BEDS, GPU_SCENARIOS, GPU_RESULTS)
    lines += [
        "",
        "## Not in these tables yet",
        "",
        "RoCE instrument ingest (UC and RC WRITE with immediate into a ring a sender was programmed",
        "with) is no scenario's shape: `gateway/engine/tests/vm_rdma.rs` tests it against a pyverbs",
        "sensor emulator, beside DAQIRI's own RDMA bench config. RoCE over UC has no row either: no",
        "independent peer connects UC through `rdma_cm` here (perftest says \"UC is not supported in",
        "librdmacm\"; pyverbs makes ids only through `rdma_create_id`, whose ids are RC's), so",
        "`vm_rdma.rs` tests UC between a client and a server port of one engine.",
        "`net_ring` and `net_af_packet` have no rte_flow, so DPDK's steering among queues",
        "is refused there; rte_flow on a real PMD runs in the VM test bed. DPDK's `net_af_xdp` (25.11, as 22.11)",
        "takes one queue on a veth (it counts combined channels, which a veth has none of), so",
        "two-queue scenarios are refused there by `rx.queues`. Under `flow_isolation`, AF_XDP hands what no flow matches to the kernel (as a",
        "NIC in rte_flow isolated mode does) and counts it as `xdp_passed_unmatched`; the other",
        "backends drop it and count it as `unmatched_flow`.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    if "--sources-hash" in sys.argv:
        print(sources_hash())
        return 0
    text = page()
    if "--check" in sys.argv:
        if PAGE.read_text() != text:
            print("docs/conformance.md is not what the suite's results give: run tests/conformance_table.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
