//! Helpers the gateway's system tests share: scratch directories, free ports, waiting for the
//! admin API, and a minimal HTTP/1.0 client (enough for a local admin API,
//! and it keeps an HTTP client crate out of the test build).
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The gateway binary under test.
pub const GATEWAY: &str = env!("CARGO_BIN_EXE_daqiri-gateway");

/// An empty directory for one test's files, removed with everything in it when dropped
/// (a Prometheus TSDB alone preallocates over 100 MB).
#[derive(Debug)]
pub struct ScratchDir(tempfile::TempDir);

impl std::ops::Deref for ScratchDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for ScratchDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}

/// The interface `udp_rx` on `udp`: two queues on core 0, and flow 5 from
/// source ports `sources` to `flow_queue`.
pub fn two_queues_one_flow(udp: u16, sources: (u16, u16), flow_queue: u16) -> daqiri_config::testing::TestConfig {
    use daqiri_config::model::{FlowMatch, PortMatch};
    use daqiri_config::testing::{TestConfig, rx};
    let (first, last) = sources;
    TestConfig::udp_server(udp)
        .interface_named("udp_rx")
        .region("m", 8192, 2048)
        .rx_queue(rx(0, "m").batch(32).timeout_us(500))
        .rx_queue(rx(1, "m").batch(32).timeout_us(500))
        .flow(5, &[flow_queue], FlowMatch { udp_src: Some(PortMatch { first, last }), ..FlowMatch::default() })
}

pub fn scratch_dir(tag: &str) -> ScratchDir {
    ScratchDir(tempfile::Builder::new().prefix(&format!("daqiri-{tag}-")).tempdir().unwrap())
}

/// A TCP port nobody listens on right now.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A UDP port nobody is bound to right now.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something accepts connections on `port`.
pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port} after 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One HTTP/1.0 request; returns the status code and the body.
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    write!(stream, "{request}\r\n{body}").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let status = String::from_utf8_lossy(&response[9..12]).parse().unwrap();
    (status, response[split + 4..].to_vec())
}

/// Polls a capture's record (`get` answers `GET /api/v1/captures/{id}`) until
/// it is no longer running, for at most 20 s; returns the last record.
pub fn wait_for_capture_end(get: impl Fn() -> serde_json::Value) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = get();
        if info["state"] != "running" {
            return info;
        }
        assert!(Instant::now() < deadline, "capture did not finish: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A gateway run on `<dir>/gateway.yaml` with captures under `<dir>/out`
/// and a free admin port; killed, and its directory removed, on drop.
pub struct Gateway {
    pub child: std::process::Child,
    pub admin: u16,
    pub dir: ScratchDir,
}

impl Gateway {
    /// Writes `config` into `dir` and starts `binary` on it; returns once the admin API answers.
    pub fn run(binary: &str, dir: ScratchDir, config: &str) -> Self {
        Self::run_with(binary, dir, config, &[])
    }

    /// [`run`](Self::run) with more arguments for `run`.
    pub fn run_with(binary: &str, dir: ScratchDir, config: &str, more: &[&std::ffi::OsStr]) -> Self {
        let admin = free_tcp_port();
        let path = dir.join("gateway.yaml");
        std::fs::write(&path, config).unwrap();
        let child = std::process::Command::new(binary)
            .args(["run", "--admin-addr", &format!("127.0.0.1:{admin}"), "--capture-free-space-floor-mb", "1"])
            .arg("--config")
            .arg(&path)
            .arg("--capture-dir")
            .arg(dir.join("out"))
            .args(more)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let gateway = Gateway { child, admin, dir };
        wait_for_port(admin);
        gateway
    }

    /// One admin API call with a JSON body; the answer's status and JSON (null if none).
    pub fn json(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        let (status, body) = http(self.admin, method, path, &[("Content-Type", "application/json")], body);
        (status, serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A UDP server interface `udp_rx` whose flow 1 (datagrams from `source`)
/// feeds the CPU reorder plan `by_batch`: batches of `slots` payloads of
/// `payload` bytes, each payload's first four bytes its sequence number.
/// An incomplete batch is emitted 250 ms after its first packet: long past
/// any pause a loaded machine puts between a sender's datagrams.
pub fn by_batch_reorder(udp: u16, source: u16, slots: usize, payload: usize) -> daqiri_config::testing::TestConfig {
    use daqiri_config::testing::{TestConfig, rx};
    let mut config = TestConfig::udp_server(udp)
        .interface_named("udp_rx")
        .region("m", 8192, 2048)
        .region("batches", 64, (slots * payload) as u64)
        .rx_queue(rx(0, "m").batch(64).timeout_us(250_000))
        .udp_src_flow(1, 0, source)
        .cpu_reorder("by_batch", &[1], "batches", 0, slots as u32);
    config.model_mut().interfaces[0].rx.as_mut().unwrap().reorder_configs[0].payload_byte_offset = 0;
    config
}
