//! The health endpoints under the attacks of issue 29, against the real
//! binary over real TCP: while each attack runs, a prober asks `/healthz`,
//! `/readyz` and `/metrics` on fresh connections every 50 ms, and every
//! answer must come within a second. Each test prints the slowest probe it
//! saw (`--no-capture` shows them).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use daqiri_config::testing::{TestConfig, rx};

use common::{GATEWAY, Gateway, free_udp_port, http, scratch_dir};

/// The most a probe may take under attack.
const PROBE_LIMIT: Duration = Duration::from_secs(1);
/// The longest an attack may take to do its work on a loaded machine.
const ATTACK_TAKES_HOLD_WITHIN: Duration = Duration::from_secs(60);

fn config(udp: u16, num_bufs: u32) -> String {
    TestConfig::udp_server(udp)
        .interface_named("udp_rx")
        .region("m", num_bufs, 2048)
        .rx_queue(rx(0, "m").batch(32).timeout_us(1000))
        .yaml()
}

/// One probe on a fresh connection: how long the whole answer took. Health
/// and metrics answer 200; readiness may say 503 while an engine restarts.
fn probe(admin: u16, path: &str) -> Duration {
    let started = Instant::now();
    let answered = (|| -> std::io::Result<Vec<u8>> {
        let mut stream = TcpStream::connect(("127.0.0.1", admin))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer)?;
        Ok(answer)
    })();
    let ok = answered
        .as_ref()
        .is_ok_and(|a| a.starts_with(b"HTTP/1.1 200") || (path == "/readyz" && a.starts_with(b"HTTP/1.1 503")));
    assert!(ok, "{path}: {:?}", answered.map(|a| String::from_utf8_lossy(&a[..a.len().min(200)]).into_owned()));
    started.elapsed()
}

/// Tells the attack to stop when dropped, a failed probe included.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// Runs `attack` (given a flag that says when to stop) for `seconds` while
/// probing; returns the slowest probe, and fails if one passed the limit.
fn probes_during(name: &str, admin: u16, seconds: f64, attack: impl FnOnce(&AtomicBool) + Send) -> Duration {
    probes_until(name, admin, seconds, || true, attack)
}

/// As [`probes_during`], probing on past `seconds` until `enough` says the
/// attack did what it is there to do (a loaded machine slows an attack
/// down; a test that stopped probing before it took hold proves nothing).
fn probes_until(
    name: &str,
    admin: u16,
    seconds: f64,
    enough: impl Fn() -> bool,
    attack: impl FnOnce(&AtomicBool) + Send,
) -> Duration {
    let stop = AtomicBool::new(false);
    let worst = std::thread::scope(|scope| {
        scope.spawn(|| attack(&stop));
        let _stop = StopOnDrop(&stop);
        // Let the attack take hold first.
        std::thread::sleep(Duration::from_millis(300));
        let mut worst = Duration::ZERO;
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        while Instant::now() < until || (!enough() && started.elapsed() < ATTACK_TAKES_HOLD_WITHIN) {
            for path in ["/healthz", "/readyz", "/metrics"] {
                worst = worst.max(probe(admin, path));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        worst
    });
    eprintln!("{name}: slowest probe {:.1} ms", worst.as_secs_f64() * 1e3);
    assert!(worst < PROBE_LIMIT, "{name}: a probe took {worst:?}");
    worst
}

#[test]
fn probes_answer_within_a_second_while_idle_connections_are_held_and_reopened() {
    let gw = Gateway::run(GATEWAY, scratch_dir("attack-idle"), &config(free_udp_port(), 1024));
    let admin = gw.admin;
    probes_during("1000 idle connections", admin, 3.0, |stop| {
        let mut held: Vec<TcpStream> = Vec::new();
        while !stop.load(Relaxed) {
            held.retain(|s| {
                s.set_nonblocking(true).unwrap();
                matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            });
            while held.len() < 1000 {
                let Ok(stream) = TcpStream::connect(("127.0.0.1", admin)) else { break };
                held.push(stream);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

#[test]
fn probes_answer_within_a_second_while_bodies_drip_a_byte_at_a_time() {
    let gw = Gateway::run(GATEWAY, scratch_dir("attack-drip"), &config(free_udp_port(), 1024));
    let admin = gw.admin;
    probes_during("200 dripped bodies", admin, 3.0, |stop| {
        let mut drips: Vec<TcpStream> = (0..200)
            .filter_map(|_| {
                let mut s = TcpStream::connect(("127.0.0.1", admin)).ok()?;
                s.write_all(b"PUT /api/v1/config HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n").ok()?;
                Some(s)
            })
            .collect();
        while !stop.load(Relaxed) {
            drips.retain_mut(|s| s.write_all(b"a").is_ok());
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}

#[test]
fn probes_answer_within_a_second_while_a_bracket_bomb_is_put() {
    let gw = Gateway::run(GATEWAY, scratch_dir("attack-nesting"), &config(free_udp_port(), 1024));
    let admin = gw.admin;
    // A quote inside a block scalar once hid the brackets from a pre-scan.
    let bomb = format!("note: |\n  \"\n{}\n", "[".repeat(150_000));
    probes_during("bracket bombs", admin, 3.0, |stop| {
        while !stop.load(Relaxed) {
            let (status, _) = http(admin, "PUT", "/api/v1/config", &[("Content-Type", "application/yaml")], &bomb);
            assert_eq!(status, 422);
        }
    });
}

#[test]
fn probes_answer_within_a_second_while_a_large_config_restarts_the_engine() {
    let udp = free_udp_port();
    let gw = Gateway::run(GATEWAY, scratch_dir("attack-restart"), &config(udp, 1024));
    let admin = gw.admin;
    // 1 GiB of buffers, allocated and touched at each start, and back: the
    // populating thread once kept the admin API's worker from the mmap lock
    // for most of a second.
    let (large, small) = (config(udp, 524_288), config(udp, 1024));
    let restarts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&restarts);
    let enough = || restarts.load(Relaxed) >= 2;
    probes_until("restarts of a 1 GiB config", admin, 4.0, enough, move |stop| {
        for text in [&large, &small].into_iter().cycle() {
            if stop.load(Relaxed) {
                break;
            }
            let (status, body) = http(admin, "PUT", "/api/v1/config", &[("Content-Type", "application/yaml")], text);
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            counted.fetch_add(1, Relaxed);
        }
    });
    assert!(restarts.load(Relaxed) >= 2, "the engine restarted while probed");
}

#[test]
fn probes_answer_within_a_second_while_downloads_nobody_reads_hold_connections() {
    let udp = free_udp_port();
    let gw = Gateway::run(GATEWAY, scratch_dir("attack-download"), &config(udp, 4096));
    let admin = gw.admin;
    // A capture of about 16 MB: far more than the sockets between us buffer.
    let (status, started) = gw.json(
        "POST",
        "/api/v1/captures",
        r#"{"format": "pcap", "interface": "udp_rx", "name": "big", "max_packets": 12000}"#,
    );
    assert_eq!(status, 201, "{started}");
    let sent = std::process::Command::new(GATEWAY)
        .args(["gen", "--dest", &format!("127.0.0.1:{udp}"), "--rate", "50000", "--count", "12000"])
        .args(["--payload-size", "1400"])
        .output()
        .unwrap();
    assert!(sent.status.success());
    let id = started["id"].as_u64().unwrap();
    common::wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{id}"), "").1);
    probes_during("150 downloads nobody reads", admin, 3.0, |stop| {
        let downloads: Vec<TcpStream> = (0..150)
            .filter_map(|_| {
                let mut s = TcpStream::connect(("127.0.0.1", admin)).ok()?;
                write!(s, "GET /api/v1/captures/{id}/download HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
                Some(s)
            })
            .collect();
        while !stop.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(downloads);
    });
}

#[test]
fn probes_answer_within_a_second_while_pipelined_metrics_nobody_reads_hold_connections() {
    let gw = Gateway::run(GATEWAY, scratch_dir("attack-pipelined"), &config(free_udp_port(), 1024));
    let admin = gw.admin;
    probes_during("140 connections pipelining /metrics unread", admin, 3.0, |stop| {
        // Each asks for /metrics hundreds of times and reads nothing: the
        // answers fill its socket, and its writes wait for ever.
        let request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(400);
        let mut held: Vec<TcpStream> = Vec::new();
        while !stop.load(Relaxed) {
            held.retain(|s| {
                s.set_nonblocking(true).unwrap();
                // Closed by the gateway: reopen it (the attacker persists).
                !matches!(s.peek(&mut [0u8; 1]), Ok(0))
            });
            while held.len() < 140 {
                let Ok(mut stream) = TcpStream::connect(("127.0.0.1", admin)) else { break };
                stream.set_nonblocking(true).unwrap();
                let _ = stream.write_all(request.as_bytes());
                held.push(stream);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}
