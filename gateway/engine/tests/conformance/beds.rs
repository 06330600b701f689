//! The backends under test ("beds"): how each is configured, and how an
//! independent sender puts datagrams on its wire.

use std::io::Read;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use daqiri::{Burst, Engine, PacketMut};
use daqiri_config::testing::{TestConfig, tx};

#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
pub use raw::RawBed;
#[cfg(feature = "rdma")]
pub use roce::RoceBed;

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

    /// What arrives keeps the sender's message boundaries (a byte stream
    /// does not).
    fn has_datagrams(&self) -> bool {
        true
    }

    /// Flows can tell senders apart: a datagram carries headers to match
    /// (an RDMA message carries none of its own).
    fn matches_flows(&self) -> bool {
        self.has_datagrams()
    }

    /// Why nothing is ever dropped for an application that stops reading
    /// (the transport holds the sender back), if so.
    fn flow_controlled(&self) -> Option<&'static str> {
        None
    }

    /// Starts the engine on `config`, the wire made ready for it first
    /// (a NIC's RX channels set to the config's RX queues, where the
    /// backend binds one socket per NIC queue).
    fn start(&self, config: &TestConfig) -> daqiri::Result<Engine> {
        Engine::from_yaml(&config.yaml())
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

    /// `payload` as the bed's wire carries it: alone on sockets, in a UDP
    /// frame to [`TX_PORT`] on raw backends.
    fn tx_bytes(&self, payload: &[u8]) -> Vec<u8> {
        payload.to_vec()
    }

    /// Writes `payload` into a TX packet as [`tx_bytes`](Self::tx_bytes) says.
    fn write_tx(&self, packet: &mut PacketMut<'_>, payload: &[u8]) {
        packet.write(&self.tx_bytes(payload)).expect("the payload fits");
    }

    /// An independent reader at the far end of the bed's wire.
    fn tx_reader(&self) -> Box<dyn Reader>;

    /// A burst (and reorder batch) timeout for scenarios that read only
    /// after sending: `us`, or longer where the wire is so slow that bursts
    /// that short would hold a few packets each and fill the queue's ring of
    /// bursts first, or batches would time out before their packets came.
    fn burst_timeout_us(&self, us: u64) -> u64 {
        us
    }

    /// Why sent TX buffers may stay out of their pool until more is sent
    /// (a driver that frees them only when its ring needs the room), if so.
    fn keeps_sent_tx_buffers(&self) -> Option<&'static str> {
        None
    }
}

/// The UDP destination port of the frames raw backends send in TX scenarios.
pub const TX_PORT: u16 = 6001;

/// Reads what an engine's TX queue 0 put on a bed's wire.
pub trait Reader {
    /// Makes itself known to the running engine where it must be (a
    /// socket server answers its last peer); returns once it is.
    fn attach(&mut self, _engine: &Engine) {}

    /// What next arrives within `within`, as the wire carries it: a raw
    /// backend's frame, a datagram's or message's payload, a byte stream's
    /// next bytes (what [`Bed::tx_bytes`] makes of a payload).
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

    /// The Ethernet source and destination of its frames; `None` where it
    /// sends datagrams on a socket, with no Ethernet header.
    fn macs(&self) -> Option<([u8; 6], [u8; 6])> {
        None
    }

    /// The IPv4 source and destination of its datagrams; `None` where
    /// they carry none (RDMA messages, a byte stream).
    fn ipv4(&self) -> Option<([u8; 4], [u8; 4])> {
        None
    }
}

/// Each raw sender's own source IPv4 address, from its UDP source port:
/// its bytes swapped, so that the Toeplitz hash of address and port does
/// not cancel in its low bit (with the port's low byte in the address's
/// last, every sender's flow landed on one queue of two).
fn sender_ipv4(port: u16) -> [u8; 4] {
    let [hi, lo] = port.to_be_bytes();
    [10, 203, lo, hi]
}

/// Each raw sender's own source MAC, from its UDP source port.
fn sender_mac(port: u16) -> [u8; 6] {
    let [hi, lo] = port.to_be_bytes();
    [2, 0, 0, 1, hi, lo]
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
    fn sender(&self, index: u16) -> Box<dyn Sender> {
        // Each from an address of its own (all of 127/8 is this host's).
        let [hi, lo] = index.to_be_bytes();
        let socket = UdpSocket::bind((std::net::Ipv4Addr::new(127, hi, lo, 1), 0)).expect("a sender socket");
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
    fn ipv4(&self) -> Option<([u8; 4], [u8; 4])> {
        let octets = |a: std::net::SocketAddr| match a.ip() {
            std::net::IpAddr::V4(ip) => ip.octets(),
            std::net::IpAddr::V6(_) => unreachable!("the bed is IPv4"),
        };
        Some((octets(self.0.local_addr().unwrap()), octets(self.0.peer_addr().unwrap())))
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
    fn flow_controlled(&self) -> Option<&'static str> {
        Some("a byte stream is never dropped: TCP flow control slows the sender")
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
    fn tx_bytes(&self, payload: &[u8]) -> Vec<u8> {
        tx_frame_bytes([2, 0, 0, 0, 0, 2], payload)
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
                return Some(burst.packet(0).data().to_vec());
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }
}

/// The frame TX scenarios send on raw backends to `dst_mac`, carrying `payload`.
fn tx_frame_bytes(dst_mac: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let frame = daqiri::headers::UdpFrame {
        src_mac: [2, 0, 0, 0, 0, 9],
        dst_mac,
        src_ip: [10, 203, 0, 2].into(),
        dst_ip: [10, 203, 0, 1].into(),
        src_port: 6000,
        dst_port: TX_PORT,
    };
    let mut bytes = vec![0; daqiri::headers::UDP_FRAME_HEADERS + payload.len()];
    frame.write(&mut bytes, payload).expect("the frame fits");
    bytes
}

/// Sends through the engine's own TX queue 0.
struct TxQueueSender(u16);

impl TxQueueSender {
    const DST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const DST_IP: [u8; 4] = [10, 0, 0, 2];
}

impl Sender for TxQueueSender {
    fn port(&self) -> u16 {
        self.0
    }
    fn macs(&self) -> Option<([u8; 6], [u8; 6])> {
        Some((sender_mac(self.0), Self::DST_MAC))
    }
    fn ipv4(&self) -> Option<([u8; 4], [u8; 4])> {
        Some((sender_ipv4(self.0), Self::DST_IP))
    }
    fn send(&self, engine: &Engine, payload: &[u8]) {
        let frame = daqiri::headers::UdpFrame {
            src_mac: sender_mac(self.0),
            dst_mac: Self::DST_MAC,
            src_ip: sender_ipv4(self.0).into(),
            dst_ip: Self::DST_IP.into(),
            src_port: self.0,
            dst_port: 5000,
        };
        send_one(engine, |burst| {
            let mut packet = burst.packet_mut(0);
            packet.write_udp_frame(&frame, payload).expect("the frame fits");
        });
    }
}

/// Sends one packet, written by `write`, on the engine's TX queue 0,
/// waiting for a burst and for room in the queue as long as it takes.
pub fn send_one(engine: &Engine, write: impl FnOnce(&mut Burst)) {
    let mut burst = loop {
        match engine.get_tx_packet_burst(0, 0, 1) {
            Ok(burst) => break burst,
            Err(_) => std::thread::yield_now(),
        }
    };
    write(&mut burst);
    let mut pending = burst;
    while let Err(refused) = engine.send_tx_burst(pending) {
        pending = refused.burst;
        std::thread::yield_now();
    }
}

#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
mod raw {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::{Arc, OnceLock};
    use std::time::{Duration, Instant};

    use daqiri::Engine;
    use daqiri_config::testing::{TestConfig, tx};

    use super::{Bed, RAW_HEADERS, Reader, Sender, TX_PORT};
    use crate::common::veth::{RawSocket, Veth, udp_frame_to};

    /// A wire a raw backend drives one end of; senders and the TX reader
    /// are raw AF_PACKET sockets at the other end.
    pub struct RawBed {
        wire: Wire,
        kind: RawKind,
        /// Frames its senders sent (paced on an emulated wire).
        sent: Arc<AtomicU64>,
    }

    /// Where the far end of a bed's wire is.
    enum Wire {
        /// A veth pair; the sending end in a namespace of its own.
        Veth(Veth),
        /// A NIC of the VM test bed (`receive`: its netdev or PCI address)
        /// and the guest kernel's own NIC on the same bridge (`send`).
        VmNic { receive: String, mac: [u8; 6], send: String },
        /// DPDK's `net_tap`: the tap netdev it creates, named `iface`, is
        /// the far end; it exists once the engine runs.
        Tap { iface: String },
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
        /// The VM's virtio-net-pci NIC under vfio-pci.
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        DpdkVirtioPci,
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        DpdkTap,
    }

    /// The value of a variable tests/vm/guest.sh exports in the VM test bed.
    fn vm_bed(variable: &str) -> String {
        std::env::var(variable)
            .unwrap_or_else(|_| panic!("{variable} is unset: this bed runs inside the VM test bed (tests/vm/run.sh)"))
    }

    /// The guest NICs' MACs, fixed by tests/vm/run.sh.
    const VM_VIRTIO_MAC: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 1];
    const VM_XDP_MAC: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 2];

    impl RawBed {
        /// Our AF_XDP backend on a veth of `queues` queues.
        #[cfg_attr(not(feature = "af_xdp"), allow(dead_code))]
        pub fn af_xdp(tag: &str, queues: u32) -> Self {
            Self::on(Wire::Veth(Veth::quiet(tag, queues)), RawKind::AfXdp)
        }

        /// DPDK's `net_af_packet` on a veth of `queues` queues.
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        pub fn dpdk_af_packet(tag: &str, queues: u32) -> Self {
            Self::on(Wire::Veth(Veth::quiet(tag, queues)), RawKind::DpdkAfPacket)
        }

        /// DPDK's `net_af_xdp` on a veth of `queues` queues.
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        pub fn dpdk_af_xdp(tag: &str, queues: u32) -> Self {
            Self::on(Wire::Veth(Veth::quiet(tag, queues)), RawKind::DpdkAfXdp)
        }

        /// The VM's second virtio NIC, under `virtio_net` with native XDP.
        #[cfg_attr(not(feature = "af_xdp"), allow(dead_code))]
        pub fn vm_af_xdp() -> Self {
            Self::vm_nic(vm_bed("DAQIRI_VM_XDP_NETDEV"), VM_XDP_MAC, RawKind::AfXdp)
        }

        /// The VM's virtio-net-pci NIC under vfio-pci, behind the IOMMU.
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        pub fn vm_dpdk_virtio() -> Self {
            Self::vm_nic(vm_bed("DAQIRI_VM_VIRTIO_PCI"), VM_VIRTIO_MAC, RawKind::DpdkVirtioPci)
        }

        /// DPDK's `net_tap`, whose rte_flow rules are TC filters (the VM's
        /// kernel has the TC modules; ours does not).
        #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
        pub fn vm_dpdk_tap() -> Self {
            vm_bed("DAQIRI_VM_SEND_NETDEV"); // inside the VM, or say so
            Self::on(Wire::Tap { iface: "dqtap0".into() }, RawKind::DpdkTap)
        }

        fn vm_nic(receive: String, mac: [u8; 6], kind: RawKind) -> Self {
            Self::on(Wire::VmNic { receive, mac, send: vm_bed("DAQIRI_VM_SEND_NETDEV") }, kind)
        }

        fn on(wire: Wire, kind: RawKind) -> Self {
            Self { wire, kind, sent: Arc::default() }
        }

        /// The netdev (or PCI address) the backend drives.
        fn receive(&self) -> &str {
            match &self.wire {
                Wire::Veth(veth) => &veth.receive,
                Wire::VmNic { receive, .. } => receive,
                Wire::Tap { iface } => iface,
            }
        }

        /// The MAC frames to the backend carry.
        fn receive_mac(&self) -> [u8; 6] {
            match &self.wire {
                Wire::Veth(veth) => veth.receive_mac(),
                Wire::VmNic { mac, .. } => *mac,
                Wire::Tap { .. } => [0xff; 6],
            }
        }

        /// A raw socket at the far end: opened now, or, on a tap that the
        /// engine has yet to create, at its first use.
        fn far_end(&self) -> FarEnd {
            let socket = OnceLock::new();
            match &self.wire {
                Wire::Veth(veth) => drop(socket.set(veth.sender())),
                Wire::VmNic { send, .. } => drop(socket.set(RawSocket::on(send))),
                Wire::Tap { .. } => {}
            }
            FarEnd { socket, iface: self.receive().to_owned() }
        }
    }

    impl Wire {
        /// Carries frames on its first `queues` queues only.
        fn use_queues(&self, queues: u32) {
            match self {
                Wire::Veth(veth) => veth.use_queues(queues),
                Wire::VmNic { receive, .. } => {
                    let n = queues.to_string();
                    let status = std::process::Command::new("ethtool")
                        .args(["-L", receive, "combined", &n])
                        .status()
                        .expect("run ethtool");
                    assert!(status.success(), "ethtool -L {receive} combined {n}");
                }
                Wire::Tap { .. } => {}
            }
        }
    }

    /// A raw socket at a wire's far end.
    struct FarEnd {
        socket: OnceLock<RawSocket>,
        /// The tap to open it on when it was not opened at once.
        iface: String,
    }

    impl FarEnd {
        fn get(&self) -> &RawSocket {
            self.socket.get_or_init(|| RawSocket::on(&self.iface))
        }
    }

    impl Bed for RawBed {
        fn name(&self) -> &'static str {
            match (self.kind, &self.wire) {
                (RawKind::AfXdp, Wire::Veth(_)) => "af_xdp (veth)",
                (RawKind::AfXdp, _) => "af_xdp virtio_net (vm)",
                (RawKind::DpdkAfPacket, _) => "dpdk net_af_packet (veth)",
                (RawKind::DpdkAfXdp, _) => "dpdk net_af_xdp (veth)",
                (RawKind::DpdkVirtioPci, _) => "dpdk virtio-net-pci vfio (vm)",
                (RawKind::DpdkTap, _) => "dpdk net_tap (vm)",
            }
        }
        fn config(&self) -> TestConfig {
            match self.kind {
                RawKind::AfXdp => TestConfig::af_xdp(self.receive()),
                RawKind::DpdkAfPacket => TestConfig::dpdk_af_packet(self.receive()).master_core(0),
                // DPDK's net_af_xdp (22.11, 25.11) counts a netdev's combined channels,
                // which a veth has none of: one queue it is.
                RawKind::DpdkAfXdp => TestConfig::dpdk(&format!("net_af_xdp0,iface={}", self.receive())).master_core(0),
                RawKind::DpdkVirtioPci => TestConfig::dpdk(self.receive()).master_core(0),
                RawKind::DpdkTap => TestConfig::dpdk(&format!("net_tap0,iface={}", self.receive())).master_core(0),
            }
        }
        fn start(&self, config: &TestConfig) -> daqiri::Result<Engine> {
            if matches!(self.kind, RawKind::AfXdp) {
                self.wire.use_queues(config.rx_queue_count().max(1) as u32);
            }
            Engine::from_yaml(&config.yaml())
        }
        fn headers(&self) -> usize {
            RAW_HEADERS
        }
        fn buf_size(&self) -> u64 {
            match self.kind {
                // net_af_packet wants a whole frame slot after DPDK's headroom.
                RawKind::DpdkAfPacket => 4096,
                _ => 2048,
            }
        }
        fn sender(&self, index: u16) -> Box<dyn Sender> {
            Box::new(RawSender {
                socket: self.far_end(),
                port: 40_000 + index,
                mac: self.receive_mac(),
                paced: (!matches!(self.wire, Wire::Veth(_))).then(|| Arc::clone(&self.sent)),
            })
        }
        fn tx_config(&self) -> TestConfig {
            match self.kind {
                // The kernel takes one UMEM per NIC queue: TX sends from RX's region.
                RawKind::AfXdp => self.config().tx_queue(tx(0, "mem").batch(16)),
                _ => self.config().region("tx_mem", 1024, 2048).tx_queue(tx(0, "tx_mem").batch(16)),
            }
        }
        fn tx_region(&self) -> &'static str {
            match self.kind {
                RawKind::AfXdp => "mem",
                _ => "tx_mem",
            }
        }
        fn tx_bytes(&self, payload: &[u8]) -> Vec<u8> {
            super::tx_frame_bytes([0xff; 6], payload)
        }
        fn tx_reader(&self) -> Box<dyn Reader> {
            Box::new(RawReader(self.far_end()))
        }
        fn burst_timeout_us(&self, us: u64) -> u64 {
            // An emulated wire brings a few thousand frames a second, and
            // its senders wait for the engine now and then (`keep_pace`).
            if matches!(self.wire, Wire::Veth(_)) { us } else { us.max(200_000) }
        }
        fn keeps_sent_tx_buffers(&self) -> Option<&'static str> {
            matches!(self.kind, RawKind::DpdkVirtioPci).then_some(
                "DPDK's PMD frees sent mbufs when its TX ring needs the room and not on request \
                 (rte_eth_tx_done_cleanup): up to a ring's worth of sent buffers stays out of the pool \
                 until more is sent or the engine stops",
            )
        }
    }

    /// A raw socket at the far end of the wire: it keeps the frames sent
    /// to [`TX_PORT`].
    struct RawReader(FarEnd);

    impl Reader for RawReader {
        fn attach(&mut self, _engine: &Engine) {
            self.0.get(); // a tap's socket opens once the engine made the tap
        }
        fn next(&mut self, _engine: &Engine, within: Duration) -> Option<Vec<u8>> {
            let deadline = Instant::now() + within;
            loop {
                let frame = self.0.get().receive(deadline.checked_duration_since(Instant::now())?)?;
                let to_tx_port =
                    frame.len() >= RAW_HEADERS && frame[12..14] == [8, 0] && frame[36..38] == TX_PORT.to_be_bytes();
                if to_tx_port {
                    return Some(frame);
                }
            }
        }
    }

    struct RawSender {
        socket: FarEnd,
        port: u16,
        mac: [u8; 6],
        /// On an emulated wire, the frames all senders of the bed sent: see
        /// [`RawSender::keep_pace`].
        paced: Option<Arc<AtomicU64>>,
    }

    impl RawSender {
        /// Frames a sender may be ahead of what the engine has seen.
        const AHEAD: u64 = 48;
        /// The IPv4 destination of every sender's frames.
        const DST_IP: [u8; 4] = [10, 203, 0, 2];

        /// An emulated wire (QEMU's taps, and NIC emulation on an emulated
        /// CPU) drops what it has no room for at a few thousand frames a
        /// second, long before the engine would: the sender waits until the
        /// engine has seen (delivered or counted as a drop) all but a few of
        /// the frames sent, for a while at most, so a frame the engine loses
        /// still shows.
        fn keep_pace(&self, engine: &Engine) {
            let Some(sent) = &self.paced else { return };
            let sent = sent.fetch_add(1, Relaxed) + 1;
            if sent % 8 != 0 {
                return;
            }
            let deadline = Instant::now() + Duration::from_millis(250);
            while Instant::now() < deadline {
                let seen = engine.stats().ports[0].rx_total();
                if seen.packets + seen.drops.iter().sum::<u64>() + Self::AHEAD >= sent {
                    return;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    impl Sender for RawSender {
        fn port(&self) -> u16 {
            self.port
        }
        fn macs(&self) -> Option<([u8; 6], [u8; 6])> {
            Some((super::sender_mac(self.port), self.mac))
        }
        fn ipv4(&self) -> Option<([u8; 4], [u8; 4])> {
            Some((super::sender_ipv4(self.port), Self::DST_IP))
        }
        fn send(&self, engine: &Engine, payload: &[u8]) {
            let mut frame = udp_frame_to(self.mac, super::sender_ipv4(self.port), Self::DST_IP, self.port, 5000, 0);
            frame[6..12].copy_from_slice(&super::sender_mac(self.port));
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
            self.socket.get().send(&frame);
            self.keep_pace(engine);
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

#[cfg(feature = "rdma")]
mod roce {
    use std::io::{Read, Write};
    use std::net::SocketAddr;
    use std::process::{Child, ChildStdin, Command, Stdio};
    use std::sync::Mutex;
    use std::sync::mpsc::{Receiver, channel};
    use std::time::{Duration, Instant};

    use daqiri::Engine;
    use daqiri_config::testing::TestConfig;

    use super::{Bed, Reader, Sender};

    /// The VM's soft-RoCE device (tests/vm/soft_roce.sh leaves `rxe0` on it).
    const RXE_ADDR: [u8; 4] = [10, 77, 0, 1];

    /// Our engine an RC server on the VM's soft-RoCE device; its senders and
    /// its TX reader are pyverbs clients (tests/vm/rdma_pipe.py), a process
    /// each, connected at first use (the server listens once the engine runs).
    pub struct RoceBed {
        server: SocketAddr,
    }

    impl RoceBed {
        pub fn vm_soft_roce() -> Self {
            assert_eq!(
                std::env::var("DAQIRI_VM").as_deref(),
                Ok("1"),
                "this bed runs inside the VM test bed (tests/vm/run.sh)"
            );
            Self { server: SocketAddr::from((RXE_ADDR, crate::common::free_tcp_port())) }
        }
    }

    impl Bed for RoceBed {
        fn name(&self) -> &'static str {
            "roce rc soft-RoCE (vm)"
        }
        fn config(&self) -> TestConfig {
            TestConfig::roce_server(self.server).master_core(0)
        }
        fn headers(&self) -> usize {
            0
        }
        fn matches_flows(&self) -> bool {
            false
        }
        fn flow_controlled(&self) -> Option<&'static str> {
            Some("an RDMA sender waits (RNR) while its receiver has no receive posted: nothing is dropped")
        }
        fn sender(&self, _index: u16) -> Box<dyn Sender> {
            Box::new(PipeSender { server: self.server, peer: Mutex::new(None) })
        }
        fn tx_reader(&self) -> Box<dyn Reader> {
            Box::new(PipeReader { server: self.server, peer: None, messages: None })
        }
        fn burst_timeout_us(&self, us: u64) -> u64 {
            // A few thousand messages a second under emulation.
            us.max(200_000)
        }
    }

    /// tests/vm/rdma_pipe.py in `role`, a client of `server`.
    fn pipe(role: &str, server: SocketAddr) -> Command {
        let mut command = Command::new("/usr/bin/python3");
        command
            .args(["tests/vm/rdma_pipe.py", role, &server.ip().to_string(), &server.port().to_string()])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        command
    }

    /// Waits for the pyverbs peer just started to connect to port 0.
    fn await_connection(engine: &Engine) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while engine.stats().ports[0].link.connected != Some(true) {
            assert!(Instant::now() < deadline, "the pyverbs peer connects: {:?}", engine.stats().ports[0].link);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ends a peer: it has until `within` to finish on its own.
    fn reap(mut child: Child, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if child.try_wait().is_ok_and(|status| status.is_some()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Each payload one SEND, through a pyverbs client fed on its stdin.
    struct PipeSender {
        server: SocketAddr,
        peer: Mutex<Option<(Child, ChildStdin)>>,
    }

    impl Sender for PipeSender {
        fn port(&self) -> u16 {
            0 // no flow matches an RDMA message
        }
        fn send(&self, engine: &Engine, payload: &[u8]) {
            let mut peer = self.peer.lock().unwrap();
            let (_, stdin) = peer.get_or_insert_with(|| {
                let mut child = pipe("send", self.server).stdin(Stdio::piped()).spawn().expect("a pyverbs sender");
                let stdin = child.stdin.take().unwrap();
                // Python and pyverbs start slowly under emulation: the
                // scenario's clock starts once the peer is connected.
                await_connection(engine);
                (child, stdin)
            });
            let length = u32::try_from(payload.len()).unwrap().to_be_bytes();
            stdin
                .write_all(&length)
                .and_then(|()| stdin.write_all(payload))
                .expect("the pyverbs sender takes a message");
        }
    }

    impl Drop for PipeSender {
        fn drop(&mut self) {
            if let Some((child, stdin)) = self.peer.get_mut().unwrap().take() {
                drop(stdin); // the end of its input: it sends what it has and disconnects
                reap(child, Duration::from_secs(20));
            }
        }
    }

    /// A pyverbs client of the engine's server, writing out each message
    /// the engine's TX queue 0 sends it.
    struct PipeReader {
        server: SocketAddr,
        peer: Option<Child>,
        messages: Option<Receiver<Vec<u8>>>,
    }

    impl Reader for PipeReader {
        fn attach(&mut self, engine: &Engine) {
            let mut child = pipe("recv", self.server).stdout(Stdio::piped()).spawn().expect("a pyverbs reader");
            let mut stdout = child.stdout.take().unwrap();
            let (tx, rx) = channel();
            std::thread::spawn(move || {
                let mut length = [0u8; 4];
                while stdout.read_exact(&mut length).is_ok() {
                    let mut message = vec![0u8; u32::from_be_bytes(length) as usize];
                    if stdout.read_exact(&mut message).is_err() || tx.send(message).is_err() {
                        return;
                    }
                }
            });
            (self.peer, self.messages) = (Some(child), Some(rx));
            await_connection(engine);
        }
        fn next(&mut self, _engine: &Engine, within: Duration) -> Option<Vec<u8>> {
            self.messages.as_ref()?.recv_timeout(within).ok()
        }
    }

    impl Drop for PipeReader {
        fn drop(&mut self) {
            if let Some(child) = self.peer.take() {
                reap(child, Duration::ZERO);
            }
        }
    }
}
