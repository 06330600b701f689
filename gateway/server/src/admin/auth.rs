//! Bearer-token check for the endpoints that change things.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AdminState, ApiError};

/// Lets reads through; POST, PUT, PATCH and DELETE need `Authorization: Bearer <token>`
/// when the gateway was started with `--admin-token-file`.
pub(crate) async fn require_token(State(state): State<Arc<AdminState>>, request: Request, next: Next) -> Response {
    let mutating = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
    if let (true, Some(token)) = (mutating, &state.token) {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "this endpoint needs `Authorization: Bearer <token>` (the gateway's --admin-token-file)",
                Some("Authorization"),
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Compares without an early exit, so timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
