//! Errors as JSON: `{"message": ..., "field": ..., "status": ...}` with an
//! HTTP status; `status` is the engine's DAQIRI status where the engine refused.

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
    /// The engine's DAQIRI status, when the engine refused (`NOT_SUPPORTED`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "NOT_SUPPORTED")]
    pub status: Option<&'static str>,
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
            body: ApiErrorBody {
                message: message.into(),
                field: field.map(str::to_owned),
                errors: Vec::new(),
                status: None,
            },
        }
    }

    /// Carries the engine's status in the body, as DAQIRI names it.
    pub(crate) fn with_engine_status(mut self, status: daqiri::Status) -> Self {
        self.body.status = Some(status.as_str());
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}
