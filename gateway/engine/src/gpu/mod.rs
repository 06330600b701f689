//! CUDA, behind the `cuda` feature: a context per GPU, device and pinned
//! memory for regions, and the reorder kernels.
//!
//! cudarc loads `libcuda` and `libnvrtc` when first asked, so a build with
//! the feature starts on a machine without a GPU; only a config that needs
//! one fails, at init, saying what is missing.

mod by_sequence;
mod context;
mod memory;
mod reorder;
mod shareable;
mod staging;

pub use by_sequence::{SequenceLayout, launch_by_sequence, launch_gather};
pub use context::{bind_thread, borrowed_stream, gpu_count, memory_info, new_stream};
/// The CUDA bindings the GPU types come from, for applications that pass
/// their own streams and events.
pub use cudarc;
pub use memory::{DeviceBuffer, DeviceMemory, PinnedMemory, copy_to_host};
pub use reorder::{GpuReorder, Slots};
pub(crate) use staging::Stager;

use crate::error::{Error, Status};

/// A CUDA failure as an engine error: what was being done, and CUDA's word.
fn cuda_error(doing: impl std::fmt::Display, error: impl std::fmt::Debug) -> Error {
    Error::new(Status::InternalError, format!("{doing}: CUDA error {error:?}"))
}
