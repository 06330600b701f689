//! The log: stderr, at the config's `log_level` unless `RUST_LOG` says
//! otherwise; installed on the first init or failed call, unless the
//! process has a `tracing` subscriber of its own.

use std::sync::OnceLock;

use daqiri_config::model::EngineConfig;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

static FILTER: OnceLock<Option<reload::Handle<EnvFilter, Registry>>> = OnceLock::new();

/// Installs the log, at info level, unless the process has one.
pub(crate) fn install() -> Option<&'static reload::Handle<EnvFilter, Registry>> {
    let handle = FILTER.get_or_init(|| {
        let from_env = EnvFilter::try_from_default_env().ok();
        let follows_config = from_env.is_none();
        let (filter, handle) = reload::Layer::new(from_env.unwrap_or_else(|| EnvFilter::new("info")));
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        let installed = tracing_subscriber::registry().with(filter).with(fmt).try_init().is_ok();
        (installed && follows_config).then_some(handle)
    });
    handle.as_ref()
}

/// Sets the level from `config`, unless `RUST_LOG` set it.
pub(crate) fn follow(config: &EngineConfig) {
    if let Some(handle) = install() {
        let _ = handle.modify(|f| *f = EnvFilter::new(config.log_filter()));
    }
}
