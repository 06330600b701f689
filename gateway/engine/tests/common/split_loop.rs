//! A software loop whose RX queue splits each frame (42 bytes of headers
//! into `hdr`, the rest into `pay`), and received bursts of it: packets of
//! two segments, as the writers must put back together.

use std::time::{Duration, Instant};

use daqiri::headers::UdpFrame;
use daqiri::{Burst, Engine};
use daqiri_config::testing::{TestConfig, rx, tx};

/// The loop's config.
pub fn config() -> String {
    TestConfig::loopback()
        .region("tx", 256, 2048)
        .region("hdr", 256, 42)
        .region("pay", 256, 2048)
        .tx_queue(tx(0, "tx").batch(32))
        .rx_queue(rx(0, "hdr").split_into("pay").batch(32).timeout_us(1000))
        .yaml()
}

/// Packet `i`'s payload (after its 42 bytes of headers): 100 + `i` bytes.
pub fn payload(i: usize) -> Vec<u8> {
    (0..100 + i).map(|b| (b * 7 + i) as u8).collect()
}

/// A received burst of `n` frames, each its headers then [`payload`].
pub fn received_burst(engine: &Engine, n: usize) -> Burst {
    let frame = UdpFrame {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: [10, 0, 0, 1].into(),
        dst_ip: [10, 0, 0, 2].into(),
        src_port: 40000,
        dst_port: 40001,
    };
    let mut tx = engine.get_tx_packet_burst(0, 0, n).unwrap();
    for i in 0..n {
        tx.packet_mut(i).write_udp_frame(&frame, &payload(i)).unwrap();
    }
    engine.send_tx_burst(tx).map_err(|e| e.error).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            assert_eq!(b.num_packets(), n);
            return b;
        }
        assert!(Instant::now() < deadline, "no burst came back");
    }
}
