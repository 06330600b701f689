//! Bearer tokens: one for the endpoints that change things, one for those
//! that read what the gateway holds (captured packets, the config, paths).
//! Health, readiness, metrics and the OpenAPI document stay open: probes
//! and Prometheus need them, and they carry no packet or config content.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AdminState, ApiError};

/// The tokens the admin API checks; `None` leaves that side open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    /// Needed by POST, PUT, PATCH and DELETE (`--admin-token-file`); also grants reads.
    pub write: Option<String>,
    /// Needed by reads beyond health and metrics (`--admin-read-token-file`).
    pub read: Option<String>,
}

impl Tokens {
    /// Reads each token file (trimmed; an empty one is refused).
    pub(crate) fn from_files(write: Option<&Path>, read: Option<&Path>) -> anyhow::Result<Self> {
        let load = |path: Option<&Path>, flag: &str| -> anyhow::Result<Option<String>> {
            let Some(path) = path else { return Ok(None) };
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {flag} {}", path.display()))?
                .trim()
                .to_owned();
            if token.is_empty() {
                bail!("{flag} {} is empty", path.display());
            }
            Ok(Some(token))
        };
        Ok(Self { write: load(write, "--admin-token-file")?, read: load(read, "--admin-read-token-file")? })
    }

    /// Says what anyone who reaches `addr` can do without a token.
    pub(crate) fn warn_if_exposed(&self, addr: std::net::SocketAddr) {
        if addr.ip().is_loopback() {
            return;
        }
        if self.write.is_none() {
            tracing::warn!(
                "the admin API listens on {addr}, beyond loopback, without --admin-token-file: anyone who reaches it can replace the config and start captures"
            );
        }
        if self.read.is_none() {
            tracing::warn!(
                "the admin API listens on {addr}, beyond loopback, without --admin-read-token-file: anyone who reaches it can read the config and download captured packets"
            );
        }
    }
}

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

/// The token of an `Authorization: Bearer <token>` header; the scheme is
/// case-insensitive (RFC 9110, 11.1).
fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without an early exit, so timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
