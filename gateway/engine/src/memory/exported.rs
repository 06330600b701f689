//! A region's memory handed to another process (a consumer of the gateway's bursts).

/// A region's memory as another process maps it.
#[derive(Debug)]
pub(crate) struct Exported {
    /// A descriptor of it: host memory that maps only for reading, or GPU
    /// memory to import through CUDA.
    pub(crate) fd: std::os::fd::OwnedFd,
    /// Bytes to map.
    pub(crate) len: usize,
    /// The GPU (by UUID) whose memory it is; `None` for host memory.
    pub(crate) gpu: Option<String>,
}
