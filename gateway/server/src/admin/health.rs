//! Liveness and readiness.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::{AdminState, ApiError};

/// Health answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Health {
    /// `ok`.
    status: &'static str,
}

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, body = Health)))]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The engine is initialised and running (every interface opened at init).
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, body = Health),
    (status = 503, body = super::error::ApiErrorBody, description = "the engine is shutting down or restarting")
))]
pub(crate) async fn readyz(State(state): State<Arc<AdminState>>) -> Result<Json<Health>, ApiError> {
    if state.engine()?.is_shut_down() {
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the engine is shutting down", None));
    }
    Ok(Json(Health { status: "ok" }))
}
