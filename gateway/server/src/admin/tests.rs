//! The admin API's routes, driven in-process through the router.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use super::*;

pub(super) const CONFIG: &str = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    loopback: sw\n    memory_regions:\n    - { name: m, kind: host, num_bufs: 64, buf_size: 2048 }\n    interfaces:\n    - name: lo\n      address: loopback\n      rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }] }\n";

/// The router, its OpenAPI document, its state, and the capture folder (removed on drop).
type App = (Router, utoipa::openapi::OpenApi, Arc<AdminState>, tempfile::TempDir);

fn app_with_token(token: Option<&str>) -> App {
    app_with_tokens(tokens::Tokens { write: token.map(str::to_owned), read: None })
}

fn app_with_tokens(tokens: tokens::Tokens) -> App {
    app_with_config(CONFIG, 0, tokens)
}

fn app_with_config(config: &str, capture_free_space_floor: u64, tokens: tokens::Tokens) -> App {
    let captures = tempfile::Builder::new().prefix("daqiri-admin-test-").tempdir().unwrap();
    let (router, api, state) =
        in_process(config, captures.path().to_path_buf(), capture_free_space_floor, tokens).unwrap();
    (router, api, state, captures)
}

fn app() -> App {
    app_with_token(None)
}

async fn send(
    router: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, serde_json::Value) {
    let mut request = Request::builder().method(method).uri(path).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = router.clone().oneshot(request.body(Body::from(body.to_owned())).unwrap()).await.unwrap();
    let status = response.status();
    let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null))
}

async fn get(router: &Router, path: &str) -> (StatusCode, String) {
    let response = router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn openapi_documents_exactly_the_routes() {
    let (router, api, _, _captures) = app();
    let documented: Vec<&String> = api.paths.paths.keys().collect();
    assert_eq!(
        documented,
        [
            "/api/v1/captures",
            "/api/v1/captures/{id}",
            "/api/v1/captures/{id}/download",
            "/api/v1/config",
            "/api/v1/config/reload",
            "/api/v1/interfaces/{name}/flows",
            "/api/v1/interfaces/{name}/flows/{id}",
            "/api/v1/stats",
            "/api/v1/status",
            "/healthz",
            "/metrics",
            "/readyz"
        ]
    );
    for path in documented.into_iter().filter(|p| !p.contains('{') && !p.ends_with("reload")) {
        let (status, body) = get(&router, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let (status, body) = get(&router, "/api/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"/api/v1/stats\""), "{body}");
}

#[tokio::test]
async fn status_stats_and_config_describe_the_engine() {
    let (router, _, state, _captures) = app();
    let status: serde_json::Value = serde_json::from_str(&get(&router, "/api/v1/status").await.1).unwrap();
    assert_eq!(status["interfaces"][0]["name"], "lo");
    assert_eq!(status["interfaces"][0]["backend"], "sw_loopback");
    assert_eq!(status["config"]["generation"], 1);
    assert_eq!(status["config"]["sha256"], state.active.load().sha256);
    let stats: serde_json::Value = serde_json::from_str(&get(&router, "/api/v1/stats").await.1).unwrap();
    assert_eq!(stats["interfaces"][0]["rx_queues"][0]["name"], "r");
    assert_eq!(stats["memory_regions"][0]["num_bufs"], 64);
    assert_eq!(get(&router, "/api/v1/config").await.1, CONFIG);
}

#[tokio::test]
async fn readiness_follows_the_engine_and_unknown_routes_are_json() {
    let (router, _, state, _captures) = app();
    assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
    state.live.shutdown();
    let (status, body) = get(&router, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("shutting down"), "{body}");
    let (status, body) = get(&router, "/api/v1/nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(body["message"].as_str().unwrap().contains("no route GET /api/v1/nothing"));
}

#[tokio::test]
async fn metrics_use_daqiri_names_and_labels() {
    let (router, _, _, _captures) = app();
    let (status, text) = get(&router, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for series in [
        "daqiri_rx_packets_total{daqiri_engine=\"sw_loopback\",daqiri_interface_name=\"lo\",daqiri_port_id=\"0\",daqiri_queue_id=\"0\"",
        "daqiri_rx_packets_total{daqiri_engine=\"sw_loopback\",daqiri_interface_name=\"lo\",daqiri_port_id=\"0\",daqiri_queue_id=\"all\"",
        "daqiri_rx_bytes_total{",
        "daqiri_memory_region_buffers{daqiri_memory_region_kind=\"host\",daqiri_memory_region_name=\"m\"",
        "daqiri_memory_region_buffers_in_use{",
        "daqiri_memory_region_bytes{daqiri_memory_region_kind=\"host\",daqiri_memory_region_name=\"m\"",
    ] {
        assert!(text.contains(series), "missing {series} in:\n{text}");
    }
}

#[tokio::test]
async fn mutating_endpoints_need_the_token_when_one_is_set() {
    let (router, _, _, _captures) = app_with_token(Some("s3cret"));
    let body = r#"{"format": "pcap", "interface": "lo", "name": "t", "max_packets": 1}"#;
    let (status, answer) = send(&router, "POST", "/api/v1/captures", None, body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer["field"], "Authorization");
    assert_eq!(send(&router, "POST", "/api/v1/captures", Some("wrong"), body).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&router, "POST", "/api/v1/captures", Some("s3cret"), body).await.0, StatusCode::CREATED);
    assert_eq!(send(&router, "DELETE", "/api/v1/captures/1", None, "").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&router, "DELETE", "/api/v1/captures/1", Some("s3cret"), "").await.0, StatusCode::OK);
    assert_eq!(get(&router, "/api/v1/captures").await.0, StatusCode::OK, "reads need no token");
}

#[tokio::test]
async fn capture_requests_are_checked_field_by_field() {
    let (router, _, _, _captures) = app();
    for (body, status, field) in [
        (r#"{"format": "pcap", "interface": "nope", "name": "a"}"#, StatusCode::BAD_REQUEST, "interface"),
        (r#"{"format": "pcap", "interface": "lo", "name": "../escape"}"#, StatusCode::BAD_REQUEST, "name"),
        (r#"{"format": "pcap", "interface": "lo", "name": "a/b"}"#, StatusCode::BAD_REQUEST, "name"),
        (r#"{"format": "gds", "interface": "lo", "name": "g"}"#, StatusCode::NOT_IMPLEMENTED, "format"),
        (
            r#"{"format": "pcap", "interface": "lo", "name": "a", "max_packets": 0}"#,
            StatusCode::BAD_REQUEST,
            "max_packets",
        ),
        (
            r#"{"format": "raw", "interface": "lo", "name": "a", "rotate_bytes": 10}"#,
            StatusCode::BAD_REQUEST,
            "rotate_bytes",
        ),
        (
            r#"{"format": "pcap", "interface": "lo", "name": "a", "rotate_files": 2}"#,
            StatusCode::BAD_REQUEST,
            "rotate_files",
        ),
        (r#"{"format": "tiff", "interface": "lo", "name": "a"}"#, StatusCode::BAD_REQUEST, "body"),
    ] {
        let (got, answer) = send(&router, "POST", "/api/v1/captures", None, body).await;
        assert_eq!((got, answer["field"].as_str()), (status, Some(field)), "{body}: {answer}");
        assert!(!answer["message"].as_str().unwrap().is_empty());
    }
    assert_eq!(get(&router, "/api/v1/captures/99").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn one_capture_past_the_limit_is_refused_with_429_naming_it_until_one_stops() {
    let (router, _, _, _captures) = app();
    let start = |i: usize| format!(r#"{{"format": "pcap", "interface": "lo", "name": "c{i}"}}"#);
    let limit = usize::from(crate::capture::DEFAULT_MAX_CAPTURES);
    for i in 0..limit {
        let (status, answer) = send(&router, "POST", "/api/v1/captures", None, &start(i)).await;
        assert_eq!(status, StatusCode::CREATED, "capture {i}: {answer}");
    }
    let (status, answer) = send(&router, "POST", "/api/v1/captures", None, &start(limit)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains(&format!("--max-captures {limit}")), "the limit is named: {message}");
    assert_eq!(send(&router, "DELETE", "/api/v1/captures/1", None, "").await.0, StatusCode::OK);
    let (status, answer) = send(&router, "POST", "/api/v1/captures", None, &start(limit)).await;
    assert_eq!(status, StatusCode::CREATED, "a stopped capture frees its place: {answer}");
}

/// A capture whose name is a running rotating capture's file name (or
/// whose numbered files are another's name) is refused with 409 naming it:
/// else one of them would find the other's file at its turn and fail.
#[tokio::test]
async fn a_capture_cannot_take_the_name_of_another_ones_rotated_file() {
    let (router, _, _, _captures) = app();
    let start =
        |name: &str| format!(r#"{{"format": "pcap", "interface": "lo", "name": "{name}", "rotate_bytes": 100000}}"#);
    assert_eq!(send(&router, "POST", "/api/v1/captures", None, &start("col")).await.0, StatusCode::CREATED);
    for clash in ["col_0003", "col_17"] {
        let (status, answer) = send(&router, "POST", "/api/v1/captures", None, &start(clash)).await;
        assert_eq!((status, answer["field"].as_str()), (StatusCode::CONFLICT, Some("name")), "{answer}");
        assert!(answer["message"].as_str().unwrap().contains("\"col\""), "the other capture is named: {answer}");
    }
    assert_eq!(send(&router, "POST", "/api/v1/captures", None, &start("colder")).await.0, StatusCode::CREATED);
    // And the other way round: a running tap_5 keeps tap out.
    assert_eq!(send(&router, "POST", "/api/v1/captures", None, &start("tap_5")).await.0, StatusCode::CREATED);
    assert_eq!(send(&router, "POST", "/api/v1/captures", None, &start("tap")).await.0, StatusCode::CONFLICT);
}

#[tokio::test]
async fn captures_refuse_to_start_below_the_free_space_floor() {
    let (router, _, _, _captures) = app_with_config(CONFIG, u64::MAX, tokens::Tokens::default());
    let (status, answer) =
        send(&router, "POST", "/api/v1/captures", None, r#"{"format": "pcap", "interface": "lo", "name": "a"}"#).await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE);
    assert!(answer["message"].as_str().unwrap().contains("below the"), "{answer}");
}

#[tokio::test]
async fn a_dynamic_flow_capacity_of_0_still_takes_flows_as_in_daqiri() {
    let (router, ..) = app_with_token(None);
    let flows = "/api/v1/interfaces/lo/flows";
    let (status, list) = send(&router, "GET", flows, None, "").await;
    assert_eq!((status, list["dynamic_flow_capacity"].as_u64()), (StatusCode::OK, Some(0)), "{list}");
    let limit = u64::from(daqiri::config::model::DEFAULT_RUNTIME_FLOWS);
    assert_eq!(list["runtime_flow_limit"].as_u64(), Some(limit), "{list}");
    let flow = r#"{"name": "late", "id": 42, "action": {"type": "queue", "id": 0}, "match": {"udp_dst": 9000}}"#;
    let (status, answer) = send(&router, "POST", flows, None, flow).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

#[tokio::test]
async fn flows_are_added_and_deleted_at_runtime_and_survive_a_restart() {
    let config = CONFIG.replace("rx: { queues:", "rx: { dynamic_flow_capacity: 1, queues:");
    let (router, _, state, _captures) = app_with_config(&config, 0, tokens::Tokens::default());
    let flows = "/api/v1/interfaces/lo/flows";
    let (status, list) = send(&router, "GET", flows, None, "").await;
    assert_eq!((status, list["dynamic_flow_capacity"].as_u64()), (StatusCode::OK, Some(1)), "{list}");
    assert_eq!(list["runtime_flow_limit"].as_u64(), Some(1), "{list}");
    assert_eq!(list["flows"], serde_json::json!([]));

    let flow = r#"{"name": "late", "id": 42, "action": {"type": "queue", "id": 0}, "match": {"udp_dst": "9000-9009"}}"#;
    let (status, answer) = send(&router, "POST", flows, None, r#"{"name": "x"}"#).await;
    assert_eq!((status, answer["field"].as_str()), (StatusCode::BAD_REQUEST, Some("body")), "{answer}");
    // A field a flow does not have is named, not ignored.
    let typo = flow.replace("\"match\"", "\"mtach\"");
    let (status, answer) = send(&router, "POST", flows, None, &typo).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("no field \"mtach\""), "{answer}");
    // Names are bounded (they are metric labels), and so are bodies.
    let long = flow.replace("\"late\"", &format!("\"{}\"", "n".repeat(1000)));
    let (status, answer) = send(&router, "POST", flows, None, &long).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("at most 256"), "{answer}");
    let huge = flow.replace("\"late\"", &format!("\"{}\"", "n".repeat(3 << 20)));
    assert_eq!(send(&router, "POST", flows, None, &huge).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, answer) = send(&router, "POST", flows, None, &flow.replace("\"id\": 0", "\"id\": 3")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("flow.action"), "the bad field is named: {answer}");
    let (status, list) = send(&router, "POST", flows, None, flow).await;
    assert_eq!(status, StatusCode::CREATED, "{list}");
    assert_eq!(
        (list["flows"][0]["id"].as_u64(), list["flows"][0]["added_at_runtime"].as_bool()),
        (Some(42), Some(true))
    );
    assert_eq!(list["flows"][0]["match"]["udp_dst"], "9000-9009");
    let (status, answer) = send(&router, "POST", flows, None, &flow.replace("42", "43").replace("late", "later")).await;
    assert_eq!((status, answer["status"].as_str()), (StatusCode::CONFLICT, Some("NO_SPACE_AVAILABLE")), "{answer}");
    assert_eq!(send(&router, "GET", "/api/v1/interfaces/nope/flows", None, "").await.0, StatusCode::NOT_FOUND);
    assert_eq!(send(&router, "DELETE", &format!("{flows}/7"), None, "").await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&router, "/api/v1/config").await.1, config, "the applied config text stays as applied");

    // A change that restarts the engine adds the runtime flow again.
    let request = Request::put("/api/v1/config").body(Body::from(config.replace("batch_size: 8", "batch_size: 4")));
    let response = router.clone().oneshot(request.unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (_, list) = send(&router, "GET", flows, None, "").await;
    assert_eq!(list["flows"][0]["added_at_runtime"], true, "carried over the restart: {list}");
    assert_eq!(state.live.get().unwrap().stats().ports[0].flows[0].id, 42);

    let (status, list) = send(&router, "DELETE", &format!("{flows}/42"), None, "").await;
    assert_eq!((status, list["flows"].as_array().map(Vec::len)), (StatusCode::OK, Some(0)), "{list}");
}

#[tokio::test]
async fn config_put_swaps_flows_restarts_for_the_rest_and_rolls_back_what_cannot_start() {
    let (router, _, state, _captures) = app();
    let put = |body: String| {
        let router = router.clone();
        async move {
            let request = Request::put("/api/v1/config").body(Body::from(body)).unwrap();
            let response = router.oneshot(request).await.unwrap();
            let status = response.status();
            let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
            (status, serde_json::from_slice::<serde_json::Value>(&body).unwrap())
        }
    };
    // Invalid: every error, with its path; nothing changes.
    let invalid = CONFIG.replace("version: 1", "version: 7").replace("batch_size: 8", "batch_size: 0");
    let (status, answer) = put(invalid).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let paths: Vec<&str> = answer["errors"].as_array().unwrap().iter().filter_map(|e| e["path"].as_str()).collect();
    assert!(
        paths.contains(&"daqiri.cfg.version") && paths.contains(&"daqiri.cfg.interfaces[0].rx.queues[0].batch_size"),
        "{answer}"
    );
    assert_eq!(get(&router, "/api/v1/config").await.1, CONFIG);

    // A flow added: applied live, generation 2.
    let with_flow = CONFIG.replace(
        "memory_regions: [m] }] }",
        "memory_regions: [m] }], flows: [{ name: f, id: 3, action: { type: queue, id: 0 }, match: { udp_dst: 9 } }] }",
    );
    let (status, answer) = put(with_flow.clone()).await;
    assert_eq!(
        (status, answer["change"].as_str(), answer["generation"].as_u64()),
        (StatusCode::OK, Some("flows"), Some(2)),
        "{answer}"
    );
    assert_eq!(state.live.get().unwrap().stats().ports[0].flows[0].id, 3);
    assert_eq!(put(with_flow.clone()).await.1["change"], "unchanged");

    // A queue change restarts the engine on the new config.
    let bigger = with_flow.replace("batch_size: 8", "batch_size: 16");
    let (status, answer) = put(bigger.clone()).await;
    assert_eq!(
        (status, answer["change"].as_str(), answer["generation"].as_u64()),
        (StatusCode::OK, Some("restart"), Some(3)),
        "{answer}"
    );
    assert_eq!(answer["restart_reason"], "daqiri.cfg.interfaces[0].rx.queues", "{answer}");
    assert!(answer["restart_ms"].as_f64().unwrap() > 0.0, "{answer}");
    {
        let engine = state.live.get().unwrap(); // let go before the next restart waits for holders
        assert_eq!(engine.config().config().interfaces[0].rx.as_ref().unwrap().queues[0].batch_size, Some(16));
        assert_eq!(engine.stats().ports[0].flows[0].id, 3);
    }
    assert!(get(&router, "/metrics").await.1.contains("daqiri_engine_restarts_total{otel_scope_name=\"daqiri\"} 1"));
    assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);

    // A config that cannot start (its UDP port is taken): 422, the previous config runs again.
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let socket = format!(
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: socket\n    memory_regions:\n    - {{ name: m, kind: host, num_bufs: 64, buf_size: 2048 }}\n    interfaces:\n    - name: udp\n      socket_config: {{ mode: server, local_addr: \"udp://{}\" }}\n      rx: {{ queues: [{{ name: r, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }}] }}\n",
        taken.local_addr().unwrap()
    );
    let (status, answer) = put(socket).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("the previous config runs again"), "{answer}");
    assert_eq!(answer["status"], "INVALID_PARAMETER", "the engine's own status travels with the answer");
    assert!(answer["message"].as_str().unwrap().contains("Address already in use"), "the OS error is kept: {answer}");
    assert_eq!(get(&router, "/api/v1/config").await.1, bigger);
    let status: serde_json::Value = serde_json::from_str(&get(&router, "/api/v1/status").await.1).unwrap();
    assert_eq!((status["config"]["generation"].as_u64(), status["engine"].as_str()), (Some(3), Some("running")));
    assert_eq!(status["interfaces"][0]["backend"], "sw_loopback");
    assert!(
        get(&router, "/metrics").await.1.contains("daqiri_config_reload_failures_total{otel_scope_name=\"daqiri\"} 2")
    );
}

async fn raw(router: &Router, request: Request<Body>) -> (StatusCode, serde_json::Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let json = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{status}: the body is not JSON ({e}): {}", String::from_utf8_lossy(&body)));
    (status, json)
}

#[tokio::test]
async fn reads_of_config_stats_and_captures_need_the_read_token_when_one_is_set() {
    let (router, _, _, _captures) =
        app_with_tokens(tokens::Tokens { write: Some("w".to_owned()), read: Some("r".to_owned()) });
    let read = |path: &str, authorization: Option<&str>| {
        let mut request = Request::get(path);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let router = router.clone();
        let request = request.body(Body::empty()).unwrap();
        async move { router.oneshot(request).await.unwrap().status() }
    };
    for path in ["/api/v1/config", "/api/v1/status", "/api/v1/stats", "/api/v1/captures", "/api/v1/interfaces/lo/flows"]
    {
        assert_eq!(read(path, None).await, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(read(path, Some("Bearer nope")).await, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(read(path, Some("Bearer r")).await, StatusCode::OK, "{path}");
        assert_eq!(read(path, Some("Bearer w")).await, StatusCode::OK, "the write token grants reads: {path}");
    }
    for path in ["/healthz", "/readyz", "/metrics", "/api/v1/openapi.json"] {
        assert_eq!(read(path, None).await, StatusCode::OK, "probes and scrapes stay open: {path}");
    }
    // The read token does not grant changes; the scheme's case does not matter.
    let put = |authorization: &'static str| {
        let router = router.clone();
        async move {
            let request = Request::put("/api/v1/config").header("authorization", authorization);
            router.oneshot(request.body(Body::from(CONFIG)).unwrap()).await.unwrap().status()
        }
    };
    assert_eq!(put("Bearer r").await, StatusCode::UNAUTHORIZED);
    assert_eq!(put("bearer w").await, StatusCode::OK);
    assert_eq!(put("BEARER  w ").await, StatusCode::OK);
    assert_eq!(read("/api/v1/config", Some("bEaReR r")).await, StatusCode::OK);
}

#[tokio::test]
async fn every_error_answer_is_json_naming_what_is_wrong() {
    let (router, _, _, _captures) = app();
    let (status, body) = raw(&router, Request::delete("/api/v1/config").body(Body::empty()).unwrap()).await;
    assert_eq!((status, body["field"].as_str()), (StatusCode::METHOD_NOT_ALLOWED, Some("method")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("DELETE is not allowed on /api/v1/config"), "{body}");
    let (status, body) = raw(&router, Request::get("/api/v1/captures/abc").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("abc") || body["message"].as_str().unwrap().contains("parse"),
        "{body}"
    );
    let bad_utf8 = Request::put("/api/v1/config").body(Body::from(vec![b'a', 0xff, 0xfe])).unwrap();
    let (status, body) = raw(&router, bad_utf8).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["message"].as_str().unwrap().contains("UTF-8"), "{body}");
    let too_big = Request::put("/api/v1/config").body(Body::from(vec![b'#'; 3 << 20])).unwrap();
    let (status, body) = raw(&router, too_big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, _) = raw(&router, Request::get("/nope").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn deeply_nested_yaml_is_refused_before_the_parser_sees_it() {
    let (router, _, _, _captures) = app();
    let depth = 150_000;
    let bomb = format!("x: {}{}\n", "[".repeat(depth), "]".repeat(depth));
    let started = std::time::Instant::now();
    let (status, body) = raw(&router, Request::put("/api/v1/config").body(Body::from(bomb)).unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["errors"][0]["message"].as_str().unwrap().contains("nests more than 64 levels"), "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "refused in {:?}", started.elapsed());
    assert_eq!(get(&router, "/api/v1/config").await.1, CONFIG, "the running config is untouched");
}

/// While a config is being applied (here: the apply lock held, as a long
/// restart holds it), reads answer at once from the last applied snapshot,
/// flagged as reloading, and the next change waits its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn reads_never_wait_for_a_config_being_applied() {
    let (router, _, state, _captures) = app();
    let held = Arc::clone(&state);
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _applying = held.applying.lock().unwrap();
        held.reloading.store(true, std::sync::atomic::Ordering::Release);
        locked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        held.reloading.store(false, std::sync::atomic::Ordering::Release);
    });
    locked_rx.recv().unwrap();
    let changed = CONFIG.replace("num_bufs: 64", "num_bufs: 128");
    let put = tokio::spawn({
        let router = router.clone();
        async move { send(&router, "PUT", "/api/v1/config", None, &changed).await }
    });
    for path in ["/healthz", "/readyz", "/metrics", "/api/v1/status", "/api/v1/config", "/api/v1/stats"] {
        let answer = tokio::time::timeout(std::time::Duration::from_secs(1), get(&router, path)).await;
        let (status, body) = answer.unwrap_or_else(|_| panic!("{path} waited for the reload"));
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let status: serde_json::Value = serde_json::from_str(&get(&router, "/api/v1/status").await.1).unwrap();
    assert_eq!(
        (status["config"]["generation"].as_u64(), status["config"]["reloading"].as_bool()),
        (Some(1), Some(true))
    );
    assert!(!put.is_finished(), "the PUT waits for the change under way");
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    let (code, applied) = put.await.unwrap();
    assert_eq!(code, StatusCode::OK, "{applied}");
    assert_eq!(applied["generation"], 2);
    let status: serde_json::Value = serde_json::from_str(&get(&router, "/api/v1/status").await.1).unwrap();
    assert_eq!(
        (status["config"]["generation"].as_u64(), status["config"]["reloading"].as_bool()),
        (Some(2), Some(false))
    );
}

/// A flow added while a config change is under way waits for it, so the
/// restart cannot carry the runtime flows it found and then drop one that
/// came after (answered 201 and lost). Then, restarts and adds racing, every
/// flow answered 201 is on the engine at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_added_during_restarts_are_never_lost_after_a_201() {
    let config = CONFIG.replace("rx: { queues:", "rx: { dynamic_flow_capacity: 64, queues:");
    let (router, _, state, _captures) = app_with_config(&config, 0, tokens::Tokens::default());
    let flows = "/api/v1/interfaces/lo/flows";
    let flow = |id: u32| {
        format!(
            r#"{{"name": "f{id}", "id": {id}, "action": {{"type": "queue", "id": 0}}, "match": {{"udp_dst": {}}}}}"#,
            9000 + id
        )
    };
    let held = Arc::clone(&state);
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _applying = held.applying.lock().unwrap();
        locked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    locked_rx.recv().unwrap();
    let add = tokio::spawn({
        let (router, body) = (router.clone(), flow(1));
        async move { send(&router, "POST", flows, None, &body).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!add.is_finished(), "the add waits for the change under way");
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(add.await.unwrap().0, StatusCode::CREATED);

    let restarts = tokio::spawn({
        let (router, config) = (router.clone(), config.clone());
        async move {
            for round in 0..10 {
                let batch = if round % 2 == 0 { "batch_size: 4" } else { "batch_size: 8" };
                let (status, body) =
                    send(&router, "PUT", "/api/v1/config", None, &config.replace("batch_size: 8", batch)).await;
                assert_eq!(status, StatusCode::OK, "{body}");
            }
        }
    });
    let mut created = vec![1];
    for id in 2..30u32 {
        let (status, body) = send(&router, "POST", flows, None, &flow(id)).await;
        match status {
            StatusCode::CREATED => created.push(id),
            // The moment no engine runs.
            StatusCode::SERVICE_UNAVAILABLE => {}
            other => panic!("flow {id}: {other} {body}"),
        }
    }
    restarts.await.unwrap();
    let (_, list) = send(&router, "GET", flows, None, "").await;
    let present: Vec<u64> = list["flows"].as_array().unwrap().iter().filter_map(|f| f["id"].as_u64()).collect();
    for id in created {
        assert!(present.contains(&u64::from(id)), "flow {id} was answered 201 and is gone: {list}");
    }
}

/// A capture directory with space left but no inode answers 507, as one
/// below its free-space floor does, not 500.
#[tokio::test]
#[ignore = "needs root to mount a tmpfs; tests/run.sh runs it"]
async fn a_capture_directory_out_of_inodes_answers_507() {
    let dir = tempfile::Builder::new().prefix("daqiri-inodes-").tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m,nr_inodes=8", "tmpfs"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(mounted.success(), "mount a tmpfs with 8 inodes");
    let unmount = || std::process::Command::new("umount").arg(dir.path()).status();
    let mut files = 0;
    while std::fs::write(dir.path().join(format!("filler{files}")), b"").is_ok() {
        files += 1;
        assert!(files < 100, "the tmpfs runs out of inodes");
    }
    let (router, _, _) = in_process(CONFIG, dir.path().to_path_buf(), 0, tokens::Tokens::default()).unwrap();
    let (status, answer) =
        send(&router, "POST", "/api/v1/captures", None, r#"{"format": "pcap", "interface": "lo", "name": "a"}"#).await;
    drop(router);
    unmount().unwrap();
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("a.pcap"), "the file is named: {answer}");
}

/// While the burst's RX ring is more than half full, running captures
/// count their copies of it as capture drops instead of making them:
/// delivery comes first. Below half they copy again.
#[tokio::test]
async fn captures_skip_their_copies_while_delivery_is_behind() {
    let config = CONFIG.replace("loopback: sw\n", "loopback: sw\n    tx_meta_buffers: 16\n").replace(
        "      rx: {",
        "      tx: { queues: [{ name: t, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }] }\n      rx: {",
    );
    let (router, _, state, _captures) = app_with_config(&config, 0, tokens::Tokens::default());
    let (status, started) =
        send(&router, "POST", "/api/v1/captures", None, r#"{"format": "pcap", "interface": "lo", "name": "c"}"#).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let engine = state.live.get().unwrap();
    let next_burst = || {
        // A whole RX burst (batch_size 8, no timeout).
        let mut tx = engine.get_tx_packet_burst(0, 0, 8).unwrap();
        for i in 0..8 {
            tx.packet_mut(i).write(&[i as u8; 100]).unwrap();
        }
        engine.send_tx_burst(tx).map_err(|e| e.error).unwrap();
        loop {
            if let Some(burst) = engine.get_rx_burst(0, 0).unwrap() {
                break burst;
            }
        }
    };
    let capture = |state: &AdminState| state.captures.list().into_iter().next().unwrap();
    let burst = next_burst();
    state.captures.tap(&burst, || Some((9, 16)));
    assert_eq!(capture(&state).capture_drops, burst.num_packets() as u64, "behind: counted, not copied");
    let burst = next_burst();
    state.captures.tap(&burst, || Some((8, 16)));
    assert_eq!(capture(&state).capture_drops, 8, "half full: copied");
    assert_eq!(send(&router, "DELETE", "/api/v1/captures/1", None, "").await.0, StatusCode::OK);
    assert_eq!(capture(&state).packets, 8, "the copied burst was written");
}
