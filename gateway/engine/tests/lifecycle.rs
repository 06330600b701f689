//! Engine lifecycle on software loopback: pools, bursts, batching, steering.

use std::time::{Duration, Instant};

use daqiri::headers::UdpFrame;
use daqiri::{Burst, DropReason, Engine, Status};
use daqiri_config::model::{FlowMatch, MemoryKind, PortMatch};
use daqiri_config::testing::{TestConfig, rx, tx};

/// A software loop: TX queue `t0` over `num_bufs` buffers, RX queues `r0`
/// (one region) and `r1` (headers split from payload), few metadata entries.
fn loopback(rx_batch: u32, timeout_us: u64, num_bufs: u32) -> TestConfig {
    let mut config = TestConfig::loopback()
        .rx_meta_buffers(16)
        .region("tx_mem", num_bufs, 2048)
        .region("rx_mem", 1024, 2048)
        .region("rx_hdr", 1024, 42)
        .tx_queue(tx(0, "tx_mem").batch(64))
        .rx_queue(rx(0, "rx_mem").named("r0").batch(rx_batch).timeout_us(timeout_us))
        .rx_queue(rx(1, "rx_hdr").split_into("rx_mem").named("r1").batch(rx_batch).timeout_us(timeout_us));
    config.model_mut().tx_meta_buffers = Some(8);
    config
}

fn start(config: &TestConfig) -> Engine {
    Engine::from_yaml(&config.yaml()).unwrap_or_else(|e| panic!("{e}"))
}

fn valid(config: &TestConfig) -> daqiri::config::ValidConfig {
    config.validate().unwrap()
}

fn frame(src_port: u16, dst_port: u16) -> UdpFrame {
    UdpFrame {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: [10, 0, 0, 1].into(),
        dst_ip: [10, 0, 0, 2].into(),
        src_port,
        dst_port,
    }
}

fn send(engine: &Engine, count: usize, dst_port: u16, payload: &[u8]) {
    let mut burst = engine.get_tx_packet_burst(0, 0, count).unwrap();
    for i in 0..count {
        burst.packet_mut(i).write_udp_frame(&frame(4096, dst_port), payload).unwrap();
    }
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
}

fn receive(engine: &Engine, queue: u16, within: Duration) -> Option<Burst> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(b) = engine.get_rx_burst(0, queue).unwrap() {
            return Some(b);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    None
}

#[test]
fn pool_exhaustion_reports_no_free_packet_buffers_and_recovers() {
    let engine = start(&loopback(1, 0, 100));
    let held = engine.get_tx_packet_burst(0, 0, 64).unwrap();
    let err = engine.get_tx_packet_burst(0, 0, 64).unwrap_err();
    assert_eq!(err.status, Status::NoFreePacketBuffers);
    assert!(err.message.contains("tx_mem"), "{err}");
    assert_eq!(engine.stats().regions[0].in_use, 64, "a failed allocation returns what it took");
    drop(held);
    assert_eq!(engine.stats().regions[0].in_use, 0, "dropping a burst returns its buffers");
    let again = engine.get_tx_packet_burst(0, 0, 64).unwrap();
    assert_eq!(again.num_packets(), 64);
}

#[test]
fn burst_metadata_exhaustion_reports_no_free_burst_buffers() {
    let engine = start(&loopback(1, 0, 200));
    let held: Vec<Burst> = (0..8).map(|_| engine.get_tx_packet_burst(0, 0, 1).unwrap()).collect();
    assert_eq!(engine.get_tx_packet_burst(0, 0, 1).unwrap_err().status, Status::NoFreeBurstBuffers);
    drop(held);
    assert!(engine.get_tx_packet_burst(0, 0, 1).is_ok());
}

#[test]
fn timeout_delivers_a_partial_batch() {
    let engine = start(&loopback(32, 2000, 200));
    send(&engine, 5, 9, b"partial");
    let burst = receive(&engine, 0, Duration::from_secs(2)).expect("timeout_us must deliver the 5 packets");
    assert_eq!(burst.num_packets(), 5);
}

#[test]
fn zero_timeout_waits_for_a_full_batch() {
    let engine = start(&loopback(8, 0, 200));
    send(&engine, 5, 9, b"x");
    assert!(receive(&engine, 0, Duration::from_millis(100)).is_none(), "no partial batch without timeout_us");
    send(&engine, 3, 9, b"x");
    assert_eq!(receive(&engine, 0, Duration::from_secs(2)).unwrap().num_packets(), 8);
}

#[test]
fn software_loopback_round_trips_and_steers_with_header_data_split() {
    let range = FlowMatch { udp_dst: Some(PortMatch { first: 6000, last: 6009 }), ..FlowMatch::default() };
    let engine = start(&loopback(4, 1000, 200).isolated().udp_flow(70, 0, 5000).flow(71, &[1], range));
    let payload: Vec<u8> = (0..200u8).collect();
    send(&engine, 4, 5000, &payload);
    send(&engine, 4, 6005, &payload);
    send(&engine, 2, 7000, &payload);

    let a = receive(&engine, 0, Duration::from_secs(2)).unwrap();
    assert_eq!(a.num_packets(), 4);
    for p in a.packets() {
        assert_eq!(p.flow_id(), Some(70));
        assert_eq!(&p.data()[42..], &payload[..]);
    }
    let b = receive(&engine, 1, Duration::from_secs(2)).unwrap();
    for p in b.packets() {
        assert_eq!(p.flow_id(), Some(71));
        assert_eq!(
            (p.num_segments(), p.segment_len(0), p.segment_len(1)),
            (2, 42, 200),
            "headers in segment 0, payload in 1"
        );
        assert_eq!(p.segment(1).unwrap(), &payload[..]);
    }
    let stats = engine.stats();
    assert_eq!(stats.ports[0].rx_port_drops.drops(DropReason::UnmatchedFlow), 2);
    assert_eq!(stats.ports[0].flows.iter().map(|f| f.packets).collect::<Vec<_>>(), vec![4, 4]);
}

#[test]
fn partial_release_returns_single_buffers() {
    let engine = start(&loopback(1, 0, 200));
    let mut burst = engine.get_tx_packet_burst(0, 0, 10).unwrap();
    burst.free_packet(3);
    assert!(burst.packet(3).is_freed());
    assert_eq!(engine.stats().regions[0].in_use, 9);
    burst.free_all_segment_packets(0);
    assert_eq!(engine.stats().regions[0].in_use, 0);
}

#[test]
fn flush_and_drop_all_traffic() {
    let engine = start(&loopback(1, 0, 200));
    engine.drop_all_traffic(0).unwrap();
    send(&engine, 3, 1, b"x");
    std::thread::sleep(Duration::from_millis(50));
    assert!(engine.get_rx_burst(0, 0).unwrap().is_none());
    engine.allow_all_traffic(0).unwrap();
    send(&engine, 3, 1, b"x");
    let deadline = Instant::now() + Duration::from_secs(2);
    while engine.stats().ports[0].rx_queues[0].ring_len < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(engine.flush_port_queue(0, 0).unwrap(), 3);
    let stats = engine.stats().ports[0].clone();
    assert_eq!(stats.rx_port_drops.drops(DropReason::DropAllTraffic), 3);
    assert_eq!(stats.rx_queues[0].stats.drops(DropReason::Flushed), 3);
    assert_eq!(engine.stats().regions[1].in_use, 0, "flushed bursts return their buffers");
}

#[test]
fn bad_calls_name_the_valid_choices() {
    let engine = start(&loopback(1, 0, 200));
    assert!(engine.get_rx_burst(0, 9).unwrap_err().message.contains("valid: 0, 1"));
    assert!(engine.get_rx_burst(4, 0).unwrap_err().message.contains("port 4 does not exist"));
    assert_eq!(engine.get_port_id("loop"), Some(0));
    assert_eq!(engine.get_port_id("nope"), None);
}

#[test]
fn gpu_memory_without_cuda_fails_init_clearly() {
    let mut config = loopback(1, 0, 200);
    config.model_mut().memory_regions[1].kind = MemoryKind::Device;
    let err = Engine::from_yaml(&config.yaml()).unwrap_err();
    assert_eq!(err.status, Status::NotSupported);
    assert!(err.message.contains("needs CUDA"), "{err}");
}

#[test]
#[ignore = "needs reserved hugepages; tests/run.sh reserves them"]
fn huge_regions_map_hugepages() {
    let mut config = loopback(1, 0, 200);
    config.model_mut().memory_regions[1].kind = MemoryKind::Huge;
    let before = daqiri::HugepageInfo::read().expect("kernel reports hugepages");
    let engine = start(&config);
    let during = daqiri::HugepageInfo::read().unwrap();
    assert!(during.free < before.free, "the huge region must take hugepages ({} -> {})", before.free, during.free);
    send(&engine, 2, 1, b"huge");
    let burst = receive(&engine, 0, Duration::from_secs(2)).unwrap();
    assert_eq!(&burst.packet(0).data()[42..], b"huge");
}

#[test]
#[ignore = "needs reserved hugepages; tests/run.sh reserves them"]
fn a_huge_region_larger_than_the_free_hugepages_refuses_to_start_rather_than_use_small_pages() {
    let info = daqiri::HugepageInfo::read().expect("kernel reports hugepages");
    let mut config = loopback(1, 0, 200);
    let region = &mut config.model_mut().memory_regions[1];
    region.kind = MemoryKind::Huge;
    // One buffer per hugepage, 64 more than are free.
    (region.buf_size, region.num_bufs) = (info.page_size, info.free as u32 + 64);
    let err = Engine::from_yaml(&config.yaml()).unwrap_err();
    assert_eq!(err.status, Status::NoFreePacketBuffers, "{err}");
    let needs = format!("need {} hugepages", info.free + 64);
    let free = format!("{} are free", info.free);
    assert!(err.message.contains(&needs) && err.message.contains(&free), "{err}");
    assert_eq!(daqiri::HugepageInfo::read().unwrap().free, info.free, "nothing is left mapped");
}

#[test]
fn flow_reload_swaps_steering_live_and_refuses_other_changes() {
    let flows = |queue: u16, id: u32| loopback(1, 0, 200).isolated().udp_flow(id, queue, 5000).udp_flow(9, 0, 5001);
    let engine = start(&flows(0, 70));
    send(&engine, 1, 5001, b"kept");
    receive(&engine, 0, Duration::from_secs(2)).unwrap();
    send(&engine, 1, 5000, b"before");
    assert_eq!(receive(&engine, 0, Duration::from_secs(2)).unwrap().packet(0).flow_id(), Some(70));

    engine.reload_flows(valid(&flows(1, 80))).unwrap();
    send(&engine, 1, 5000, b"after");
    assert_eq!(
        receive(&engine, 1, Duration::from_secs(2)).unwrap().packet(0).flow_id(),
        Some(80),
        "new rule, new queue"
    );
    let keep = engine.stats().ports[0].flows.iter().find(|f| f.id == 9).unwrap().packets;
    assert_eq!(keep, 1, "an unchanged flow keeps its counters across the reload");

    let mut other = flows(1, 80);
    other.model_mut().interfaces[0].rx.as_mut().unwrap().queues[1].batch_size = Some(2);
    let err = engine.reload_flows(valid(&other)).unwrap_err();
    assert!(err.message.contains("daqiri.cfg.interfaces[0].rx.queues changed"), "{err}");
    assert!(
        engine.config().config().interfaces[0].rx_queues()[1].batch_size == Some(1),
        "refused reload leaves the config"
    );
}

#[test]
fn flows_added_at_runtime_steer_count_against_capacity_and_outlive_reloads() {
    let mut base = loopback(1, 0, 200).isolated().udp_flow(1, 0, 5000);
    base.model_mut().interfaces[0].rx.as_mut().unwrap().dynamic_flow_capacity = 2;
    let engine = start(&base);
    let flow = |name: &str, id: u32, queue: u16, port: u16| -> daqiri::config::model::Flow {
        serde_yaml::from_str(&format!(
            "{{ name: {name}, id: {id}, action: {{ type: queue, id: {queue} }}, match: {{ udp_dst: {port} }} }}"
        ))
        .unwrap()
    };
    send(&engine, 1, 6000, b"isolated");
    assert!(receive(&engine, 1, Duration::from_millis(200)).is_none(), "no rule for 6000 yet");

    engine.add_flow(0, flow("b", 2, 1, 6000)).unwrap();
    send(&engine, 1, 6000, b"steered");
    assert_eq!(receive(&engine, 1, Duration::from_secs(2)).unwrap().packet(0).flow_id(), Some(2));

    let clash = engine.add_flow(0, flow("flow1", 3, 0, 6001)).unwrap_err();
    assert!(clash.message.contains("flow.name") && clash.message.contains("\"flow1\""), "{clash}");
    let no_queue = engine.add_flow(0, flow("c", 3, 7, 6001)).unwrap_err();
    assert!(no_queue.message.contains("flow.action"), "a bad queue id is named: {no_queue}");
    engine.add_flow(0, flow("c", 3, 0, 6001)).unwrap();
    let full = engine.add_flow(0, flow("d", 4, 0, 6002)).unwrap_err();
    assert_eq!(full.status, Status::NoSpaceAvailable, "{full}");
    assert!(full.message.contains("dynamic_flow_capacity"), "{full}");

    // A flow reload keeps the runtime flows that still fit; one whose id the new config takes is removed.
    engine.reload_flows(valid(&base.clone().udp_flow(3, 1, 7000))).unwrap();
    let kept: Vec<String> = engine.runtime_flows(0).unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(kept, ["b"]);
    let ids: Vec<u32> = engine.stats().ports[0].flows.iter().map(|f| f.id).collect();
    assert_eq!(ids, [1, 3, 2], "config flows first, then the runtime flows");
    assert_eq!(engine.stats().ports[0].flows[2].packets, 1, "the kept runtime flow keeps its counters");

    let removed = engine.delete_flow(0, 2).unwrap();
    assert_eq!(removed.name, "b");
    assert!(engine.runtime_flows(0).unwrap().is_empty());
    send(&engine, 1, 6000, b"isolated again");
    assert!(receive(&engine, 1, Duration::from_millis(200)).is_none(), "deleted: isolation drops it");
    let unknown = engine.delete_flow(0, 2).unwrap_err();
    assert!(unknown.message.contains("flow ids: [1, 3]"), "{unknown}");
}

#[test]
fn runtime_flows_are_allowed_at_a_dynamic_flow_capacity_of_0_as_in_daqiri() {
    // DAQIRI's 0 means "no DPDK template table", not "no dynamic flows"; its
    // dynamic-flow example's config has 0. Ours bounds them by DEFAULT_RUNTIME_FLOWS there.
    let engine = start(&loopback(1, 0, 200).isolated());
    let flow = |id: u32| -> daqiri::config::model::Flow {
        serde_yaml::from_str(&format!(
            "{{ name: f{id}, id: {id}, action: {{ type: queue, id: 1 }}, match: {{ udp_dst: {} }} }}",
            6000 + id
        ))
        .unwrap()
    };
    engine.add_flow(0, flow(2)).unwrap();
    send(&engine, 1, 6002, b"steered");
    assert_eq!(receive(&engine, 1, Duration::from_secs(2)).unwrap().packet(0).flow_id(), Some(2));
    let limit = daqiri::config::model::DEFAULT_RUNTIME_FLOWS;
    for id in 3..limit + 2 {
        engine.add_flow(0, flow(id)).unwrap();
    }
    let full = engine.add_flow(0, flow(limit + 2)).unwrap_err();
    assert_eq!(full.status, Status::NoSpaceAvailable, "{full}");
    assert!(full.message.contains(&format!("holds {limit} runtime flows")), "{full}");
    assert!(full.message.contains("rx.dynamic_flow_capacity of 0"), "{full}");
}
