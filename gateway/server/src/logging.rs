//! Log output: human-readable by default, JSON lines with `--log-json`.
//!
//! The level follows the running config's `log_level` (and `debug: true`
//! adds the engine's debug messages), changing with every reload. `RUST_LOG`,
//! when set, takes precedence over both: an operator's explicit choice wins.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// Level when neither `RUST_LOG` nor a config says otherwise.
const DEFAULT_FILTER: &str = "info";

static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

pub(crate) fn init(json: bool) {
    let from_env = EnvFilter::try_from_default_env().ok();
    let follows_config = from_env.is_none();
    let (filter, handle) = reload::Layer::new(from_env.unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER)));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry.with(fmt.json()).init();
    } else {
        registry.with(fmt).init();
    }
    if follows_config {
        let _ = FILTER.set(handle);
    }
}

/// Applies `filter` unless `RUST_LOG` governs the log.
pub(crate) fn apply(filter: &str) {
    if let Some(handle) = FILTER.get()
        && let Err(e) = handle.modify(|f| *f = EnvFilter::new(filter))
    {
        tracing::warn!("cannot change the log level to {filter}: {e}");
    }
}
