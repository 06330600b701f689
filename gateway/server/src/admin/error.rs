//! Errors as JSON: `{"message": ..., "field": ...}` with an HTTP status.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// An error body.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApiErrorBody {
    /// What went wrong and what would be valid.
    pub message: String,
    /// The request field or config path at fault, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Every finding, for an invalid config (each with its YAML path).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub errors: Vec<daqiri_config::Diagnostic>,
}

/// An error response.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub body: ApiErrorBody,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>, field: Option<&str>) -> Self {
        Self {
            status,
            body: ApiErrorBody { message: message.into(), field: field.map(str::to_owned), errors: Vec::new() },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}
