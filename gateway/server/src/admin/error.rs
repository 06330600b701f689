//! Errors as JSON: `{"message": ..., "field": ..., "status": ...}` with an
//! HTTP status; `status` is the engine's DAQIRI status where the engine refused.
//! Every engine, restart and capture error becomes an answer here, in one place.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::capture::CaptureError;
use crate::live::RestartError;

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

/// The most findings an error response lists.
pub(crate) const MAX_FINDINGS: usize = 200;

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

    /// The message with every finding behind it, for logs: a reload from
    /// SIGHUP or the file poll has no client to read the body.
    pub(crate) fn reason(&self) -> String {
        let mut reason = self.body.message.clone();
        for finding in self.body.errors.iter().filter(|d| d.severity == daqiri_config::Severity::Error) {
            reason.push_str(&format!("; {}: {}", finding.path, finding.message));
        }
        reason
    }

    /// Carries a config's findings: the first [`MAX_FINDINGS`], and how many
    /// more there were in the message. A document that repeats one mistake a
    /// million times (an alias bomb that parses) must not become a
    /// response of megabytes per request.
    pub(crate) fn with_findings(mut self, mut findings: Vec<daqiri_config::Diagnostic>) -> Self {
        self.body.field =
            findings.iter().find(|d| d.severity == daqiri_config::Severity::Error).map(|d| d.path.clone());
        if findings.len() > MAX_FINDINGS {
            let more = findings.len() - MAX_FINDINGS;
            findings.truncate(MAX_FINDINGS);
            self.body.message.push_str(&format!(
                " ({more} more findings not listed: `daqiri-gateway check` on the file lists them all)"
            ));
        }
        self.body.errors = findings;
        self
    }

    /// Carries the engine's status in the body, as DAQIRI names it.
    pub(crate) fn with_engine_status(mut self, status: daqiri::Status) -> Self {
        self.body.status = Some(status.as_str());
        self
    }

    /// Work the handler handed to a blocking task failed on our side (the
    /// task panicked or was cancelled).
    pub(crate) fn task_failed(what: &str, err: impl std::fmt::Display) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("{what} failed: {err}"), None)
    }

    /// The engine refused a runtime flow or a read of its flows: a full
    /// capacity is a conflict; an invalid flow, no capacity or a NIC's
    /// refusal cannot be processed.
    pub(crate) fn engine_refused(err: daqiri::Error) -> Self {
        let status = match err.status {
            daqiri::Status::NoSpaceAvailable => StatusCode::CONFLICT,
            daqiri::Status::InvalidParameter | daqiri::Status::NotSupported => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, err.detail(), None).with_engine_status(err.status)
    }

    /// The engine refused a flow-only reload: the running flows stay, and
    /// the request conflicts with them.
    pub(crate) fn flow_reload_refused(err: daqiri::Error) -> Self {
        ApiError::new(StatusCode::CONFLICT, err.detail(), None).with_engine_status(err.status)
    }

    /// A restart on a new config failed: refused or rolled back (the old
    /// config runs on) cannot be processed; an engine left down is ours.
    pub(crate) fn restart_failed(err: &RestartError) -> Self {
        let status = match err {
            RestartError::Refused(_) | RestartError::RolledBack(_) => StatusCode::UNPROCESSABLE_ENTITY,
            RestartError::Down { .. } | RestartError::NotStarted(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, err.to_string(), None).with_engine_status(err.engine_status())
    }
}

impl From<CaptureError> for ApiError {
    fn from(err: CaptureError) -> Self {
        match err {
            CaptureError::Invalid(field, message) => ApiError::new(StatusCode::BAD_REQUEST, message, Some(field)),
            CaptureError::NotFound(id) => ApiError::new(StatusCode::NOT_FOUND, format!("no capture {id}"), Some("id")),
            CaptureError::NotImplemented(message) => {
                ApiError::new(StatusCode::NOT_IMPLEMENTED, message, Some("format"))
            }
            CaptureError::NoSpace(message) => ApiError::new(StatusCode::INSUFFICIENT_STORAGE, message, None),
            CaptureError::Conflict(field, message) => ApiError::new(StatusCode::CONFLICT, message, Some(field)),
            CaptureError::TooMany(message) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, message, None),
            CaptureError::Store(message) => ApiError::new(StatusCode::BAD_GATEWAY, message, Some("destination")),
            CaptureError::Failed(message) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message, None),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// Most bytes of a plain-text error body carried into the JSON message.
const PLAIN_ERROR_LIMIT: usize = 4096;

/// Turns every error answer that is not JSON yet (axum's extractor
/// rejections: 413, bad UTF-8, bad path ids; 405 from the router; body
/// timeouts) into an [`ApiErrorBody`], so clients parse one shape.
pub(crate) async fn json_errors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let allow = response.headers().get(axum::http::header::ALLOW).cloned();
    let text = match axum::body::to_bytes(response.into_body(), PLAIN_ERROR_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    // The body deadline reaches the extractor as a failed read (400).
    let timed_out = text.contains(super::body_deadline::TIMED_OUT);
    let (status, message, field) = match (status, allow) {
        (StatusCode::METHOD_NOT_ALLOWED, allow) => (
            status,
            match allow.as_ref().and_then(|a| a.to_str().ok()) {
                Some(allow) => format!("{method} is not allowed on {path}; allowed: {allow}"),
                None => format!("{method} is not allowed on {path}; the API is described at /api/v1/openapi.json"),
            },
            Some("method"),
        ),
        _ if timed_out => (
            StatusCode::REQUEST_TIMEOUT,
            format!("the request body did not arrive within {:?}", super::body_deadline::BODY_TIMEOUT),
            Some("body"),
        ),
        _ if text.is_empty() => (status, status.canonical_reason().unwrap_or("error").to_owned(), None),
        _ => (status, text, None),
    };
    ApiError::new(status, message, field).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_logs_every_finding_with_its_path() {
        let mut error = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "the config is invalid", None);
        let mut report = daqiri_config::Report::default();
        report.error(&daqiri_config::YamlPath::from_text("daqiri.cfg.version"), "only 1 is valid");
        report.warn(&daqiri_config::YamlPath::from_text("daqiri.cfg.x"), "unknown key");
        error.body.errors = report.diagnostics;
        assert_eq!(error.reason(), "the config is invalid; daqiri.cfg.version: only 1 is valid");
    }

    #[test]
    fn a_million_findings_answer_with_the_first_few_hundred_and_their_count() {
        let mut report = daqiri_config::Report::default();
        report.warn(&daqiri_config::YamlPath::from_text("daqiri.cfg.x"), "unknown key");
        for i in 0..1_000_000 {
            report
                .error(&daqiri_config::YamlPath::from_text(format!("daqiri.cfg.interfaces[{i}].name")), "a duplicate");
        }
        let error = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "the config is invalid", None)
            .with_findings(report.diagnostics);
        assert_eq!(error.body.errors.len(), MAX_FINDINGS);
        assert!(error.body.message.contains("999801 more findings"), "{}", error.body.message);
        assert_eq!(error.body.field.as_deref(), Some("daqiri.cfg.interfaces[0].name"), "the first error's path");
        assert!(serde_json::to_vec(&error.body).unwrap().len() < 64 * 1024, "a small answer");
    }
}
