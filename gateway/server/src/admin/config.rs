//! `GET /api/v1/config`: the active DAQIRI YAML.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::AdminState;

/// The active config as YAML, exactly as loaded.
#[utoipa::path(get, path = "/api/v1/config", tag = "config", responses(
    (status = 200, description = "the active DAQIRI YAML config", content_type = "application/yaml", body = String)
))]
pub(crate) async fn get_config(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], state.config_yaml.clone())
}
