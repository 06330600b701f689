//! What only the VM test bed's real drivers show (tests/vm/run.sh runs
//! these inside it; the conformance suite's VM rows run the shared
//! scenarios there): our XDP program runs in `virtio_net` itself, not in
//! the kernel's generic path, and DPDK drives the emulated PCI NICs through
//! `vfio-pci`, its DMA going through the IOMMU into our regions.
#![cfg(all(feature = "dpdk", feature = "af_xdp"))]

use std::time::{Duration, Instant};

use daqiri::Engine;
use daqiri_config::testing::{TestConfig, rx};

mod common;
use common::veth::{RawSocket, udp_frame_to};

fn vm_bed(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| panic!("{variable} is unset: run inside tests/vm/run.sh"))
}

/// The test's frame to `mac`: UDP from `src_port` to 5000, `seq` first in its payload.
fn frame_to(mac: [u8; 6], src_port: u16, seq: u32) -> Vec<u8> {
    udp_frame_to(mac, [10, 203, 0, 1], [10, 203, 0, 2], src_port, 5000, seq)
}

/// Whether `frame` is one of the test's (UDP to port 5000): the guest's
/// kernel NIC sends its own frames now and then, and they land too.
fn is_test_frame(frame: &[u8]) -> bool {
    frame.len() >= 46 && frame[12..14] == [8, 0] && frame[36..38] == 5000u16.to_be_bytes()
}

/// Sends `count` frames to `mac` from the guest kernel's NIC, paced for an
/// emulated wire, and reads them back from RX queue 0 of port 0.
fn frames_arrive(engine: &Engine, mac: [u8; 6], count: u32) {
    let sender = RawSocket::on(&vm_bed("DAQIRI_VM_SEND_NETDEV"));
    for seq in 0..count {
        sender.send(&frame_to(mac, 40_000, seq));
        std::thread::sleep(Duration::from_millis(2));
    }
    let (mut seen, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(20));
    while seen.len() < count as usize && Instant::now() < deadline {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            seen.extend(
                burst
                    .packets()
                    .filter(|p| is_test_frame(p.data()))
                    .map(|p| u32::from_be_bytes(p.data()[42..46].try_into().unwrap())),
            );
        }
    }
    assert_eq!(
        seen,
        (0..count).collect::<Vec<_>>(),
        "every frame arrives, in order: {:?}",
        engine.stats().ports[0].link
    );
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_af_xdp_runs_natively_in_virtio_net() {
    let netdev = vm_bed("DAQIRI_VM_XDP_NETDEV");
    // As many NIC queues as RX queues: a socket receives only its own.
    let channels = std::process::Command::new("ethtool").args(["-L", &netdev, "combined", "2"]).status();
    assert!(channels.is_ok_and(|s| s.success()), "ethtool -L {netdev} combined 2");
    let config = TestConfig::af_xdp(&netdev)
        .master_core(0)
        .region("mem", 4096, 2048)
        .rx_queue(rx(0, "mem").core(1).batch(8).timeout_us(500))
        .rx_queue(rx(1, "mem").core(1).batch(8).timeout_us(500));
    let engine = Engine::from_yaml(&config.yaml()).expect("AF_XDP on virtio_net");
    let link = engine.stats().ports[0].link.af_xdp.clone().expect("an AF_XDP link");
    assert_eq!(link.xdp_mode, "native", "virtio_net runs XDP in its driver: {link:?}");
    // One flow, one NIC queue (the host's tap hashes by flow): on whichever.
    let sender = RawSocket::on(&vm_bed("DAQIRI_VM_SEND_NETDEV"));
    let mac = [0x52, 0x54, 0, 0xda, 0, 2];
    for seq in 0..50u32 {
        sender.send(&frame_to(mac, 40_000, seq));
        std::thread::sleep(Duration::from_millis(2));
    }
    let (mut seen, deadline) = (0, Instant::now() + Duration::from_secs(20));
    while seen < 50 && Instant::now() < deadline {
        for queue in 0..2 {
            if let Some(burst) = engine.get_rx_burst(0, queue).unwrap() {
                seen += burst.packets().filter(|p| is_test_frame(p.data())).count();
            }
        }
    }
    assert_eq!(seen, 50, "every frame arrives through the native program: {link:?}");
}

/// DPDK on the PCI NIC at the address in `variable`, whose MAC ends in `mac`.
fn dpdk_receives_under_vfio(variable: &str, mac: u8) {
    let address = vm_bed(variable);
    // The kernel let go of the device and vfio-pci has it, in an IOMMU group.
    let device = std::path::Path::new("/sys/bus/pci/devices").join(&address);
    let driver = std::fs::read_link(device.join("driver")).expect("a driver");
    assert!(driver.ends_with("vfio-pci"), "{address} is under {driver:?}");
    assert!(device.join("iommu_group").exists(), "{address} sits behind the IOMMU");
    let config = TestConfig::dpdk(&address)
        .master_core(0)
        .region("mem", 4096, 2048)
        .rx_queue(rx(0, "mem").core(1).batch(8).timeout_us(500));
    let engine = Engine::from_yaml(&config.yaml()).expect("DPDK on the PCI NIC");
    frames_arrive(&engine, [0x52, 0x54, 0, 0xda, 0, mac], 100);
}

// One process per device: EAL starts once per process, with the first
// config's PCI addresses as its allow-list.
#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_dpdk_receives_from_virtio_net_pci_under_vfio_through_the_iommu() {
    dpdk_receives_under_vfio("DAQIRI_VM_VIRTIO_PCI", 1);
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_dpdk_receives_from_e1000e_under_vfio_through_the_iommu() {
    dpdk_receives_under_vfio("DAQIRI_VM_E1000E_PCI", 4);
}

/// RSS without flows on the virtio NIC: the host's tap spreads frames over
/// its queues by flow hash, as a NIC's RSS does; DPDK's virtio PMD has no
/// rte_flow, so flows among queues are refused there (the conformance
/// table's `rx.flows`), and plain RSS is what it offers.
#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_dpdk_spreads_senders_over_the_virtio_queues_each_on_its_own_core() {
    const SENDERS: u16 = 16;
    const EACH: u32 = 10;
    let config = TestConfig::dpdk(&vm_bed("DAQIRI_VM_VIRTIO_PCI"))
        .master_core(0)
        .region("mem", 4096, 2048)
        .rx_queue(rx(0, "mem").core(0).batch(8).timeout_us(200_000))
        .rx_queue(rx(1, "mem").core(1).batch(8).timeout_us(200_000));
    let engine = Engine::from_yaml(&config.yaml()).expect("DPDK on the PCI NIC with two queues");
    let workers: Vec<_> =
        engine.stats().ports[0].rx_queues.iter().map(|q| q.worker.clone().expect("a worker per queue")).collect();
    assert_eq!((workers[0].core, workers[1].core), (Some(0), Some(1)), "{workers:?}");
    let sender = RawSocket::on(&vm_bed("DAQIRI_VM_SEND_NETDEV"));
    let mac = [0x52, 0x54, 0, 0xda, 0, 1];
    for seq in 0..EACH {
        for port in 0..SENDERS {
            sender.send(&frame_to(mac, 40_000 + port, seq));
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let mut queue_of = std::collections::BTreeMap::new();
    let (mut seen, deadline) = (0, Instant::now() + Duration::from_secs(20));
    while seen < u32::from(SENDERS) * EACH && Instant::now() < deadline {
        for queue in 0..2u16 {
            let Some(burst) = engine.get_rx_burst(0, queue).unwrap() else { continue };
            for packet in burst.packets().filter(|p| is_test_frame(p.data())) {
                let source = u16::from_be_bytes(packet.data()[34..36].try_into().unwrap());
                let first = *queue_of.entry(source).or_insert(queue);
                assert_eq!(first, queue, "sender {source} stays on queue {first}");
                seen += 1;
            }
        }
    }
    assert_eq!(seen, u32::from(SENDERS) * EACH, "every frame arrives: {:?}", engine.stats().ports[0].rx_total());
    let queues: std::collections::BTreeSet<_> = queue_of.values().collect();
    assert_eq!(queues.len(), 2, "the senders spread over both queues: {queue_of:?}");
}

/// The contract's DMA mapping is what lets the NIC land frames: with the
/// region's IOMMU mapping taken away behind the engine's back, the virtio
/// NIC under vfio-pci lands nothing (the guest's IOMMU refuses its writes).
#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_dpdk_lands_nothing_in_a_region_the_iommu_does_not_map() {
    let config = TestConfig::dpdk(&vm_bed("DAQIRI_VM_VIRTIO_PCI"))
        .master_core(0)
        .region("mem", 4096, 2048)
        .rx_queue(rx(0, "mem").core(1).batch(1).timeout_us(500));
    let engine = Engine::from_yaml(&config.yaml()).expect("DPDK on the PCI NIC");
    let mac = [0x52, 0x54, 0, 0xda, 0, 1];
    frames_arrive(&engine, mac, 10);
    // A landed frame's address lies in the region DPDK registered as
    // external memory; its memseg list is the range the engine mapped.
    let sender = RawSocket::on(&vm_bed("DAQIRI_VM_SEND_NETDEV"));
    sender.send(&frame_to(mac, 40_000, 10));
    let deadline = Instant::now() + Duration::from_secs(10);
    let landed = loop {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            break burst.packet(0).data().as_ptr();
        }
        assert!(Instant::now() < deadline, "a frame lands while the region is mapped");
    };
    // SAFETY: EAL runs in this process (the engine started it); `landed`
    // points into registered external memory, whose list DPDK returns; the
    // port is DPDK's only one (id 0) and its device is live. Unmapping only
    // withdraws the NIC's access; the process's own mapping stays.
    unsafe {
        let list = dpdk_sys::rte_mem_virt2memseg_list(landed.cast());
        assert!(!list.is_null() && (*list).external != 0, "the frame landed in our registered region");
        let (base, len) = ((*list).__bindgen_anon_1.base_va, (*list).len);
        let mut info: dpdk_sys::rte_eth_dev_info = std::mem::zeroed();
        assert_eq!(dpdk_sys::rte_eth_dev_info_get(0, &mut info), 0);
        // IOVA as VA: the region's IOVAs are its addresses.
        assert_eq!(dpdk_sys::rte_dev_dma_unmap(info.device, base, base as u64, len), 0, "the mapping is withdrawn");
    }
    for seq in 0..20 {
        sender.send(&frame_to(mac, 40_000, 100 + seq));
        std::thread::sleep(Duration::from_millis(5));
    }
    // The NIC still completes descriptors (their rings are DPDK's own,
    // mapped memory), but the frames' bytes never reach the buffers.
    let until = Instant::now() + Duration::from_secs(5);
    let (mut completed, mut intact) = (0, 0);
    while Instant::now() < until {
        if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
            for packet in burst.packets() {
                completed += 1;
                let seq = packet.data().get(42..46).map(|b| u32::from_be_bytes(b.try_into().unwrap()));
                intact += usize::from(packet.data().get(..6) == Some(&mac[..]) && seq.is_some_and(|s| s >= 100));
            }
        }
    }
    assert_eq!(
        intact, 0,
        "no frame's bytes land in a region the IOMMU does not map ({completed} descriptors came back)"
    );
    let log = std::process::Command::new("dmesg").output().expect("dmesg");
    let faults = String::from_utf8_lossy(&log.stdout).matches("DMAR: [DMA Write").count();
    assert!(faults > 0, "the guest's IOMMU refused the NIC's writes, and logged it");
    // The device's rings now point at memory it cannot reach: a stop could
    // wait on it, and the process ends with the test anyway.
    std::mem::forget(engine);
}
