//! `/api/v1/captures`: start, list, inspect, download and stop captures.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::{AdminState, ApiError};
use crate::capture::{CaptureInfo, CaptureRequest, Download};

/// Starts a capture (needs the bearer token when one is configured).
#[utoipa::path(post, path = "/api/v1/captures", tag = "captures", request_body = CaptureRequest, responses(
    (status = 201, body = CaptureInfo),
    (status = 400, body = super::error::ApiErrorBody, description = "a field is invalid"),
    (status = 401, body = super::error::ApiErrorBody, description = "missing or wrong bearer token"),
    (status = 409, body = super::error::ApiErrorBody, description = "a running capture has the name (or one of the two would write the other's numbered files), or files or objects of that name exist (captures never append)"),
    (status = 501, body = super::error::ApiErrorBody, description = "format gds where this gateway cannot run cuFile (no cuda feature, no GPU driver), or a pcap or raw capture of bytes in GPU memory"),
    (status = 502, body = super::error::ApiErrorBody, description = "an S3 destination's store refused the gateway's request (no such bucket, wrong credentials) or did not answer"),
    (status = 507, body = super::error::ApiErrorBody, description = "the capture filesystem is below its free-space floor, or has no room (space, inodes, quota) for the first file; or no capture memory is left for an S3 capture's parts")
))]
pub(crate) async fn start_capture(
    State(state): State<Arc<AdminState>>,
    request: Result<Json<CaptureRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<CaptureInfo>), ApiError> {
    let Json(request) = request.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text(), Some("body")))?;
    let runtime_flows: Vec<u32> = state
        .live
        .get()
        .map(|engine| super::flows::runtime_flows_of(&engine))
        .unwrap_or_default()
        .into_iter()
        .filter(|(interface, _)| *interface == request.interface)
        .map(|(_, flow)| flow.id)
        .collect();
    let captures = Arc::clone(&state.captures);
    let info = tokio::task::spawn_blocking(move || captures.start(request, &runtime_flows))
        .await
        .map_err(|e| ApiError::task_failed("start", e))??;
    Ok((StatusCode::CREATED, Json(info)))
}

/// Every capture with its state, counters and progress.
#[utoipa::path(get, path = "/api/v1/captures", tag = "captures", responses((status = 200, body = Vec<CaptureInfo>)))]
pub(crate) async fn list_captures(State(state): State<Arc<AdminState>>) -> Json<Vec<CaptureInfo>> {
    Json(state.captures.list())
}

/// One capture.
#[utoipa::path(get, path = "/api/v1/captures/{id}", tag = "captures", params(("id" = u64, Path, description = "capture id")), responses(
    (status = 200, body = CaptureInfo),
    (status = 404, body = super::error::ApiErrorBody)
))]
pub(crate) async fn get_capture(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<u64>,
) -> Result<Json<CaptureInfo>, ApiError> {
    Ok(Json(state.captures.get(id)?))
}

/// Stops a capture; its files are complete when this answers.
#[utoipa::path(delete, path = "/api/v1/captures/{id}", tag = "captures", params(("id" = u64, Path, description = "capture id")), responses(
    (status = 200, body = CaptureInfo),
    (status = 401, body = super::error::ApiErrorBody),
    (status = 404, body = super::error::ApiErrorBody)
))]
pub(crate) async fn stop_capture(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<u64>,
) -> Result<Json<CaptureInfo>, ApiError> {
    let captures = Arc::clone(&state.captures);
    let info = tokio::task::spawn_blocking(move || captures.stop(id))
        .await
        .map_err(|e| ApiError::task_failed("stop", e))??;
    Ok(Json(info))
}

/// Streams the capture's (newest) file, or its newest object in S3.
#[utoipa::path(get, path = "/api/v1/captures/{id}/download", tag = "captures", params(("id" = u64, Path, description = "capture id")), responses(
    (status = 200, description = "the file", content_type = "application/octet-stream", body = Vec<u8>),
    (status = 400, body = super::error::ApiErrorBody, description = "nothing written yet, or the newest object not complete yet"),
    (status = 404, body = super::error::ApiErrorBody),
    (status = 502, body = super::error::ApiErrorBody, description = "the S3 store refused the read or did not answer")
))]
pub(crate) async fn download_capture(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<u64>,
) -> Result<impl IntoResponse, ApiError> {
    let captures = Arc::clone(&state.captures);
    let download = tokio::task::spawn_blocking(move || captures.download(id))
        .await
        .map_err(|e| ApiError::task_failed("download", e))??;
    let (name, length, body) = match download {
        Download::File(path) => {
            let file = tokio::fs::File::open(&path).await.map_err(|e| {
                ApiError::new(StatusCode::NOT_FOUND, format!("cannot open {}: {e}", path.display()), Some("id"))
            })?;
            let length = file.metadata().await.map(|m| m.len()).unwrap_or_default();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (name, length, Body::from_stream(tokio_util::io::ReaderStream::new(file)))
        }
        Download::S3 { name, object } => (name, object.size, Body::from_stream(object.chunks)),
    };
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, length.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
        ],
        body,
    ))
}
