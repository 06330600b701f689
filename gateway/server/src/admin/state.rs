//! What every handler reads: the running engine, the active config, the
//! counters, the captures and the tokens.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use daqiri::Engine;

use super::error::ApiError;
use super::rates::RateSampler;
use super::tokens::Tokens;
use crate::capture::CaptureManager;
use crate::live::LiveEngine;
use crate::subscriptions::Hub;
use crate::telemetry::{ReloadCounters, Telemetry};

/// Everything the handlers read.
#[derive(Debug)]
pub(crate) struct AdminState {
    pub live: Arc<LiveEngine>,
    pub started: Instant,
    /// The active config, as a snapshot readers take without waiting: a
    /// reload replaces it whole once it has applied.
    pub active: arc_swap::ArcSwap<ActiveConfig>,
    /// Held by whoever applies a config, so changes apply one at a time;
    /// never taken by a read.
    pub applying: Mutex<()>,
    /// A config is being applied (validation, a flow swap or a restart).
    pub reloading: std::sync::atomic::AtomicBool,
    /// The file `POST /api/v1/config/reload` and SIGHUP re-read.
    pub config_path: Option<std::path::PathBuf>,
    /// The text a reload last read from it, so that the watcher does not
    /// apply (or count) again an edit a SIGHUP already took.
    pub file_text: Mutex<Option<String>>,
    pub reloads: Arc<ReloadCounters>,
    pub rates: Mutex<RateSampler>,
    pub telemetry: Telemetry,
    pub captures: Arc<CaptureManager>,
    /// Consumers outside the gateway and their subscriptions.
    pub hub: Arc<Hub>,
    /// Bearer tokens for changes and for reads, when set.
    pub tokens: Tokens,
}

impl AdminState {
    pub(crate) fn new(
        live: Arc<LiveEngine>,
        config_yaml: String,
        config_path: Option<std::path::PathBuf>,
        (captures, hub): (Arc<CaptureManager>, Arc<Hub>),
        tokens: Tokens,
    ) -> anyhow::Result<Arc<Self>> {
        let reloads = Arc::new(ReloadCounters::default());
        let rates = Mutex::new(RateSampler::default());
        let telemetry =
            Telemetry::new(Arc::clone(&live), (Arc::clone(&captures), Arc::clone(&hub)), Arc::clone(&reloads))?;
        Ok(Arc::new(Self {
            live,
            started: Instant::now(),
            // Generation 0: waiting for a first config (`run --wait-for-config`).
            active: arc_swap::ArcSwap::from_pointee(ActiveConfig::new(
                config_yaml.clone(),
                u64::from(!config_yaml.is_empty()),
            )),
            applying: Mutex::new(()),
            reloading: std::sync::atomic::AtomicBool::new(false),
            config_path,
            file_text: Mutex::new(None),
            reloads,
            rates,
            telemetry,
            captures,
            hub,
            tokens,
        }))
    }

    /// The running engine, or 503 while a config change restarts it.
    pub(crate) fn engine(&self) -> Result<Arc<Engine>, ApiError> {
        self.live.get().ok_or_else(no_engine)
    }
}

/// 503: no engine runs.
pub(crate) fn no_engine() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "no engine is running: a config change is restarting it (or the last restart failed, see /api/v1/status)",
        None,
    )
}

/// What the engine is doing: `/api/v1/status` says it, `/readyz` judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineState {
    Running,
    /// Shutting down.
    Stopped,
    /// The last config's engine failed to start, and so did the one before.
    Down,
    /// No config yet (`--wait-for-config`).
    Waiting,
    /// A config change is replacing it.
    Restarting,
}

impl EngineState {
    pub(crate) fn of(engine: Option<&Engine>, active: &ActiveConfig) -> Self {
        match engine {
            Some(e) if e.is_shut_down() => Self::Stopped,
            Some(_) => Self::Running,
            None if active.engine_error.is_some() => Self::Down,
            None if active.yaml.is_empty() => Self::Waiting,
            None => Self::Restarting,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
            Self::Down => "down",
            Self::Waiting => "waiting",
            Self::Restarting => "restarting",
        }
    }
}

/// The YAML the engine runs and its generation.
#[derive(Debug, Clone)]
pub(crate) struct ActiveConfig {
    pub yaml: String,
    pub sha256: String,
    pub generation: u64,
    /// Set when a restart left no engine running.
    pub engine_error: Option<String>,
}

impl ActiveConfig {
    pub(super) fn new(yaml: String, generation: u64) -> Self {
        let sha256 = crate::consumer::hex(&<sha2::Sha256 as sha2::Digest>::digest(yaml.as_bytes()));
        Self { yaml, sha256, generation, engine_error: None }
    }
}
