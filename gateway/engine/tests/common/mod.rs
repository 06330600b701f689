//! Fixtures shared by the engine's integration tests.

#![allow(dead_code)] // each test binary uses its own share of these

pub mod split_loop;
pub mod veth;

/// A free UDP port on 127.0.0.1, so parallel tests do not collide.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A free TCP port on 127.0.0.1.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A UDP server on `127.0.0.1:port` with RX queue `queue` over
/// `num_bufs` buffers of 2048 bytes in region `mem`.
pub fn udp_server(
    port: u16,
    queue: daqiri_config::testing::QueueBuilder,
    num_bufs: u32,
) -> daqiri_config::testing::TestConfig {
    daqiri_config::testing::TestConfig::udp_server(port).region("mem", num_bufs, 2048).rx_queue(queue)
}

/// Ethernet/IPv4/UDP headers from 10.0.0.1:4000 to 10.0.0.2:`dst_port`.
pub fn frame(dst_port: u16) -> daqiri::headers::UdpFrame {
    daqiri::headers::UdpFrame {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: [10, 0, 0, 1].into(),
        dst_ip: [10, 0, 0, 2].into(),
        src_port: 4000,
        dst_port,
    }
}

/// Sends UDP payloads to `dst_port` through port 0's software loopback,
/// 64 frames per burst, and waits until the loop carried them all.
pub fn send_payloads(engine: &daqiri::Engine, dst_port: u16, payloads: &[Vec<u8>]) {
    let before = engine.stats().ports[0].tx_queues[0].stats.packets;
    for chunk in payloads.chunks(64) {
        let mut burst = loop {
            match engine.get_tx_packet_burst(0, 0, chunk.len()) {
                Ok(b) => break b,
                Err(_) => std::thread::yield_now(),
            }
        };
        for (i, payload) in chunk.iter().enumerate() {
            burst.packet_mut(i).write_udp_frame(&frame(dst_port), payload).unwrap();
        }
        let mut pending = burst;
        while let Err(refused) = engine.send_tx_burst(pending) {
            pending = refused.burst;
            std::thread::yield_now();
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while engine.stats().ports[0].tx_queues[0].stats.packets < before + payloads.len() as u64 {
        assert!(std::time::Instant::now() < deadline, "the loop did not carry every frame");
        std::thread::yield_now();
    }
}

/// xorshift64, fixed seed: the same data on every run.
pub struct Random(pub u64);

impl Random {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
