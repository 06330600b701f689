//! `GET /metrics`: OpenTelemetry metrics in Prometheus text format.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::{AdminState, ApiError};

/// Every metric, for Prometheus to scrape.
#[utoipa::path(get, path = "/metrics", tag = "metrics", responses(
    (status = 200, description = "Prometheus text exposition format", content_type = "text/plain; version=0.0.4", body = String)
))]
pub(crate) async fn metrics(State(state): State<Arc<AdminState>>) -> Result<impl IntoResponse, ApiError> {
    let text = state
        .telemetry
        .render()
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode metrics: {e}"), None))?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}
