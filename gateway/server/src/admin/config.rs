//! The active config: read it, replace it (`PUT`), re-read its file (`reload`).
//!
//! A new config is validated in full first; an invalid one is answered 422
//! with every finding and the running config stays untouched. A valid one is
//! applied without stopping anything when only RX flows changed (each port's
//! flow table is swapped whole: no packet is lost); any other change is
//! answered 409 naming the first changed path, and nothing changes.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use daqiri_config::Document;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ActiveConfig, AdminState, ApiError};

/// The config as YAML, exactly as last applied.
#[utoipa::path(get, path = "/api/v1/config", tag = "config", responses(
    (status = 200, description = "the active DAQIRI YAML config", content_type = "application/yaml", body = String)
))]
pub(crate) async fn get_config(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    let yaml = state.active.lock().unwrap_or_else(|e| e.into_inner()).yaml.clone();
    ([(header::CONTENT_TYPE, "application/yaml")], yaml)
}

/// What a reload did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Applied {
    /// Generation now active.
    generation: u64,
    /// SHA-256 of the active YAML.
    sha256: String,
    /// `unchanged` or `flows` (flow tables swapped live).
    change: &'static str,
}

/// Validates and applies a new config (YAML body; needs the token when one is set).
#[utoipa::path(put, path = "/api/v1/config", tag = "config", request_body(content = String, content_type = "application/yaml"), responses(
    (status = 200, body = Applied),
    (status = 401, body = super::error::ApiErrorBody),
    (status = 409, body = super::error::ApiErrorBody, description = "a change that needs a restart; nothing was changed"),
    (status = 422, body = super::error::ApiErrorBody, description = "invalid config: every error with its YAML path; nothing was changed")
))]
pub(crate) async fn put_config(State(state): State<Arc<AdminState>>, body: String) -> Result<Json<Applied>, ApiError> {
    apply(&state, body).map(Json)
}

/// Re-reads the config file the gateway was started with and applies it.
#[utoipa::path(post, path = "/api/v1/config/reload", tag = "config", responses(
    (status = 200, body = Applied),
    (status = 400, body = super::error::ApiErrorBody, description = "the gateway runs its embedded config: there is no file"),
    (status = 409, body = super::error::ApiErrorBody),
    (status = 422, body = super::error::ApiErrorBody)
))]
pub(crate) async fn reload_config(State(state): State<Arc<AdminState>>) -> Result<Json<Applied>, ApiError> {
    reload_from_file(&state).map(Json)
}

/// Re-reads `--config` and applies it (the reload endpoint and SIGHUP).
pub(crate) fn reload_from_file(state: &AdminState) -> Result<Applied, ApiError> {
    let path = state.config_path.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "the gateway runs its embedded default config: there is no file to reload; use PUT /api/v1/config",
            None,
        )
    })?;
    let yaml = std::fs::read_to_string(path).map_err(|e| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("cannot read {}: {e}", path.display()), None)
    })?;
    apply(state, yaml)
}

/// Validates and applies `yaml`; counts the outcome.
pub(crate) fn apply(state: &AdminState, yaml: String) -> Result<Applied, ApiError> {
    let result = try_apply(state, yaml);
    let counter = if result.is_ok() { &state.reloads.applied } else { &state.reloads.failed };
    counter.fetch_add(1, Relaxed);
    match &result {
        Ok(applied) => tracing::info!(generation = applied.generation, change = applied.change, "config applied"),
        Err(err) => tracing::warn!("config refused: {}", err.body.message),
    }
    result
}

fn try_apply(state: &AdminState, yaml: String) -> Result<Applied, ApiError> {
    let mut active = state.active.lock().unwrap_or_else(|e| e.into_inner());
    if yaml == active.yaml {
        return Ok(Applied { generation: active.generation, sha256: active.sha256.clone(), change: "unchanged" });
    }
    let valid = Document::parse(&yaml).and_then(|doc| doc.validate()).map_err(|report| {
        let mut err = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the config is invalid; the running config is unchanged",
            None,
        );
        err.body.field = report.errors().next().map(|d| d.path.clone());
        err.body.errors = report.diagnostics;
        err
    })?;
    state.engine.reload_flows(valid).map_err(|e| {
        ApiError::new(StatusCode::CONFLICT, format!("{}; the running config is unchanged", e.message), None)
    })?;
    *active = ActiveConfig::new(yaml, active.generation + 1);
    Ok(Applied { generation: active.generation, sha256: active.sha256.clone(), change: "flows" })
}
