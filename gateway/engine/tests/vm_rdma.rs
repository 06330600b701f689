//! The RoCE backend against soft-RoCE in the VM test bed (tests/vm/run.sh
//! runs these; tests/vm/soft_roce.sh left `rxe0` on 10.77.0.1), with
//! rdma-core's pyverbs as the independent peer (tests/vm/rdma_send.py);
//! and, on any host, what the backend refuses and how it fails.
#![cfg(feature = "rdma")]

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use daqiri::{Engine, Status};
use daqiri_config::model::TransportMode;
use daqiri_config::testing::{TestConfig, rx, tx};

/// The soft-RoCE device's address in the VM.
const RXE_ADDR: [u8; 4] = [10, 77, 0, 1];

/// Message `k` as tests/vm/rdma_send.py sends it.
fn message(k: u32) -> Vec<u8> {
    let length = 1 + (k as usize * 997) % 4096;
    let mut body = k.to_be_bytes().to_vec();
    body.extend((0..length.saturating_sub(4)).map(|i| (k as usize + i) as u8));
    body.truncate(length);
    body
}

/// A RoCE server on `addr` receiving into one 64-buffer region.
fn server(addr: SocketAddr) -> TestConfig {
    TestConfig::roce_server(addr).master_core(0).region("rx", 64, 4096).rx_queue(rx(0, "rx").core(1))
}

#[test]
fn what_the_roce_backend_does_not_do_yet_is_refused_by_path() {
    let mut config =
        server(SocketAddr::from((RXE_ADDR, 18_611))).rx_queue(rx(1, "rx").core(1)).tx_queue(tx(0, "rx").core(1));
    config.model_mut().interfaces[0].roce_config.as_mut().unwrap().transport_mode = TransportMode::Uc;
    let err = Engine::from_yaml(&config.yaml()).expect_err("refused");
    assert_eq!(err.status, Status::NotSupported, "{err}");
    for path in [
        "daqiri.cfg.interfaces[0].roce_config.transport_mode",
        "daqiri.cfg.interfaces[0].tx",
        "daqiri.cfg.interfaces[0].rx.queues[1]",
    ] {
        assert!(err.message.contains(path), "names {path}: {err}");
    }
}

#[test]
fn a_roce_server_fails_to_start_with_the_reason_where_no_rdma_device_has_its_address() {
    let err = Engine::new(server(SocketAddr::from(([127, 0, 0, 1], 18_612))).validate().unwrap())
        .expect_err("no RDMA device here");
    assert_eq!(err.status, Status::InvalidParameter, "{err}");
    assert!(err.message.contains("RoCE interface \"server\""), "names the interface: {err}");
}

fn in_the_vm() {
    assert_eq!(std::env::var("DAQIRI_VM").as_deref(), Ok("1"), "run inside tests/vm/run.sh");
}

#[test]
#[ignore = "needs the VM test bed; tests/vm/run.sh runs it"]
fn vm_rdma_rc_server_receives_every_send_of_a_pyverbs_peer_byte_exact() {
    in_the_vm();
    let local = SocketAddr::from((RXE_ADDR, 18_610));
    let config = TestConfig::roce_server(local)
        .master_core(0)
        .region("rx", 512, 4096)
        .rx_queue(rx(0, "rx").core(1).batch(16).timeout_us(2000))
        .validate()
        .unwrap();
    let engine = Engine::new(config).unwrap();
    let count = 300u32;
    let peer = Command::new("/usr/bin/python3")
        .args(["tests/vm/rdma_send.py", "10.77.0.1", "18610", &count.to_string()])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .spawn()
        .unwrap();
    let (mut seen, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
    while seen.len() < count as usize && Instant::now() < deadline {
        match engine.get_rx_burst(0, 0).unwrap() {
            Some(burst) => seen.extend(burst.packets().map(|p| p.data().to_vec())),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    let sent = peer.wait_with_output().unwrap();
    assert!(sent.status.success(), "the pyverbs peer failed: {sent:?}");
    assert_eq!(seen.len(), count as usize, "every message arrives: {:?}", engine.stats().ports[0]);
    for (k, data) in seen.iter().enumerate() {
        assert_eq!(data, &message(k as u32), "message {k} arrives whole, in order, of its own length");
    }
    let closed = Instant::now() + Duration::from_secs(10);
    while engine.stats().ports[0].link.connected != Some(false) && Instant::now() < closed {
        std::thread::sleep(Duration::from_millis(20));
    }
    let link = &engine.stats().ports[0].link;
    assert_eq!(link.connected, Some(false), "the peer disconnected and the server saw it: {link:?}");
}
