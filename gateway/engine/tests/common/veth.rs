//! A veth pair for the kernel-bypass backends' tests, and an independent
//! raw-socket sender and receiver on it. Needs root.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?}");
}

/// A veth pair, removed on drop. The receiving end stays in this network
/// namespace; the sending end may live in a namespace of its own, so the
/// kernel routes between them as between two hosts.
pub struct Veth {
    pub send: String,
    pub receive: String,
    /// The sending end's namespace, if it has one.
    pub namespace: Option<String>,
}

impl Veth {
    /// A pair in this namespace with one queue each way and no addresses.
    pub fn new(tag: &str) -> Self {
        Self::with_queues(tag, 1, false)
    }

    /// A pair of `queues` queues each way; with `namespaced`, the sending end
    /// is moved to a namespace of its own and both ends get addresses
    /// ([`Veth::SEND_IP`], [`Veth::RECEIVE_IP`]).
    pub fn with_queues(tag: &str, queues: u32, namespaced: bool) -> Self {
        Self::build(tag, queues, namespaced, namespaced)
    }

    /// A pair of `queues` queues each way whose receiving kernel never
    /// answers: the sending end sits in a namespace of its own and neither
    /// end has an address, so a raw frame draws no ICMP or ARP back and the
    /// receiving end sees only what the test sent.
    pub fn quiet(tag: &str, queues: u32) -> Self {
        Self::build(tag, queues, true, false)
    }

    fn build(tag: &str, queues: u32, namespaced: bool, addressed: bool) -> Self {
        let id = std::process::id() % 10_000;
        let veth = Veth {
            send: format!("dq{tag}{id}s"),
            receive: format!("dq{tag}{id}r"),
            namespace: namespaced.then(|| format!("dq{tag}{id}")),
        };
        let _ = Command::new("ip").args(["link", "del", &veth.receive]).stderr(Stdio::null()).status();
        let n = queues.to_string();
        let q = ["numtxqueues", &n, "numrxqueues", &n];
        let mut add = vec!["link", "add", &veth.send];
        add.extend(q);
        add.extend(["type", "veth", "peer", "name", &veth.receive]);
        add.extend(q);
        ip(&add);
        // No IPv6 router solicitations: the only frames are the test's.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", veth.receive), "1");
        ip(&["link", "set", &veth.receive, "up"]);
        match &veth.namespace {
            None => {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", veth.send), "1");
                ip(&["link", "set", &veth.send, "up"]);
            }
            Some(ns) => {
                let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
                ip(&["netns", "add", ns]);
                ip(&["link", "set", &veth.send, "netns", ns]);
                let quiet = format!("net.ipv6.conf.{}.disable_ipv6=1", veth.send);
                let status = Command::new("ip").args(["netns", "exec", ns, "sysctl", "-q", "-w", &quiet]).status();
                assert!(status.is_ok_and(|s| s.success()), "disabling IPv6 on {} in {ns}", veth.send);
                ip(&["-n", ns, "link", "set", &veth.send, "up"]);
                if addressed {
                    ip(&["-n", ns, "addr", "add", &format!("{}/24", Self::SEND_IP), "dev", &veth.send]);
                    ip(&["addr", "add", &format!("{}/24", Self::RECEIVE_IP), "dev", &veth.receive]);
                } else {
                    // Forwarding off: a frame for no local address is dropped
                    // without an ICMP error (ip_error stays silent).
                    let _ = std::fs::write(format!("/proc/sys/net/ipv4/conf/{}/forwarding", veth.receive), "0");
                }
            }
        }
        veth
    }

    pub const SEND_IP: &str = "10.203.0.1";
    pub const RECEIVE_IP: &str = "10.203.0.2";

    /// The receiving end's MAC address.
    pub fn receive_mac(&self) -> [u8; 6] {
        mac_of(&self.receive)
    }

    /// `ip link show` of the receiving end.
    pub fn link_state(&self) -> String {
        let out = Command::new("ip").args(["link", "show", "dev", &self.receive]).output().expect("run ip");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Carries frames on the pair's first `queues` queues only (at most
    /// the pair was made with): the sending end's TX channels and the
    /// receiving end's RX channels, as `ethtool -L` sets a NIC's.
    pub fn use_queues(&self, queues: u32) {
        let n = queues.to_string();
        let set = |namespace: Option<&str>, netdev: &str, direction: &str| {
            let mut command = match namespace {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "ethtool"]);
                    c
                }
                None => Command::new("ethtool"),
            };
            let status = command.args(["-L", netdev, direction, &n]).status().expect("run ethtool");
            assert!(status.success(), "ethtool -L {netdev} {direction} {n}");
        };
        set(None, &self.receive, "rx");
        set(self.namespace.as_deref(), &self.send, "tx");
    }

    /// A raw sender on the sending end, in its namespace.
    pub fn sender(&self) -> RawSocket {
        in_namespace(self.namespace.as_deref(), || RawSocket::on(&self.send))
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.receive]).status();
        if let Some(ns) = &self.namespace {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// The MAC address of netdev `name` in this namespace.
pub fn mac_of(name: &str) -> [u8; 6] {
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).expect("netdev address");
    let bytes: Vec<u8> = text.trim().split(':').map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
    bytes.try_into().unwrap()
}

/// Runs `make` on a thread that entered network namespace `namespace`; a
/// socket made there keeps the namespace.
pub fn in_namespace<T: Send>(namespace: Option<&str>, make: impl FnOnce() -> T + Send) -> T {
    let Some(ns) = namespace else { return make() };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("namespace file");
                // SAFETY: setns on this thread only, with a namespace descriptor.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
                make()
            })
            .join()
            .expect("namespace thread")
    })
}

/// A raw AF_PACKET socket on one interface: whole frames out, and in. An
/// independent party, not the engine's own path.
pub struct RawSocket {
    fd: OwnedFd,
    address: libc::sockaddr_ll,
}

impl RawSocket {
    pub fn on(interface: &str) -> Self {
        let name = CString::new(interface).unwrap();
        // SAFETY: plain libc calls with valid arguments; the descriptor is owned at once.
        let (fd, index) = unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (libc::ETH_P_ALL as u16).to_be() as i32);
            assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
            (OwnedFd::from_raw_fd(fd), libc::if_nametoindex(name.as_ptr()))
        };
        assert!(index > 0, "no interface {interface}");
        // SAFETY: sockaddr_ll is plain data; zero is a valid start.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        address.sll_ifindex = index as i32;
        address.sll_halen = 6;
        // SAFETY: binding to a valid sockaddr_ll of the right length.
        let rc = unsafe {
            libc::bind(fd.as_raw_fd(), (&raw const address).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32)
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        RawSocket { fd, address }
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` and `address` are valid for the call.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&raw const self.address).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(sent, frame.len() as isize, "send: {}", std::io::Error::last_os_error());
    }

    /// The next frame that arrives within `timeout`, outgoing ones skipped.
    pub fn receive(&self, timeout: std::time::Duration) -> Option<Vec<u8>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut buffer = vec![0u8; 4096];
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let mut poll = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut poll, 1, left.as_millis().max(1) as i32) } <= 0 {
                return None;
            }
            // SAFETY: an address of the size given, and a buffer of its length.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: as above.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                    (&raw mut from).cast(),
                    &mut len,
                )
            };
            if n > 0 && from.sll_pkttype != libc::PACKET_OUTGOING {
                return Some(buffer[..n as usize].to_vec());
            }
        }
    }
}

/// An Ethernet/IPv4/UDP frame from `src_port` to `dst_port`, its 64-byte
/// payload starting with `seq`.
pub fn udp_frame(src_port: u16, dst_port: u16, seq: u32) -> Vec<u8> {
    udp_frame_to([2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], src_port, dst_port, seq)
}

/// As [`udp_frame`], to a given MAC and between given addresses.
pub fn udp_frame_to(mac: [u8; 6], src: [u8; 4], dst: [u8; 4], src_port: u16, dst_port: u16, seq: u32) -> Vec<u8> {
    let mut payload = vec![0xa5u8; 64];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    let builder =
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], mac).ipv4(src, dst, 64).udp(src_port, dst_port);
    let mut frame = Vec::with_capacity(builder.size(payload.len()));
    builder.write(&mut frame, &payload).unwrap();
    frame
}
