//! Settings of the gateway's own threads that follow the running config:
//! the log level (`log_level`, `debug`) and the core of the control threads
//! (`master_core`: the status loop and the admin API). They are applied at
//! start and again whenever a reload changes them.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use daqiri_config::model::EngineConfig;

/// `master_core` as the control threads should see it; -1 when unset.
static MASTER_CORE: AtomicI64 = AtomicI64::new(-1);

thread_local! {
    /// The core this thread last pinned itself to; -1 when it never did.
    static PINNED: Cell<i64> = const { Cell::new(-1) };
}

/// What was last applied, so an unchanged config costs a comparison.
#[derive(Debug, Default)]
pub(crate) struct ControlSettings {
    applied: Option<(String, i64)>,
}

impl ControlSettings {
    /// Applies the log filter and `master_core` of `config` if they changed.
    pub(crate) fn follow(&mut self, config: &EngineConfig) {
        let wanted = (crate::logging::filter_for(config), config.master_core.map_or(-1, |c| i64::from(c.0)));
        if self.applied.as_ref() == Some(&wanted) {
            return;
        }
        crate::logging::apply(&wanted.0);
        MASTER_CORE.store(wanted.1, Ordering::Relaxed);
        self.applied = Some(wanted);
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
