//! The conformance suite: every shared feature (a scenario) run against
//! every backend (a bed). A bed meets a scenario, refuses its config by
//! YAML path with `NOT_SUPPORTED`, or the scenario does not apply to it;
//! anything else fails. Each result is recorded, and
//! `tests/conformance_table.py` turns them into docs/conformance.md.
//!
//! Beds on veth pairs need root (`tests/run.sh` runs them); DPDK and
//! AF_XDP beds need their features (`--features dpdk,af_xdp`).

#[path = "../common/mod.rs"]
mod common;

mod beds;
#[cfg(feature = "cuda")]
mod gpu;
mod outcome;
mod scenarios;

use beds::Bed;
use outcome::{Outcome, record};

/// Runs `scenario` on `bed` and records how it went.
fn run(bed: &dyn Bed, name: &str, scenario: fn(&dyn Bed) -> Outcome) {
    let outcome = scenario(bed);
    eprintln!("{}: {name}: {outcome:?}", bed.name());
    record(bed.name(), name, &outcome);
}

/// One test per scenario for a bed: `$bed` builds it (fresh per test).
macro_rules! scenarios_on {
    ($module:ident, $bed:expr $(, #[$attr:meta])?) => {
        mod $module {
            use super::*;
            scenario_tests!($bed; [$(#[$attr])?];
                delivery flows_to_queues worker_per_core pools_back_after_drain
                cpu_reorder writers header_data_split drops_counted_when_stalled
                flow_reload_loses_nothing isolation tx_byte_exact rss_spread ethernet_steering
                ethernet_rss_spread ipv4_steering port_mac);
        }
    };
}

macro_rules! scenario_tests {
    ($bed:expr; $attrs:tt; $($scenario:ident)*) => {
        $(scenario_test!($bed; $attrs; $scenario);)*
    };
}

macro_rules! scenario_test {
    ($bed:expr; [$(#[$attr:meta])*]; $scenario:ident) => {
        scenario_test!($bed; [$(#[$attr])*]; scenarios::$scenario);
    };
    ($bed:expr; [$(#[$attr:meta])*]; $module:ident::$scenario:ident) => {
        #[test]
        $(#[$attr])*
        fn $scenario() {
            let bed = $bed;
            run(&bed, stringify!($scenario), $module::$scenario);
        }
    };
}

/// The GPU scenarios for the beds that run on the GPU machine (test names
/// `gpu_<bed>::<scenario>`, which `tests/gpu/run.sh` picks out).
#[cfg(feature = "cuda")]
macro_rules! gpu_scenarios_on {
    ($module:ident, $bed:expr) => {
        mod $module {
            use super::*;
            scenario_test!($bed; []; gpu::gpu_landing);
            scenario_test!($bed; []; gpu::gpu_tx);
            scenario_test!($bed; []; gpu::gpu_reorder);
            scenario_test!($bed; []; gpu::gpu_writers);
        }
    };
}

scenarios_on!(udp, beds::Udp { port: common::free_udp_port() });
scenarios_on!(tcp, beds::Tcp { port: common::free_tcp_port() });
scenarios_on!(loopback, beds::Loopback::Software);
#[cfg(feature = "dpdk")]
scenarios_on!(dpdk_net_ring, beds::Loopback::NetRing);
#[cfg(feature = "af_xdp")]
scenarios_on!(af_xdp, beds::RawBed::af_xdp("ca", 2), #[ignore = "needs root for veth pairs and XDP; tests/run.sh runs it"]);
#[cfg(feature = "dpdk")]
scenarios_on!(dpdk_af_packet, beds::RawBed::dpdk_af_packet("cp", 2), #[ignore = "needs root for a veth pair; tests/run.sh runs it"]);
#[cfg(feature = "dpdk")]
scenarios_on!(dpdk_af_xdp, beds::RawBed::dpdk_af_xdp("cx", 1), #[ignore = "needs root for a veth pair and XDP; tests/run.sh runs it"]);

// The VM test bed's NICs (tests/vm/run.sh runs these inside it, one at a time).
// Its e1000e, DPDK's second PCI driver, is tested in tests/vm.rs alone: a
// row of every scenario under emulation would take the VM past its budget.
#[cfg(feature = "af_xdp")]
scenarios_on!(vm_af_xdp_virtio, beds::RawBed::vm_af_xdp(), #[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]);
#[cfg(feature = "dpdk")]
scenarios_on!(vm_dpdk_virtio, beds::RawBed::vm_dpdk_virtio(), #[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]);
#[cfg(feature = "dpdk")]
scenarios_on!(vm_dpdk_tap, beds::RawBed::vm_dpdk_tap(), #[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]);
#[cfg(feature = "rdma")]
scenarios_on!(vm_soft_roce, beds::RoceBed::vm_soft_roce(), #[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]);

#[cfg(feature = "cuda")]
gpu_scenarios_on!(gpu_udp, beds::Udp { port: common::free_udp_port() });
#[cfg(feature = "cuda")]
gpu_scenarios_on!(gpu_tcp, beds::Tcp { port: common::free_tcp_port() });
#[cfg(feature = "cuda")]
gpu_scenarios_on!(gpu_loopback, beds::Loopback::Software);
