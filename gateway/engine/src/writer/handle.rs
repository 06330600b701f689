//! Asynchronous writes: the burst moves to a writer thread and comes back
//! through the handle, so it cannot be freed while the write is in flight.

use std::thread::JoinHandle;

use super::WriteSummary;
use crate::burst::Burst;
use crate::error::{Error, Result, Status};

/// A write in flight (DAQIRI's `FileWriteHandle`).
#[derive(Debug)]
pub struct FileWriteHandle {
    thread: JoinHandle<(Burst, Result<WriteSummary>)>,
}

impl FileWriteHandle {
    pub(crate) fn spawn(
        burst: Burst,
        write: impl FnOnce(&Burst) -> Result<WriteSummary> + Send + 'static,
    ) -> Result<Self> {
        let thread = std::thread::Builder::new()
            .name("burst-writer".into())
            .spawn(move || {
                let result = write(&burst);
                (burst, result)
            })
            .map_err(|e| Error::io(Status::InternalError, "cannot start a writer thread", e))?;
        Ok(Self { thread })
    }

    /// Whether the write has finished (wait will not block).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the write; returns the burst and what was written.
    pub fn wait(self) -> (Burst, Result<WriteSummary>) {
        match self.thread.join() {
            Ok(done) => done,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}
