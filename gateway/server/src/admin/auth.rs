//! Bearer tokens: one for the endpoints that change things, one for those
//! that read what the gateway holds (captured packets, the config, paths).
//! Health, readiness, metrics and the OpenAPI document stay open: probes
//! and Prometheus need them, and they carry no packet or config content.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::state::AdminState;

/// Paths anyone may read.
fn is_open(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics" | "/api/v1/openapi.json")
}

/// Checks the request's bearer token against the side it touches.
pub(crate) async fn require_token(State(state): State<Arc<AdminState>>, request: Request, next: Next) -> Response {
    let mutating = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
    let tokens = &state.tokens;
    let given = bearer(&request);
    let holds = |token: &Option<String>| {
        token.as_ref().is_some_and(|t| given.is_some_and(|g| constant_time_eq(g.as_bytes(), t.as_bytes())))
    };
    let refusal = if mutating {
        (tokens.write.is_some() && !holds(&tokens.write)).then_some("--admin-token-file")
    } else {
        let open = is_open(request.uri().path()) || tokens.read.is_none();
        (!open && !holds(&tokens.read) && !holds(&tokens.write)).then_some("--admin-read-token-file")
    };
    if let Some(flag) = refusal {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("this endpoint needs `Authorization: Bearer <token>` (the gateway's {flag})"),
            Some("Authorization"),
        )
        .into_response();
    }
    next.run(request).await
}

/// Whether `headers` carry either of the gateway's tokens (admission lets
/// such requests past the limit on anonymous ones).
pub(crate) fn holds_a_token(tokens: &super::tokens::Tokens, headers: &axum::http::HeaderMap) -> bool {
    let given = bearer_of(headers);
    [&tokens.write, &tokens.read]
        .into_iter()
        .flatten()
        .any(|t| given.is_some_and(|g| constant_time_eq(g.as_bytes(), t.as_bytes())))
}

/// A probe's request: health, readiness or metrics, answered from snapshots.
pub(crate) fn is_probe(method: &Method, path: &str) -> bool {
    *method == Method::GET && matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is
/// case-insensitive (RFC 9110, 11.1).
fn bearer(request: &Request) -> Option<&str> {
    bearer_of(request.headers())
}

fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without an early exit, so timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}
