//! The admin server against careless and hostile clients, over real TCP:
//! idle connections cannot exhaust the gateway's descriptors, slow headers
//! and bodies time out, and a listener beyond loopback without tokens warns.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daqiri_config::testing::{TestConfig, rx};

use common::{GATEWAY, free_tcp_port, free_udp_port, http, scratch_dir, wait_for_port};

/// The server's limits (`admin::listener`), as this test expects them.
const MAX_CONNECTIONS: usize = 128;
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

fn config(udp: u16) -> String {
    TestConfig::udp_server(udp).interface_named("udp_rx").region("m", 1024, 2048).rx_queue(rx(0, "m").batch(32)).yaml()
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Reads until the server closes the connection or `within` passes; whether it closed.
fn closed_by_server(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut sink = Vec::new();
    stream.read_to_end(&mut sink).is_ok()
}

#[test]
fn idle_connections_are_capped_and_timed_out_and_the_api_keeps_answering() {
    let dir = scratch_dir("admin-limits");
    let gateway = common::Gateway::run(GATEWAY, dir, &config(free_udp_port()));
    let pid = gateway.child.id();
    let before = open_descriptors(pid);
    // Twice the cap, none sending a byte (what ran the gateway out of descriptors).
    let mut idle: Vec<TcpStream> =
        (0..2 * MAX_CONNECTIONS).map(|_| TcpStream::connect(("127.0.0.1", gateway.admin)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let held = open_descriptors(pid) - before;
    // Two per admitted connection: its socket and the duplicate admission peeks through.
    assert!(held <= 2 * MAX_CONNECTIONS + 4, "the gateway holds {held} descriptors for {} idle clients", idle.len());
    // A client that speaks gets a place an idle one held (at worst, one behind the header timeout).
    let started = Instant::now();
    let (status, _) = http(gateway.admin, "GET", "/healthz", &[], "");
    assert_eq!(status, 200);
    assert!(started.elapsed() < 2 * HEADER_TIMEOUT + Duration::from_secs(2), "answered after {:?}", started.elapsed());
    assert!(closed_by_server(&mut idle[0], HEADER_TIMEOUT), "an idle connection is closed after the header timeout");
    drop(idle);
    // A header sent byte by byte, never finished, is cut off too.
    let mut slow = TcpStream::connect(("127.0.0.1", gateway.admin)).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = Instant::now();
    assert!(closed_by_server(&mut slow, HEADER_TIMEOUT + Duration::from_secs(3)), "a slow header is cut off");
    assert!(started.elapsed() >= HEADER_TIMEOUT - Duration::from_secs(1), "cut off after {:?}", started.elapsed());
}

#[test]
fn a_body_that_stops_arriving_is_answered_408_in_json() {
    let dir = scratch_dir("admin-body");
    let gateway = common::Gateway::run(GATEWAY, dir, &config(free_udp_port()));
    let mut stream = TcpStream::connect(("127.0.0.1", gateway.admin)).unwrap();
    stream
        .write_all(b"PUT /api/v1/config HTTP/1.1\r\nHost: x\r\nContent-Type: application/yaml\r\nContent-Length: 1000\r\n\r\ndaqiri:\n")
        .unwrap();
    let started = Instant::now();
    stream.set_read_timeout(Some(BODY_TIMEOUT + Duration::from_secs(5))).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 408"), "{status}");
    assert!(started.elapsed() >= BODY_TIMEOUT - Duration::from_secs(1), "answered after {:?}", started.elapsed());
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
    assert!(rest.contains("\"message\":\"the request body did not arrive within 10s\""), "{rest}");
    let status = gateway.json("GET", "/api/v1/status", "").1;
    assert_eq!(status["config"]["generation"], 1, "nothing was applied: {status}");
}

#[test]
fn listening_beyond_loopback_without_tokens_warns() {
    let admin = free_tcp_port();
    let dir = scratch_dir("admin-exposed");
    let file = dir.join("gateway.yaml");
    std::fs::write(&file, config(free_udp_port())).unwrap();
    let mut child = Command::new(GATEWAY)
        .args(["run", "--admin-addr", &format!("0.0.0.0:{admin}"), "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_port(admin);
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("beyond loopback, without --admin-token-file"), "{log}");
    assert!(log.contains("beyond loopback, without --admin-read-token-file"), "{log}");
}

/// A body dripped a byte at a time is cut off at the whole-body deadline,
/// not kept alive by every byte.
#[test]
fn a_body_dripped_a_byte_at_a_time_is_cut_off_at_the_deadline() {
    let dir = scratch_dir("admin-drip");
    let gateway = common::Gateway::run(GATEWAY, dir, &config(free_udp_port()));
    let mut stream = TcpStream::connect(("127.0.0.1", gateway.admin)).unwrap();
    stream
        .write_all(b"PUT /api/v1/config HTTP/1.1\r\nHost: x\r\nContent-Type: application/yaml\r\nContent-Length: 100000\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let dripper = std::thread::spawn(move || {
        // A byte every 500 ms until the server gives up on the body.
        while stream.write_all(b"#").is_ok() && started.elapsed() < BODY_TIMEOUT * 3 {
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    reader.get_ref().set_read_timeout(Some(BODY_TIMEOUT * 3)).unwrap();
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 408"), "{status}");
    let took = started.elapsed();
    assert!(
        took >= BODY_TIMEOUT - Duration::from_secs(1) && took < BODY_TIMEOUT + Duration::from_secs(3),
        "cut off after {took:?}"
    );
    drop(reader);
    let _ = dripper.join();
}

#[test]
#[ignore = "needs root for a pids cgroup; tests/run.sh runs it"]
fn with_no_thread_left_to_start_a_config_put_is_answered_and_the_gateway_lives() {
    let udp = free_udp_port();
    let gateway = common::Gateway::run(GATEWAY, scratch_dir("admin-pids"), &config(udp));
    let pid = gateway.child.id();
    // A pids cgroup (v1) that holds the gateway's threads now and no more.
    let group = std::path::PathBuf::from(format!("/sys/fs/cgroup/pids/daqiri-admin-{pid}"));
    std::fs::create_dir(&group).expect("a pids cgroup (as root, with the pids controller)");
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
    std::fs::write(group.join("pids.max"), threads.to_string()).unwrap();
    std::fs::write(group.join("cgroup.procs"), pid.to_string()).unwrap();
    let put = |body: &str| http(gateway.admin, "PUT", "/api/v1/config", &[("Content-Type", "application/yaml")], body);
    let (invalid, _) = put("daqiri: { cfg: { version: 1, interfaces: [] } }");
    let mut flows =
        TestConfig::udp_server(udp).interface_named("udp_rx").region("m", 1024, 2048).rx_queue(rx(0, "m").batch(32));
    flows = flows.udp_src_flow(7, 0, 40_000);
    let (flow_change, body) = put(&flows.yaml());
    // Out of the cgroup before anything is asserted, so it can be removed.
    std::fs::write("/sys/fs/cgroup/pids/cgroup.procs", pid.to_string()).unwrap();
    let _ = std::fs::remove_dir(&group);
    assert_eq!(invalid, 422, "an invalid config is answered");
    assert_eq!(flow_change, 200, "a flow change is answered and applied: {}", String::from_utf8_lossy(&body));
    assert_eq!(http(gateway.admin, "GET", "/readyz", &[], "").0, 200, "the gateway lives");
}
