//! Liveness and readiness.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::state::{EngineState, no_engine};
use super::{AdminState, ApiError};

/// Health answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Health {
    /// `ok`; on `/readyz` also `waiting` (no config yet: nothing to run).
    status: &'static str,
}

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, body = Health)))]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The gateway does what its config asks: the engine runs it, or there is
/// no config yet and so nothing to run (`--wait-for-config` on a node the
/// operator placed no port on). A DaemonSet's pod on such a node is Ready,
/// or no rollout and no `helm --wait` could ever finish.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, body = Health),
    (status = 503, body = super::error::ApiErrorBody,
     description = "the engine is shutting down, restarting, or a config's engine failed to start")
))]
pub(crate) async fn readyz(State(state): State<Arc<AdminState>>) -> Result<Json<Health>, ApiError> {
    match EngineState::of(state.live.get().as_deref(), &state.active.load()) {
        EngineState::Running => Ok(Json(Health { status: "ok" })),
        EngineState::Waiting => Ok(Json(Health { status: "waiting" })),
        EngineState::Stopped => {
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the engine is shutting down", None))
        }
        EngineState::Down | EngineState::Restarting => Err(no_engine()),
    }
}
