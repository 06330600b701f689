//! The backends under test ("beds"): how each is configured, and how an
//! independent sender puts datagrams on its wire.

use std::io::Read;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use daqiri::{Engine, PacketMut};
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

    /// `config()` with TX queue 0 sending from region `tx_mem` (or `mem`,
    /// where RX and TX must share one).
    fn tx_config(&self) -> TestConfig {
        self.config().region("tx_mem", 1024, 2048).tx_queue(tx(0, "tx_mem").batch(16))
    }

    /// The region `tx_config` sends from.
    fn tx_region(&self) -> &'static str {
        "tx_mem"
    }

    /// Writes `payload` into a TX packet as the bed's wire carries it: the
    /// payload alone on sockets, in a UDP frame to [`TX_PORT`] on raw backends.
    fn write_tx(&self, packet: &mut PacketMut<'_>, payload: &[u8]) {
        packet.write(payload).expect("the payload fits");
    }

    /// An independent reader at the far end of the bed's wire.
    fn tx_reader(&self) -> Box<dyn Reader>;
}

/// The UDP destination port of the frames raw backends send in TX scenarios.
pub const TX_PORT: u16 = 6001;

/// Reads what an engine's TX queue 0 put on a bed's wire.
pub trait Reader {
    /// Makes itself known to the running engine where it must be (a
    /// socket server answers its last peer); returns once it is.
    fn attach(&mut self, _engine: &Engine) {}

    /// The next payload (a byte stream: the next bytes) that arrives within
    /// `within`.
    fn next(&mut self, engine: &Engine, within: Duration) -> Option<Vec<u8>>;
}

/// Waits until the engine's port 0 has heard from a peer.
fn await_peer(engine: &Engine) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.stats().ports[0].link.peer.is_none() {
        assert!(Instant::now() < deadline, "the engine hears from the reader");
        std::thread::sleep(Duration::from_millis(5));
    }
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
    fn tx_reader(&self) -> Box<dyn Reader> {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a reader socket");
        socket.connect(("127.0.0.1", self.port)).expect("connect to the server");
        Box::new(UdpReader { socket })
    }
}

/// A client of the UDP server: its first datagram makes it the server's peer.
struct UdpReader {
    socket: UdpSocket,
}

impl Reader for UdpReader {
    fn attach(&mut self, engine: &Engine) {
        self.socket.send(b"hello").expect("greet the server");
        await_peer(engine);
    }
    fn next(&mut self, _engine: &Engine, within: Duration) -> Option<Vec<u8>> {
        self.socket.set_read_timeout(Some(within)).unwrap();
        let mut buffer = vec![0u8; 65536];
        let n = self.socket.recv(&mut buffer).ok()?;
        buffer.truncate(n);
        Some(buffer)
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
    fn tx_reader(&self) -> Box<dyn Reader> {
        Box::new(TcpReader { server: self.port, stream: None })
    }
}

/// A client of the TCP server, which sends to its connected peer.
struct TcpReader {
    server: u16,
    stream: Option<std::net::TcpStream>,
}

impl Reader for TcpReader {
    fn attach(&mut self, engine: &Engine) {
        self.stream = Some(std::net::TcpStream::connect(("127.0.0.1", self.server)).expect("connect to the server"));
        await_peer(engine);
    }
    fn next(&mut self, _engine: &Engine, within: Duration) -> Option<Vec<u8>> {
        let stream = self.stream.as_mut().expect("attached");
        stream.set_read_timeout(Some(within)).unwrap();
        let mut buffer = vec![0u8; 65536];
        let n = stream.read(&mut buffer).ok().filter(|&n| n > 0)?;
        buffer.truncate(n);
        Some(buffer)
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

/// A backend whose TX queue 0 comes back on RX queue 0: the engine's own
/// TX queue is the wire.
pub enum Loopback {
    /// The engine's software loopback.
    Software,
    /// DPDK's `net_ring`, whose TX queue i feeds RX queue i.
    #[cfg(feature = "dpdk")]
    NetRing,
}

impl Bed for Loopback {
    fn name(&self) -> &'static str {
        match self {
            Loopback::Software => "sw loopback",
            #[cfg(feature = "dpdk")]
            Loopback::NetRing => "dpdk net_ring",
        }
    }
    fn config(&self) -> TestConfig {
        let base = match self {
            Loopback::Software => TestConfig::loopback(),
            #[cfg(feature = "dpdk")]
            Loopback::NetRing => TestConfig::dpdk("net_ring0").master_core(0),
        };
        base.region("tx_mem", 1024, 2048).tx_queue(tx(0, "tx_mem").batch(16))
    }
    fn headers(&self) -> usize {
        RAW_HEADERS
    }
    fn sender(&self, index: u16) -> Box<dyn Sender> {
        Box::new(TxQueueSender(40_000 + index))
    }
    fn tx_config(&self) -> TestConfig {
        self.config()
    }
    fn write_tx(&self, packet: &mut PacketMut<'_>, payload: &[u8]) {
        packet.write_udp_frame(&tx_frame([2, 0, 0, 0, 0, 2]), payload).expect("the frame fits");
    }
    fn tx_reader(&self) -> Box<dyn Reader> {
        Box::new(LoopbackReader)
    }
}

/// The loopback's wire ends in the engine's own RX queue 0.
struct LoopbackReader;

impl Reader for LoopbackReader {
    fn next(&mut self, engine: &Engine, within: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(burst) = engine.get_rx_burst(0, 0).expect("port 0 queue 0") {
                assert_eq!(burst.num_packets(), 1, "one frame per burst of one");
                return Some(burst.packet(0).data()[RAW_HEADERS..].to_vec());
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }
}

/// The headers of the frames TX scenarios send on raw backends, to `dst_mac`.
fn tx_frame(dst_mac: [u8; 6]) -> daqiri::headers::UdpFrame {
    daqiri::headers::UdpFrame {
        src_mac: [2, 0, 0, 0, 0, 9],
        dst_mac,
        src_ip: [10, 203, 0, 2].into(),
        dst_ip: [10, 203, 0, 1].into(),
        src_port: 6000,
        dst_port: TX_PORT,
    }
}

/// Sends through the engine's own TX queue 0.
struct TxQueueSender(u16);

impl Sender for TxQueueSender {
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
        send_one(engine, |packet| {
            packet.write_udp_frame(&frame, payload).expect("the frame fits");
        });
    }
}

/// Sends one packet, written by `write`, on the engine's TX queue 0,
/// waiting for a burst and for room in the queue as long as it takes.
pub fn send_one(engine: &Engine, write: impl FnOnce(&mut PacketMut<'_>)) {
    let mut burst = loop {
        match engine.get_tx_packet_burst(0, 0, 1) {
            Ok(burst) => break burst,
            Err(_) => std::thread::yield_now(),
        }
    };
    write(&mut burst.packet_mut(0));
    let mut pending = burst;
    while let Err(refused) = engine.send_tx_burst(pending) {
        pending = refused.burst;
        std::thread::yield_now();
    }
}

#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
mod raw {
    use std::time::{Duration, Instant};

    use daqiri::{Engine, PacketMut};
    use daqiri_config::testing::{TestConfig, tx};

    use super::{Bed, RAW_HEADERS, Reader, Sender, TX_PORT};
    use crate::common::veth::{RawSocket, Veth, udp_frame_to};

    /// A veth pair whose receiving end a raw backend drives; senders are raw
    /// AF_PACKET sockets on the other end, in a namespace of their own.
    pub struct VethBed {
        pub veth: Veth,
        kind: RawKind,
    }

    // Each build with one raw backend constructs only its own kinds.
    #[derive(Clone, Copy)]
    enum RawKind {
        #[cfg_attr(not(feature = "af_xdp"), allow(dead_code))]
        AfXdp,
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        DpdkAfPacket,
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        DpdkAfXdp,
    }

    impl VethBed {
        /// Our AF_XDP backend on a veth of `queues` queues.
        #[cfg_attr(not(feature = "af_xdp"), allow(dead_code))]
        pub fn af_xdp(tag: &str, queues: u32) -> Self {
            Self { veth: Veth::quiet(tag, queues), kind: RawKind::AfXdp }
        }

        /// DPDK's `net_af_packet` on a veth of `queues` queues.
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        pub fn dpdk_af_packet(tag: &str, queues: u32) -> Self {
            Self { veth: Veth::quiet(tag, queues), kind: RawKind::DpdkAfPacket }
        }

        /// DPDK's `net_af_xdp` on a veth of `queues` queues.
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        pub fn dpdk_af_xdp(tag: &str, queues: u32) -> Self {
            Self { veth: Veth::quiet(tag, queues), kind: RawKind::DpdkAfXdp }
        }
    }

    impl Bed for VethBed {
        fn name(&self) -> &'static str {
            match self.kind {
                RawKind::AfXdp => "af_xdp (veth)",
                RawKind::DpdkAfPacket => "dpdk net_af_packet (veth)",
                RawKind::DpdkAfXdp => "dpdk net_af_xdp (veth)",
            }
        }
        fn config(&self) -> TestConfig {
            match self.kind {
                RawKind::AfXdp => TestConfig::af_xdp(&self.veth.receive),
                RawKind::DpdkAfPacket => TestConfig::dpdk_af_packet(&self.veth.receive).master_core(0),
                // DPDK 22.11's net_af_xdp counts a netdev's combined channels,
                // which a veth has none of: one queue it is.
                RawKind::DpdkAfXdp => {
                    TestConfig::dpdk(&format!("net_af_xdp0,iface={}", self.veth.receive)).master_core(0)
                }
            }
        }
        fn headers(&self) -> usize {
            RAW_HEADERS
        }
        fn buf_size(&self) -> u64 {
            match self.kind {
                // net_af_packet wants a whole frame slot after DPDK's headroom.
                RawKind::DpdkAfPacket => 4096,
                RawKind::AfXdp | RawKind::DpdkAfXdp => 2048,
            }
        }
        fn sender(&self, index: u16) -> Box<dyn Sender> {
            Box::new(RawSender { socket: self.veth.sender(), port: 40_000 + index, mac: self.veth.receive_mac() })
        }
        fn tx_config(&self) -> TestConfig {
            match self.kind {
                // The kernel takes one UMEM per NIC queue: TX sends from RX's region.
                RawKind::AfXdp => self.config().tx_queue(tx(0, "mem").batch(16)),
                RawKind::DpdkAfPacket | RawKind::DpdkAfXdp => {
                    self.config().region("tx_mem", 1024, 2048).tx_queue(tx(0, "tx_mem").batch(16))
                }
            }
        }
        fn tx_region(&self) -> &'static str {
            match self.kind {
                RawKind::AfXdp => "mem",
                RawKind::DpdkAfPacket | RawKind::DpdkAfXdp => "tx_mem",
            }
        }
        fn write_tx(&self, packet: &mut PacketMut<'_>, payload: &[u8]) {
            packet.write_udp_frame(&super::tx_frame([0xff; 6]), payload).expect("the frame fits");
        }
        fn tx_reader(&self) -> Box<dyn Reader> {
            Box::new(RawReader(self.veth.sender()))
        }
    }

    /// A raw socket on the far end of the veth, in its namespace: it keeps
    /// the frames sent to [`TX_PORT`].
    struct RawReader(RawSocket);

    impl Reader for RawReader {
        fn next(&mut self, _engine: &Engine, within: Duration) -> Option<Vec<u8>> {
            let deadline = Instant::now() + within;
            loop {
                let frame = self.0.receive(deadline.checked_duration_since(Instant::now())?)?;
                let to_tx_port =
                    frame.len() >= RAW_HEADERS && frame[12..14] == [8, 0] && frame[36..38] == TX_PORT.to_be_bytes();
                if to_tx_port {
                    return Some(frame[RAW_HEADERS..].to_vec());
                }
            }
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
