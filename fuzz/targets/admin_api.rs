//! The admin API, request by request: each input is an HTTP request (method,
//! path, headers, body) sent through the gateway's real router, with both
//! tokens set, over a software-loopback engine. Whatever arrives:
//! - the gateway answers, never with a 5xx (its engine is always there);
//! - an error is the API's JSON body, with a message;
//! - a refused or read-only request leaves the running config untouched.
//!
//! A request that changed something is followed by a fresh gateway, so each
//! input meets the same state.

use daqiri_config::Document;
use daqiri_gateway::fuzzing::AdminHarness;

/// Configs beyond this are not sent: a host region is populated when the
/// engine maps it, and the memory preflight's own tests cover big pools.
const MAX_CONFIG_MEMORY: u64 = 256 << 20;

/// Whether a `PUT /api/v1/config` body would allocate more than the fuzzer
/// should (what the engine takes, as the preflight counts it).
fn config_too_big(body: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(body) else { return false };
    let Ok(valid) = Document::parse(text).and_then(|doc| doc.validate()) else { return false };
    let needs = daqiri::preflight::MemoryNeeds::of(&valid);
    needs.host.saturating_add(needs.huge) > MAX_CONFIG_MEMORY
}

fn main() {
    let dir = std::env::temp_dir().join(format!("daqiri-fuzz-admin-{}", std::process::id()));
    // A mutex only because afl's closure must be unwind-safe; a panic aborts.
    let harness = std::sync::Mutex::new(Some(AdminHarness::new(dir).expect("the harness starts")));
    daqiri_gateway::fuzzing::log_panics();
    afl::fuzz!(|data: &[u8]| {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut request = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(body_at)) = request.parse(data) else { return };
        let (Some(method), Some(path)) = (request.method, request.path) else { return };
        let body = &data[body_at..];
        if method == "PUT" && config_too_big(body) {
            return;
        }
        let headers: Vec<(&str, &[u8])> = request.headers.iter().map(|h| (h.name, h.value)).collect();
        let mut harness = harness.lock().expect("one thread");
        let gateway = harness.as_ref().expect("a gateway is running");
        let before = gateway.active();
        let Some(answer) = gateway.send(method, path, &headers, body.to_vec()) else { return };
        let text = String::from_utf8_lossy(&answer.body);
        assert!(answer.status < 500, "{method} {path} answered {}: {text}", answer.status);
        if answer.status >= 400 {
            assert!(answer.content_type.starts_with("application/json"), "{method} {path}: error not JSON: {text}");
            let body: serde_json::Value = serde_json::from_slice(&answer.body).expect("an error body is JSON");
            assert!(body["message"].is_string(), "{method} {path}: error without a message: {text}");
        }
        let changed = (200..300).contains(&answer.status) && !matches!(method, "GET" | "HEAD" | "OPTIONS");
        if !changed {
            assert_eq!(gateway.active(), before, "{method} {path} ({}) changed the config", answer.status);
        }
        assert!(gateway.engine_running(), "{method} {path} ({}) left no engine running", answer.status);
        if changed {
            *harness = Some(harness.take().expect("a gateway is running").restart().expect("the gateway restarts"));
        }
    });
}
