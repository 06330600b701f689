//! The admin API in-process, for the fuzz target `fuzz/targets/admin_api.rs`:
//! the real router (token checks, JSON errors, every handler) over a
//! software-loopback engine, without sockets. Not a stable interface.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::Request;
use tower::ServiceExt;

use crate::admin::{AdminState, Tokens};

/// The token that grants changes.
pub const WRITE_TOKEN: &str = "fuzz-write-token";
/// The token that grants reads only.
pub const READ_TOKEN: &str = "fuzz-read-token";

/// The config the harness's engine runs: one loopback interface with two
/// queues, a configured flow and room for runtime flows, so every route
/// has something to act on.
pub const CONFIG: &str = "\
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - { name: m, kind: host, num_bufs: 64, buf_size: 2048 }
    interfaces:
    - name: lo
      address: loopback
      rx:
        dynamic_flow_capacity: 4
        queues:
        - { name: q0, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }
        - { name: q1, id: 1, cpu_core: 0, batch_size: 8, memory_regions: [m] }
        flows:
        - { name: f, id: 1, action: { type: queue, id: 1 }, match: { udp_dst: 5000 } }
";

/// An answer: status, `content-type` and body.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status code.
    pub status: u16,
    /// The `content-type` header, empty when there is none.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

/// A gateway's admin API with both tokens set, served in-process.
#[derive(Debug)]
pub struct AdminHarness {
    runtime: tokio::runtime::Runtime,
    router: Router,
    state: Arc<AdminState>,
    capture_dir: PathBuf,
}

impl AdminHarness {
    /// Starts the engine on [`CONFIG`]; captures go under `capture_dir`,
    /// which [`Self::restart`] empties.
    pub fn new(capture_dir: PathBuf) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        std::fs::create_dir_all(&capture_dir).with_context(|| format!("cannot create {}", capture_dir.display()))?;
        let tokens = Tokens { write: Some(WRITE_TOKEN.to_owned()), read: Some(READ_TOKEN.to_owned()) };
        let (router, _, state) = crate::admin::in_process(CONFIG, capture_dir.clone(), 0, tokens)?;
        Ok(Self { runtime, router, state, capture_dir })
    }

    /// Sends one request through the router; `None` when `method`, `uri`
    /// or a header is not valid HTTP (a real client could not send it).
    pub fn send(&self, method: &str, uri: &str, headers: &[(&str, &[u8])], body: Vec<u8>) -> Option<Answer> {
        let mut request = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Body::from(body)).ok()?;
        self.runtime.block_on(async {
            let response = self.router.clone().oneshot(request).await.expect("the router is infallible");
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get(axum::http::header::CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            let body = to_bytes(response.into_body(), usize::MAX).await.map(|b| b.to_vec()).unwrap_or_default();
            Some(Answer { status, content_type, body })
        })
    }

    /// The generation and SHA-256 of the active config.
    pub fn active(&self) -> (u64, String) {
        let active = self.state.active.load();
        (active.generation, active.sha256.clone())
    }

    /// Whether an engine is running.
    pub fn engine_running(&self) -> bool {
        self.state.live.get().is_some_and(|engine| !engine.has_stopped())
    }

    /// Stops every capture, empties the capture directory and starts over
    /// on [`CONFIG`], so the next request meets the state the first one did.
    pub fn restart(self) -> anyhow::Result<Self> {
        self.state.captures.stop_all();
        self.state.live.shutdown();
        let dir = self.capture_dir.clone();
        drop(self);
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot empty {}", dir.display()))?;
        Self::new(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_reach_the_handlers_with_their_tokens() {
        let dir = std::env::temp_dir().join(format!("daqiri-fuzz-harness-{}", std::process::id()));
        let harness = AdminHarness::new(dir.clone()).unwrap();
        let bearer = |t: &str| format!("Bearer {t}").into_bytes();
        let read = bearer(READ_TOKEN);
        let write = bearer(WRITE_TOKEN);
        let answer = harness.send("GET", "/api/v1/config", &[], Vec::new()).unwrap();
        assert_eq!(answer.status, 401);
        let answer = harness.send("GET", "/api/v1/config", &[("authorization", &read)], Vec::new()).unwrap();
        assert_eq!((answer.status, answer.body), (200, CONFIG.as_bytes().to_vec()));
        let flow = br#"{"name": "g", "id": 9, "action": {"type": "queue", "id": 0}, "match": {"udp_dst": 6000}}"#;
        let headers = [("authorization", &write[..]), ("content-type", &b"application/json"[..])];
        let answer = harness.send("POST", "/api/v1/interfaces/lo/flows", &headers, flow.to_vec()).unwrap();
        assert_eq!(answer.status, 201, "{}", String::from_utf8_lossy(&answer.body));
        assert!(harness.send("GET", "not a uri", &[], Vec::new()).is_none());
        assert_eq!(harness.active().0, 1);
        let harness = harness.restart().unwrap();
        assert!(harness.engine_running());
        let answer = harness.send("GET", "/api/v1/interfaces/lo/flows", &[("authorization", &read)], Vec::new());
        let flows: serde_json::Value = serde_json::from_slice(&answer.unwrap().body).unwrap();
        assert_eq!(flows["flows"].as_array().unwrap().len(), 1, "the runtime flow is gone: {flows}");
        drop(harness);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
