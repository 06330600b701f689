//! What the end-to-end suite does to the test nodes' cluster: kubectl and
//! helm against its admin kubeconfig, waiting, and plain HTTP to pods and
//! Services (the pod network is routed on this host).

use std::io::{Read, Write};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::tools::tool;

pub fn kubeconfig() -> String {
    std::env::var("DAQIRI_TEST_NODES_KUBECONFIG")
        .expect("DAQIRI_TEST_NODES_KUBECONFIG names the nodes' admin kubeconfig (tests/run.sh sets it)")
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// Runs kubectl or helm against the nodes, `input` on its stdin; the output.
pub fn try_cli(program: &str, args: &[&str], input: &str) -> Output {
    let mut child = tool(program)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// As [`try_cli`]; panics with its output on failure, else its stdout.
pub fn cli(program: &str, args: &[&str]) -> String {
    cli_with_input(program, args, "")
}

pub fn cli_with_input(program: &str, args: &[&str], input: &str) -> String {
    let output = try_cli(program, args, input);
    assert!(output.status.success(), "{program} {}:\n{}", args.join(" "), text(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&cli("kubectl", &all)).unwrap()
}

/// Waits up to `limit` for `check` to give a value, saying what it waited for.
pub fn wait_for<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let mut value = None;
    assert!(
        poll_until(limit, || {
            value = check();
            value.is_some()
        }),
        "{what}: not within {limit:?}"
    );
    value.expect("poll_until saw it")
}

/// Polls `check` for up to `limit`; whether it held.
pub fn poll_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !check() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    true
}

/// One HTTP/1.0 request to `address` (ip:port): the status and the body.
pub fn http(address: &str, method: &str, path: &str, body: &str) -> Option<(u16, Vec<u8>)> {
    let mut stream = std::net::TcpStream::connect_timeout(&address.parse().ok()?, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&answer[..end]);
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, answer[end + 4..].to_vec()))
}

/// A GET's body when it answers 200.
pub fn http_get(address: &str, path: &str) -> Option<String> {
    let (status, body) = http(address, "GET", path, "")?;
    (status == 200).then(|| String::from_utf8_lossy(&body).into_owned())
}

pub fn http_json(address: &str, method: &str, path: &str, body: &str) -> Option<(u16, Value)> {
    let (status, body) = http(address, method, path, body)?;
    Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// A condition of a resource's status, when it has it.
pub fn condition(resource: &Value, kind: &str) -> Option<Value> {
    resource["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind).cloned()
}

/// The host process of a pod's container: the one whose cgroup is named
/// after the container's id (the kubelets' cgroupfs driver names it so).
pub fn container_process(pod: &Value, container: &str, command: &str) -> Option<u32> {
    let status = pod["status"]["containerStatuses"].as_array()?.iter().find(|c| c["name"] == container)?;
    let id = status["containerID"].as_str()?.rsplit('/').next()?.to_owned();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).ok()?;
        let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
        (cgroup.contains(&id) && comm.trim() == command).then_some(pid)
    })
}
