//! The active config: read it, replace it (`PUT`), re-read its file (`reload`).
//!
//! A new config is validated in full first; an invalid one is answered 422
//! with every finding and the running config stays untouched. A valid one is
//! applied with the least disruption it allows:
//! - only RX flows changed: each port's flow table is swapped whole, nothing
//!   stops and no packet is lost;
//! - anything else: the engine restarts on the new config (see
//!   [`crate::live`]); packets arriving during the restart window are lost,
//!   and the window is reported. A config that fails to start (a port in use,
//!   too few hugepages) is answered 422 and the previous config runs again.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ActiveConfig, AdminState, ApiError};
use daqiri::ReloadChange;

/// The config as YAML, exactly as last applied.
#[utoipa::path(get, path = "/api/v1/config", tag = "config", responses(
    (status = 200, description = "the active DAQIRI YAML config", content_type = "application/yaml", body = String)
))]
pub(crate) async fn get_config(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    // The last applied config, even while a reload is under way.
    let yaml = state.active.load().yaml.clone();
    ([(header::CONTENT_TYPE, "application/yaml")], yaml)
}

/// What a reload did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Applied {
    /// Generation now active.
    generation: u64,
    /// SHA-256 of the active YAML.
    sha256: String,
    /// `unchanged`, `flows` (flow tables swapped live) or `restart` (engine restarted).
    change: &'static str,
    /// For a restart: the YAML path of the first change that required it.
    restart_reason: Option<String>,
    /// For a restart: milliseconds from stopping the old engine to the new one receiving.
    restart_ms: Option<f64>,
}

impl Applied {
    /// `active` as it is now, after a change of kind `change` (no restart).
    fn now(active: &ActiveConfig, change: &'static str) -> Self {
        Self {
            generation: active.generation,
            sha256: active.sha256.clone(),
            change,
            restart_reason: None,
            restart_ms: None,
        }
    }
}

/// Validates and applies a new config (YAML body; needs the token when one is set).
#[utoipa::path(put, path = "/api/v1/config", tag = "config", request_body(content = String, content_type = "application/yaml"), responses(
    (status = 200, body = Applied),
    (status = 401, body = super::error::ApiErrorBody),
    (status = 422, body = super::error::ApiErrorBody, description = "invalid config (every error with its YAML path), or one that failed to start; the previous config runs"),
    (status = 500, body = super::error::ApiErrorBody, description = "neither the new nor the previous config could start")
))]
pub(crate) async fn put_config(State(state): State<Arc<AdminState>>, body: String) -> Result<Json<Applied>, ApiError> {
    blocking(move || apply(&state, body)).await
}

/// A restart joins threads and allocates pools: keep it off the async workers.
async fn blocking(
    work: impl FnOnce() -> Result<Applied, ApiError> + Send + 'static,
) -> Result<Json<Applied>, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::task_failed("the reload task", e))?.map(Json)
}

/// Re-reads the config file the gateway was started with and applies it.
#[utoipa::path(post, path = "/api/v1/config/reload", tag = "config", responses(
    (status = 200, body = Applied),
    (status = 400, body = super::error::ApiErrorBody, description = "the gateway runs its embedded config: there is no file"),
    (status = 422, body = super::error::ApiErrorBody),
    (status = 500, body = super::error::ApiErrorBody)
))]
pub(crate) async fn reload_config(State(state): State<Arc<AdminState>>) -> Result<Json<Applied>, ApiError> {
    blocking(move || reload_from_file(&state)).await
}

/// Re-reads `--config` and applies it (the reload endpoint and SIGHUP).
pub(crate) fn reload_from_file(state: &AdminState) -> Result<Applied, ApiError> {
    let (yaml, _) = read_config_file(state)?;
    apply(state, yaml)
}

/// The file watcher's reload: applies `--config` only when its text is not
/// what a reload last read, so an edit that a SIGHUP or the reload endpoint
/// already applied or refused is neither applied nor counted twice.
pub(crate) fn reload_if_changed(state: &AdminState) -> Option<Result<Applied, ApiError>> {
    match read_config_file(state) {
        Ok((yaml, true)) => Some(apply(state, yaml)),
        Ok((_, false)) => None,
        Err(e) => Some(Err(e)),
    }
}

/// `--config`'s text, and whether it differs from what a reload last read.
fn read_config_file(state: &AdminState) -> Result<(String, bool), ApiError> {
    let path = state.config_path.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "the gateway runs its embedded default config: there is no file to reload; use PUT /api/v1/config",
            None,
        )
    })?;
    let yaml = daqiri::config::read_text(path).map_err(|e| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("cannot read {}: {e}", path.display()), None)
    })?;
    let mut last = state.file_text.lock().unwrap_or_else(|e| e.into_inner());
    let fresh = last.as_deref() != Some(yaml.as_str());
    *last = Some(yaml.clone());
    Ok((yaml, fresh))
}

/// Validates and applies `yaml`; counts the outcome.
pub(crate) fn apply(state: &AdminState, yaml: String) -> Result<Applied, ApiError> {
    let result = try_apply(state, yaml);
    let counter = if result.is_ok() { &state.reloads.applied } else { &state.reloads.failed };
    counter.fetch_add(1, Relaxed);
    match &result {
        Ok(applied) => tracing::info!(generation = applied.generation, change = applied.change, "config applied"),
        Err(err) => tracing::warn!("config refused: {}", err.reason()),
    }
    result
}

/// Marks a config change under way (`reloading` in the status) until dropped.
struct Reloading<'a>(&'a std::sync::atomic::AtomicBool);

impl<'a> Reloading<'a> {
    fn start(flag: &'a std::sync::atomic::AtomicBool) -> Self {
        flag.store(true, std::sync::atomic::Ordering::Release);
        Self(flag)
    }
}

impl Drop for Reloading<'_> {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Makes `yaml` the active config, one generation on.
fn activate(state: &AdminState, active: &ActiveConfig, yaml: String) -> Arc<ActiveConfig> {
    let next = Arc::new(ActiveConfig::new(yaml, active.generation + 1));
    state.active.store(Arc::clone(&next));
    next
}

fn try_apply(state: &AdminState, yaml: String) -> Result<Applied, ApiError> {
    // One change at a time; readers keep the last snapshot meanwhile.
    let _serial = state.applying.lock().unwrap_or_else(|e| e.into_inner());
    let _reloading = Reloading::start(&state.reloading);
    let active = state.active.load_full();
    let engine = state.live.get();
    if yaml == active.yaml && engine.is_some() {
        return Ok(Applied::now(&active, "unchanged"));
    }
    let valid = crate::config_text::validate(&yaml).map_err(|report| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "the config is invalid; the running config is unchanged", None)
            .with_findings(report.diagnostics)
    })?;
    let change = match &engine {
        Some(engine) => engine.reload_change(&valid),
        None => ReloadChange::Restart { path: "the engine (none was running)".to_owned() },
    };
    let label = change.as_str();
    let reason = match change {
        ReloadChange::Unchanged => {
            // Only the text differs (comments, layout): keep it, touch nothing.
            return Ok(Applied::now(&activate(state, &active, yaml), label));
        }
        ReloadChange::FlowsOnly => {
            let engine = engine.expect("a flow-only change has a running engine");
            engine.reload_flows(valid).map_err(ApiError::flow_reload_refused)?;
            return Ok(Applied::now(&activate(state, &active, yaml), label));
        }
        ReloadChange::Restart { path } => path,
    };
    tracing::info!("restarting the engine on the new config ({reason} changed)");
    let runtime_flows = engine.as_deref().map(super::flows::runtime_flows_of).unwrap_or_default();
    // Consumes our handle on the engine: the restart waits for every holder to let go.
    let previous = engine.map(|engine| (*engine.config()).clone());
    let restart = state.live.restart(valid, previous).map_err(|e| {
        let answer = ApiError::restart_failed(&e);
        if answer.status == StatusCode::INTERNAL_SERVER_ERROR {
            state.active.store(Arc::new(ActiveConfig { engine_error: Some(e.to_string()), ..(*active).clone() }));
        }
        answer
    })?;
    if let Some(engine) = state.live.get() {
        super::flows::restore_runtime_flows(&engine, runtime_flows);
        state.captures.follow(&engine);
    }
    state.reloads.restarts.fetch_add(1, Relaxed);
    let active = activate(state, &active, yaml);
    Ok(Applied {
        restart_reason: Some(reason),
        restart_ms: Some(restart.window.as_secs_f64() * 1e3),
        ..Applied::now(&active, label)
    })
}

/// Stops the engine and waits for a new config (`run --wait-for-config`
/// when its file disappears: no port is left on this node).
pub(crate) fn unload(state: &AdminState, why: &str) {
    let _serial = state.applying.lock().unwrap_or_else(|e| e.into_inner());
    if state.live.stop() {
        tracing::warn!("{why}: engine stopped; waiting for a config");
        state.reloads.applied.fetch_add(1, Relaxed);
        activate(state, &state.active.load(), String::new());
    }
}
