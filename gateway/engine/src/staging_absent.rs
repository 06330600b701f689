//! `staging` in a build without CUDA: no `device` region exists, so no queue
//! stages and nothing is copied.

use crate::burst::Burst;
use crate::direction::Direction;
use crate::error::Result;

/// Never started.
#[derive(Debug)]
pub(crate) struct QueueCopier;

impl QueueCopier {
    pub(crate) fn new() -> Self {
        Self
    }

    pub(crate) fn start(&self, _gpu: u32, _direction: Direction) -> Result<()> {
        Ok(())
    }

    pub(crate) fn copy(&self, _burst: &mut Burst) -> Result<()> {
        Ok(())
    }
}
