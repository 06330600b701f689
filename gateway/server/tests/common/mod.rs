//! Helpers the gateway's system tests share: scratch directories, free ports, waiting for the
//! admin API, and a minimal HTTP/1.0 client (enough for a local admin API,
//! and it keeps an HTTP client crate out of the test build).
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The gateway binary under test.
pub const GATEWAY: &str = env!("CARGO_BIN_EXE_daqiri-gateway");

/// An empty directory for one test's files, unique to this test process.
pub fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("daqiri-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
