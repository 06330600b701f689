//! Settings of the gateway's own threads that follow the running config:
//! the log level (`log_level`, `debug`) and the core of the control threads
//! (`master_core`: the status loop, the admin API and the application
//! loop). They are applied at start and again whenever a reload changes them.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use daqiri_config::model::{CpuCore, EngineConfig, LogLevel};

/// `master_core` as the control threads should see it; -1 when unset.
static MASTER_CORE: AtomicI64 = AtomicI64::new(-1);

thread_local! {
    /// The core this thread last pinned itself to; -1 when it never did.
    static PINNED: Cell<i64> = const { Cell::new(-1) };
}

/// The keys these settings come from, as last applied: an unchanged config
/// costs a comparison, and the log filter is built only when they change.
#[derive(Debug, Default)]
pub(crate) struct ControlSettings {
    applied: Option<(Option<LogLevel>, bool, Option<CpuCore>)>,
}

impl ControlSettings {
    /// Applies the log filter and `master_core` of `config` if they changed.
    pub(crate) fn follow(&mut self, config: &EngineConfig) {
        let keys = (config.log_level, config.debug, config.master_core);
        if self.applied == Some(keys) {
            return;
        }
        crate::logging::apply(&config.log_filter());
        MASTER_CORE.store(config.master_core.map_or(-1, |c| i64::from(c.0)), Ordering::Relaxed);
        self.applied = Some(keys);
        pin_control_thread();
    }
}

/// Pins the calling control thread to `master_core` if that changed since
/// its last call. Cheap enough for every loop turn: one atomic load.
pub(crate) fn pin_control_thread() {
    let wanted = MASTER_CORE.load(Ordering::Relaxed);
    if wanted < 0 || PINNED.get() == wanted {
        return;
    }
    PINNED.set(wanted);
    if !core_affinity::set_for_current(core_affinity::CoreId { id: wanted as usize }) {
        tracing::warn!(
            core = wanted,
            "cannot pin a control thread to master_core {wanted} (this machine has {} cores)",
            daqiri::preflight::available_cores()
        );
    }
}
