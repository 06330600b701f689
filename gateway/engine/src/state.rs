//! What an engine shares with its backends' workers and pollers: its memory
//! regions, its ports with their queues, and the stop flag. Backends see this
//! and nothing of [`Engine`](crate::Engine), so `backend/` never imports the
//! engine that owns it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use daqiri_config::ValidConfig;

use crate::burst::EngineId;
use crate::memory::RegionTable;
use crate::port::Port;

/// State shared by the engine handle and its workers.
#[derive(Debug)]
pub(crate) struct EngineState {
    pub(crate) id: EngineId,
    pub(crate) config: arc_swap::ArcSwap<ValidConfig>,
    pub(crate) regions: Arc<RegionTable>,
    pub(crate) ports: Vec<Port>,
    pub(crate) stopping: AtomicBool,
}

impl EngineState {
    /// Whether workers should wind down.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}
