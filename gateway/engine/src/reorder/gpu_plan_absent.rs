//! `gpu_plan` in a build without CUDA: no GPU plan can exist (`support`
//! refuses `reorder_type: gpu` by path first), so the type has no values.

use std::sync::Arc;

use crate::error::{Error, Result, Status};
use crate::memory::{Region, RegionTable};

/// Never built: see the module's note.
#[derive(Debug)]
pub(crate) enum GpuPlan {}

impl GpuPlan {
    /// Refuses: a GPU plan needs a CUDA build.
    pub(crate) fn new(name: &str, _: (&Region, &Region), _slots: u32, _: &Arc<RegionTable>) -> Result<Self> {
        Err(Error::new(
            Status::NotSupported,
            format!("reorder plan \"{name}\" is reorder_type gpu, which needs a CUDA build"),
        ))
    }

    pub(crate) fn ordinal(&self) -> u32 {
        match *self {}
    }
}
