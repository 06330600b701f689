//! The DPDK backend on DPDK's virtual devices (no NIC, no hugepages):
//! packets land in mbufs that are our own region buffers and reach the
//! application as ordinary bursts, and an engine restarted in the same
//! process reuses EAL and gets its device back. Built with `--features dpdk`.
#![cfg(feature = "dpdk")]

use std::time::{Duration, Instant};

use daqiri::{DropReason, Engine};

/// One RX queue on `net_null0`, which hands out a 64-byte frame on every
/// poll slot: the engine's overhead alone.
const NULL_DEVICE: &str = r#"
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    memory_regions:
    - { name: rx_mem, kind: host, num_bufs: 16384, buf_size: 2048 }
    interfaces:
    - name: null_port
      address: net_null0
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 256, timeout_us: 1000, memory_regions: [rx_mem] }
"#;

/// Receives until `want` packets came in bursts; returns the bursts' sizes.
fn receive(engine: &Engine, want: usize) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sizes = Vec::new();
    while sizes.iter().sum::<usize>() < want {
        assert!(Instant::now() < deadline, "only {} of {want} packets in 10 s", sizes.iter().sum::<usize>());
        if let Some(burst) = engine.get_rx_burst(0, 0).expect("port 0 queue 0") {
            for packet in burst.packets() {
                assert_eq!(packet.len(), 64, "net_null's frames are 64 bytes");
                assert_eq!(packet.data().len(), 64);
            }
            sizes.push(burst.num_packets());
        }
    }
    sizes
}

#[test]
fn null_device_packets_arrive_in_region_buffers_and_go_back_on_drop() {
    let engine = Engine::from_yaml(NULL_DEVICE).expect("the engine starts on net_null0");
    let sizes = receive(&engine, 100_000);
    assert!(sizes.iter().all(|&n| n <= 256), "bursts respect batch_size: {:?}", &sizes[..8]);
    let stats = engine.stats();
    let region = stats.regions.iter().find(|r| r.name == "rx_mem").expect("the region");
    assert!(region.in_use < 16384, "dropped bursts gave their buffers back: {} in use", region.in_use);
    engine.shutdown();
    drop(engine);

    // A second engine in the same process: EAL is reused, the device comes back.
    let engine = Engine::from_yaml(NULL_DEVICE).expect("a restarted engine gets net_null0 again");
    receive(&engine, 10_000);
}

#[test]
fn flow_isolation_drops_what_no_flow_matches_and_counts_it() {
    // net_null's frames are zeros: not IPv4, so no flow matches them.
    let yaml = NULL_DEVICE.replace("      rx:\n", "      rx:\n        flow_isolation: true\n");
    assert_ne!(yaml, NULL_DEVICE);
    let engine = Engine::from_yaml(&yaml).expect("the engine starts on net_null0");
    let deadline = Instant::now() + Duration::from_secs(10);
    let dropped = || engine.stats().ports[0].rx_port_drops.drops(DropReason::UnmatchedFlow);
    while dropped() < 10_000 {
        assert!(Instant::now() < deadline, "unmatched frames were not counted: {}", dropped());
        assert!(engine.get_rx_burst(0, 0).unwrap().is_none(), "an unmatched frame was delivered");
    }
}

#[test]
fn several_queues_on_a_pmd_without_rte_flow_fail_with_its_reason() {
    let two_queues = NULL_DEVICE.replace(
        "memory_regions: [rx_mem] }\n",
        "memory_regions: [rx_mem] }\n        - { name: q1, id: 1, cpu_core: 1, batch_size: 256, memory_regions: [rx_mem] }\n",
    );
    let error = Engine::from_yaml(&two_queues).expect_err("two RX queues need rte_flow, which net_null lacks");
    assert_eq!(error.status, daqiri::Status::NotSupported);
    assert!(error.message.contains("the net_null PMD cannot program its flows"), "{error}");

    // The device was given back: the one-queue config starts again.
    let engine = Engine::from_yaml(NULL_DEVICE).expect("net_null0 after a failed start");
    receive(&engine, 1_000);
}
