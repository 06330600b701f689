//! The admin API: health, status, stats and the active config over HTTP,
//! with an OpenAPI document generated from the same route table
//! (utoipa-axum), so the two cannot drift apart.
//!
//! It runs on its own small tokio runtime beside the engine's worker threads
//! and reads engine snapshots only: polling it does not touch the data path.

mod admission;
mod auth;
mod body_deadline;
mod captures;
mod config;
mod error;
mod flows;
mod health;
mod listener;
mod lobby;
mod metrics;
mod rates;
mod state;
mod stats;
mod status;
mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use daqiri::Engine;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) use config::{reload_from_file, reload_if_changed, unload};
pub(crate) use error::ApiError;
pub(crate) use state::{ActiveConfig, AdminState};
pub(crate) use stats::ReorderStats;
pub(crate) use tokens::Tokens;

use crate::live::LiveEngine;

#[derive(OpenApi)]
#[openapi(info(
    title = "daqiri-gateway admin API",
    description = "Health, status, statistics and configuration of a running gateway."
))]
struct ApiDoc;

/// The routes and their OpenAPI document, built together.
pub(crate) fn router(state: Arc<AdminState>) -> (Router, utoipa::openapi::OpenApi) {
    let (router, api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(status::status))
        .routes(routes!(stats::stats))
        .routes(routes!(config::get_config, config::put_config))
        .routes(routes!(config::reload_config))
        .routes(routes!(metrics::metrics))
        .routes(routes!(flows::list_flows, flows::add_flow))
        .routes(routes!(flows::delete_flow))
        .routes(routes!(captures::start_capture, captures::list_captures))
        .routes(routes!(captures::get_capture, captures::stop_capture))
        .routes(routes!(captures::download_capture))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), auth::require_token))
        .with_state(state)
        .split_for_parts();
    let doc = api.clone();
    let router = router
        .route("/api/v1/openapi.json", axum::routing::get(move || async move { axum::Json(doc) }))
        .fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                format!("no route {method} {}; the API is described at /api/v1/openapi.json", uri.path()),
                None,
            )
        })
        .layer(axum::middleware::from_fn(error::json_errors))
        .layer(axum::middleware::map_request(body_deadline::with_deadline));
    (router, api)
}

/// The admin API over an engine started on `config`, served by no socket:
/// the route tests and the fuzz harness send requests through the router.
pub(crate) fn in_process(
    config: &str,
    capture_dir: std::path::PathBuf,
    capture_free_space_floor: u64,
    tokens: Tokens,
) -> anyhow::Result<(Router, utoipa::openapi::OpenApi, Arc<AdminState>)> {
    let live = LiveEngine::new(Engine::from_yaml(config)?);
    let captures = crate::capture::CaptureManager::new(
        live.get().as_deref(),
        capture_dir,
        capture_free_space_floor,
        crate::capture::CaptureLimits::default(),
        crate::capture::S3Settings::default(),
    )?;
    let hub = crate::subscriptions::Hub::new(None, crate::subscriptions::DEFAULT_BUDGET_PERCENT, false);
    let state = AdminState::new(live, config.to_owned(), None, (captures, hub), tokens)?;
    let (router, api) = router(Arc::clone(&state));
    Ok((router, api, state))
}

/// Threads for blocking work (reloads, flow changes, capture stops, file
/// reads): all started with the server, so a request never needs a new one.
const BLOCKING_THREADS: usize = 8;

/// Starts every blocking thread at once: each of as many tasks waits until
/// all have started, so none is reused before the last is made.
fn start_blocking_threads(runtime: &tokio::runtime::Runtime) {
    let started = Arc::new(std::sync::Barrier::new(BLOCKING_THREADS));
    let tasks: Vec<_> = (0..BLOCKING_THREADS)
        .map(|_| {
            let started = Arc::clone(&started);
            runtime.spawn_blocking(move || {
                started.wait();
            })
        })
        .collect();
    runtime.block_on(async {
        for task in tasks {
            let _ = task.await;
        }
    });
}

/// A running admin server; dropping it stops the server.
#[derive(Debug)]
pub(crate) struct AdminServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Binds `addr` now (so a busy port fails the start) and serves in the background.
pub(crate) fn serve(addr: SocketAddr, state: Arc<AdminState>) -> anyhow::Result<AdminServer> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        // Tokio starts a blocking thread when a task needs one and panics when
        // the OS refuses it (a pids limit): so all are started now, and kept.
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(Duration::from_secs(1 << 40))
        .thread_name("admin-api")
        // Control threads live on master_core, and follow it when a reload moves it.
        .on_thread_start(crate::control::pin_control_thread)
        .on_thread_unpark(crate::control::pin_control_thread)
        .enable_all()
        .build()
        .context("cannot start the admin API runtime")?;
    start_blocking_threads(&runtime);
    let listener = runtime
        .block_on(async { listener::bind(addr) })
        .with_context(|| format!("cannot listen on --admin-addr {addr} (in use? pick another port)"))?;
    let addr = listener.local_addr()?;
    let tokens = state.tokens.clone();
    let (router, _) = router(state);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("admin-api".into()).spawn(move || {
        crate::control::pin_control_thread();
        runtime.block_on(listener::serve(listener, router, tokens, admission::Limits::default(), stopped));
    })?;
    tracing::info!("admin API on http://{addr}");
    Ok(AdminServer { stop: Some(stop), thread: Some(thread) })
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests;
