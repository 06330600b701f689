//! The GPU side of a `reorder_type: gpu` plan: its kernels, the GPU they
//! run on and the stream its batches use. What a batch does on the GPU
//! is [`super::on_gpu`].

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::CudaStream;

use crate::error::{Error, Result, Status};
use crate::gpu::GpuReorder;
use crate::memory::{Region, RegionTable};

/// The kernels of one GPU plan and the stream its batches run on.
#[derive(Debug)]
pub(crate) struct GpuPlan {
    /// Locked by the queue's worker at each launch, and by the application
    /// when it sets the stream.
    kernels: Mutex<GpuReorder>,
    ordinal: u32,
    /// Host code reads the output: deliver only once the kernel is done.
    pub(super) host_output: bool,
    pub(super) regions: Arc<RegionTable>,
}

impl GpuPlan {
    /// The GPU side of plan `name`, reading packets from `source` and
    /// writing `output`, batches of up to `slots` packets.
    pub(crate) fn new(
        name: &str,
        (source, output): (&Region, &Region),
        slots: u32,
        regions: &Arc<RegionTable>,
    ) -> Result<Self> {
        // The GPU that holds either side runs the plan; pinned memory is
        // mapped into every GPU, so two pinned sides run on GPU 0.
        let ordinal = output.backing().gpu().or(source.backing().gpu()).unwrap_or(0);
        if let Some(other) = source.backing().gpu()
            && other != ordinal
        {
            return Err(Error::new(
                Status::NotSupported,
                format!(
                    "reorder plan \"{name}\": packets land on GPU {other} (region \"{}\") but the output is on GPU {ordinal} (region \"{}\"); put both on one GPU",
                    source.name(),
                    output.name()
                ),
            ));
        }
        let in_plan = |e: Error| Error::new(e.status, format!("reorder plan \"{name}\": {}", e.message));
        let mut kernels = GpuReorder::new(ordinal).map_err(in_plan)?;
        kernels.reserve(slots as usize).map_err(in_plan)?;
        Ok(Self {
            kernels: Mutex::new(kernels),
            ordinal,
            host_output: output.backing().host_base().is_some(),
            regions: Arc::clone(regions),
        })
    }

    /// The GPU the kernels run on.
    pub(crate) fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Runs later batches on `stream` (DAQIRI's `set_reorder_cuda_stream`).
    pub(crate) fn set_stream(&self, stream: Arc<CudaStream>) -> Result<()> {
        self.kernels().set_stream(stream)
    }

    pub(super) fn kernels(&self) -> MutexGuard<'_, GpuReorder> {
        self.kernels.lock().unwrap_or_else(|e| e.into_inner())
    }
}
