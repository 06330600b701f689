//! The backends under test ("beds"): how each is configured, and how an
//! independent sender puts datagrams on its wire.

use std::net::UdpSocket;

use daqiri::Engine;
use daqiri_config::testing::{TestConfig, tx};

#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
pub use raw::VethBed;

/// Bytes of Ethernet, IPv4 and UDP headers before a raw frame's payload.
pub const RAW_HEADERS: usize = 42;

/// One backend, set up for one test.
pub trait Bed {
    /// The row name in the conformance table.
    fn name(&self) -> &'static str;

    /// The interface with no queues yet, and whatever the bed itself needs
    /// (the loopback's TX queue). Queues land in region `mem`.
    fn config(&self) -> TestConfig;

    /// Bytes before the payload in what a queue receives: 0 on sockets
    /// (they deliver payloads), the frame's headers on raw backends.
    fn headers(&self) -> usize;

    /// Flows can tell senders apart (a byte stream cannot).
    fn has_datagrams(&self) -> bool {
        true
    }

    /// `buf_size` of the region RX queues land in.
    fn buf_size(&self) -> u64 {
        2048
    }

    /// A sender; each has its own UDP source port, which flows match.
    fn sender(&self, index: u16) -> Box<dyn Sender>;
}

/// Puts datagrams on a bed's wire.
pub trait Sender {
    /// The UDP source port its datagrams carry.
    fn port(&self) -> u16;

    /// Sends one datagram with `payload`.
    fn send(&self, engine: &Engine, payload: &[u8]);
}

/// A UDP socket server on loopback; senders are kernel UDP sockets.
pub struct Udp {
    pub port: u16,
}

impl Bed for Udp {
    fn name(&self) -> &'static str {
        "udp socket"
    }
    fn config(&self) -> TestConfig {
        TestConfig::udp_server(self.port)
    }
    fn headers(&self) -> usize {
        0
    }
    fn sender(&self, _index: u16) -> Box<dyn Sender> {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a sender socket");
        socket.connect(("127.0.0.1", self.port)).expect("connect to the server");
        Box::new(UdpSender(socket))
    }
}

struct UdpSender(UdpSocket);

impl Sender for UdpSender {
    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }
    fn send(&self, _engine: &Engine, payload: &[u8]) {
        self.0.send(payload).expect("send a datagram");
    }
}

/// A TCP socket server on loopback; the sender is a kernel TCP stream.
pub struct Tcp {
    pub port: u16,
}

impl Bed for Tcp {
    fn name(&self) -> &'static str {
        "tcp socket"
    }
    fn config(&self) -> TestConfig {
        TestConfig::tcp_server(self.port)
    }
    fn headers(&self) -> usize {
        0
    }
    fn has_datagrams(&self) -> bool {
        false
    }
    fn sender(&self, _index: u16) -> Box<dyn Sender> {
        Box::new(TcpSender { server: self.port, stream: std::sync::Mutex::new(None) })
    }
}

/// Connects on its first send: the server listens only once the engine runs.
struct TcpSender {
    server: u16,
    stream: std::sync::Mutex<Option<std::net::TcpStream>>,
}

impl Sender for TcpSender {
    fn port(&self) -> u16 {
        0 // no flow matches a byte stream
    }
    fn send(&self, _engine: &Engine, payload: &[u8]) {
        use std::io::Write;
        let mut stream = self.stream.lock().unwrap();
        let stream = stream.get_or_insert_with(|| {
            std::net::TcpStream::connect(("127.0.0.1", self.server)).expect("connect to the server")
        });
        stream.write_all(payload).expect("write to the stream");
    }
}

/// Software loopback: the engine's own TX queue is the wire.
pub struct Loopback;

impl Bed for Loopback {
    fn name(&self) -> &'static str {
        "sw loopback"
    }
    fn config(&self) -> TestConfig {
        TestConfig::loopback().region("tx_mem", 1024, 2048).tx_queue(tx(0, "tx_mem").batch(16))
    }
    fn headers(&self) -> usize {
        RAW_HEADERS
    }
    fn sender(&self, index: u16) -> Box<dyn Sender> {
        Box::new(LoopbackSender(40_000 + index))
    }
}

struct LoopbackSender(u16);

impl Sender for LoopbackSender {
    fn port(&self) -> u16 {
        self.0
    }
    fn send(&self, engine: &Engine, payload: &[u8]) {
        let frame = daqiri::headers::UdpFrame {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: [10, 0, 0, 1].into(),
            dst_ip: [10, 0, 0, 2].into(),
            src_port: self.0,
            dst_port: 5000,
        };
        let mut burst = loop {
            match engine.get_tx_packet_burst(0, 0, 1) {
                Ok(burst) => break burst,
                Err(_) => std::thread::yield_now(),
            }
        };
        burst.packet_mut(0).write_udp_frame(&frame, payload).expect("the frame fits");
        let mut pending = burst;
        while let Err(refused) = engine.send_tx_burst(pending) {
            pending = refused.burst;
            std::thread::yield_now();
        }
    }
}

#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
mod raw {
    use daqiri::Engine;
    use daqiri_config::testing::TestConfig;

    use super::{Bed, RAW_HEADERS, Sender};
    use crate::common::veth::{RawSocket, Veth, udp_frame_to};

    /// A veth pair whose receiving end a raw backend drives; senders are raw
    /// AF_PACKET sockets on the other end, in a namespace of their own.
    pub struct VethBed {
        pub veth: Veth,
        kind: RawKind,
    }

    #[derive(Clone, Copy)]
    enum RawKind {
        AfXdp,
        DpdkAfPacket,
    }

    impl VethBed {
        /// Our AF_XDP backend on a veth of `queues` queues.
        pub fn af_xdp(tag: &str, queues: u32) -> Self {
            Self { veth: Veth::quiet(tag, queues), kind: RawKind::AfXdp }
        }

        /// DPDK's `net_af_packet` on a veth of `queues` queues.
        pub fn dpdk_af_packet(tag: &str, queues: u32) -> Self {
            Self { veth: Veth::quiet(tag, queues), kind: RawKind::DpdkAfPacket }
        }
    }

    impl Bed for VethBed {
        fn name(&self) -> &'static str {
            match self.kind {
                RawKind::AfXdp => "af_xdp (veth)",
                RawKind::DpdkAfPacket => "dpdk net_af_packet (veth)",
            }
        }
        fn config(&self) -> TestConfig {
            match self.kind {
                RawKind::AfXdp => TestConfig::af_xdp(&self.veth.receive),
                RawKind::DpdkAfPacket => TestConfig::dpdk_af_packet(&self.veth.receive).master_core(0),
            }
        }
        fn headers(&self) -> usize {
            RAW_HEADERS
        }
        fn buf_size(&self) -> u64 {
            match self.kind {
                // net_af_packet wants a whole frame slot after DPDK's headroom.
                RawKind::DpdkAfPacket => 4096,
                RawKind::AfXdp => 2048,
            }
        }
        fn sender(&self, index: u16) -> Box<dyn Sender> {
            Box::new(RawSender { socket: self.veth.sender(), port: 40_000 + index, mac: self.veth.receive_mac() })
        }
    }

    struct RawSender {
        socket: RawSocket,
        port: u16,
        mac: [u8; 6],
    }

    impl Sender for RawSender {
        fn port(&self) -> u16 {
            self.port
        }
        fn send(&self, _engine: &Engine, payload: &[u8]) {
            let mut frame = udp_frame_to(self.mac, [10, 203, 0, 1], [10, 203, 0, 2], self.port, 5000, 0);
            frame.truncate(RAW_HEADERS);
            frame.extend_from_slice(payload);
            // The IPv4 and UDP lengths and the IPv4 checksum for this payload.
            let ip_len = (frame.len() - 14) as u16;
            frame[16..18].copy_from_slice(&ip_len.to_be_bytes());
            frame[24..26].copy_from_slice(&[0, 0]);
            let sum = checksum(&frame[14..34]);
            frame[24..26].copy_from_slice(&sum.to_be_bytes());
            frame[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
            frame[40..42].copy_from_slice(&[0, 0]);
            self.socket.send(&frame);
        }
    }

    /// The Internet checksum of an IPv4 header.
    fn checksum(header: &[u8]) -> u16 {
        let mut sum: u32 = header.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }
}
