//! The running engine behind a handle that a config reload can replace.
//!
//! A change beyond RX flows (queues, regions, interfaces, global settings)
//! restarts the engine: the old one stops and hands its sockets and memory
//! back before the new one opens them, so a pool sized to the host's
//! hugepages never needs twice the memory. While that happens the handle is
//! empty and readers report "restarting". Packets the old engine had already
//! delivered are drained by the application before it moves on; packets that
//! arrive while no socket is bound are lost (the window is measured and
//! reported by [`Restart`]).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use daqiri::Engine;
use daqiri::preflight::MemoryNeeds;
use daqiri_config::ValidConfig;

/// How long a restart waits for the application to drain the old engine.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The engine the gateway runs now, replaceable as a whole.
#[derive(Debug)]
pub(crate) struct LiveEngine {
    current: RwLock<Option<Arc<Engine>>>,
}

/// How a restart went.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Restart {
    /// From stopping the old engine to the new one receiving.
    pub window: Duration,
}

/// Why a restart did not install the new config.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RestartError {
    /// This host cannot give the new config its memory; the running engine was not touched.
    #[error("the new config cannot start here ({0}); the running config is unchanged")]
    Refused(daqiri::Error),
    /// The new config failed to start; the previous one runs again.
    #[error("the new config could not start ({0}); the previous config runs again")]
    RolledBack(daqiri::Error),
    /// Neither config could start: the gateway receives nothing until a reload succeeds.
    #[error(
        "the new config could not start ({new}) and the previous one could not start again ({old}); \
         no engine runs until a config is applied"
    )]
    Down { new: daqiri::Error, old: daqiri::Error },
    /// No engine ran before and the config failed to start.
    #[error("the config could not start ({0}); no engine runs until a config is applied")]
    NotStarted(daqiri::Error),
}

impl RestartError {
    /// The status the engine gave for the config that was asked for.
    pub(crate) fn engine_status(&self) -> daqiri::Status {
        match self {
            RestartError::Refused(new)
            | RestartError::RolledBack(new)
            | RestartError::Down { new, .. }
            | RestartError::NotStarted(new) => new.status,
        }
    }
}

impl LiveEngine {
    pub(crate) fn new(engine: Engine) -> Arc<Self> {
        Arc::new(Self { current: RwLock::new(Some(Arc::new(engine))) })
    }

    /// A handle with no engine yet; [`start`](Self::start) installs one.
    pub(crate) fn empty() -> Arc<Self> {
        Arc::new(Self { current: RwLock::new(None) })
    }

    /// The running engine; `None` while it restarts (or after a failed restart).
    pub(crate) fn get(&self) -> Option<Arc<Engine>> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops the running engine, if any, and starts `next` in its place; when
    /// `next` cannot start, starts `previous` again. A config this host has not
    /// the memory for is refused first, leaving the running engine as it is.
    /// The caller serialises restarts.
    pub(crate) fn restart(&self, next: ValidConfig, previous: Option<ValidConfig>) -> Result<Restart, RestartError> {
        // Refused before the old engine stops: counting what it frees, a
        // config this host cannot hold would leave the gateway with nothing.
        // Regions consumers were handed may stay mapped in them, and so are
        // not counted as freed.
        let running = self.get();
        let shared = running.as_ref().map(|engine| engine.memory_shared()).unwrap_or_default();
        let freed =
            previous.as_ref().filter(|_| running.is_some()).map(MemoryNeeds::of).unwrap_or_default().less(&shared);
        drop(running);
        daqiri::preflight::check_memory(&next, freed).map_err(|mut e| {
            if !shared.is_empty() {
                e.message.push_str(&format!(
                    " (the running engine's regions handed to consumers, {} MiB, are not counted as freed: a consumer may keep them mapped)",
                    (shared.host + shared.huge + shared.device.values().sum::<u64>()) >> 20
                ));
            }
            RestartError::Refused(e)
        })?;
        let started = Instant::now();
        self.stop();
        let new = match Engine::new(next) {
            Ok(engine) => {
                self.install(engine);
                return Ok(Restart { window: started.elapsed() });
            }
            Err(new) => new,
        };
        let Some(previous) = previous else { return Err(RestartError::NotStarted(new)) };
        match Engine::new(previous) {
            Ok(engine) => {
                self.install(engine);
                Err(RestartError::RolledBack(new))
            }
            Err(old) => Err(RestartError::Down { new, old }),
        }
    }

    fn install(&self, engine: Engine) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(engine));
    }

    /// Stops the running engine and lets it go (no config left); `false` when none ran.
    pub(crate) fn stop(&self) -> bool {
        let old = self.current.write().unwrap_or_else(|e| e.into_inner()).take();
        let Some(old) = old else { return false };
        old.shutdown();
        release(old);
        daqiri::give_back_freed_heap();
        true
    }

    /// Stops the running engine for good (gateway exit); it stays readable.
    pub(crate) fn shutdown(&self) {
        if let Some(engine) = self.get() {
            engine.shutdown();
        }
    }
}

/// Waits until the application has drained and let go of a stopped engine,
/// so its memory is free before the next one allocates.
fn release(old: Arc<Engine>) {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while Arc::strong_count(&old) > 1 {
        if Instant::now() >= deadline {
            tracing::warn!(
                "the previous engine is still held after {DRAIN_TIMEOUT:?}; its memory is freed when released"
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
