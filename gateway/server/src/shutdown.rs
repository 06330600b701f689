//! Ctrl-C / SIGTERM handling: a flag the main loops poll.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

/// Set once SIGINT or SIGTERM arrives.
#[derive(Debug, Clone)]
pub(crate) struct ShutdownFlag(Arc<AtomicBool>);

impl ShutdownFlag {
    /// Installs the handlers.
    pub(crate) fn install() -> anyhow::Result<Self> {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&flag)).context("cannot install signal handlers")?;
        }
        Ok(Self(flag))
    }

    /// Whether shutdown was requested.
    pub(crate) fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Requests shutdown from inside the process.
    pub(crate) fn request(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
