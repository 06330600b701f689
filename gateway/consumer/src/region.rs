//! One of the gateway's regions as this process reads it: host memory
//! mapped read-only, or (with the `cuda` feature) GPU memory imported and
//! mapped read-only on its GPU.

use std::os::fd::OwnedFd;

use crate::error::Error;
use crate::mapped::Mapped;
use crate::protocol::RegionShape;

/// Where a packet's segment lies, as this process reads it.
#[derive(Debug, Clone, Copy)]
pub enum Memory<'b> {
    /// In host memory: its bytes, read in place.
    Host(&'b [u8]),
    /// In GPU memory: where kernels on this process's GPU read it.
    #[cfg(feature = "cuda")]
    Gpu(crate::gpu::GpuSegment<'b>),
}

impl<'b> Memory<'b> {
    /// Its bytes.
    pub fn len(&self) -> usize {
        match self {
            Memory::Host(bytes) => bytes.len(),
            #[cfg(feature = "cuda")]
            Memory::Gpu(segment) => segment.len(),
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it lies in GPU memory.
    pub fn is_gpu(&self) -> bool {
        !matches!(self, Memory::Host(_))
    }

    /// Its bytes on the host: in place, or copied from GPU memory (for
    /// checks and tools; kernels read GPU memory in place).
    pub fn to_host(self) -> Result<std::borrow::Cow<'b, [u8]>, Error> {
        match self {
            Memory::Host(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
            #[cfg(feature = "cuda")]
            Memory::Gpu(segment) => Ok(std::borrow::Cow::Owned(segment.to_host()?)),
        }
    }
}

/// A region's memory in this process.
#[derive(Debug)]
pub(crate) enum Region {
    Host(Mapped),
    #[cfg(feature = "cuda")]
    Gpu(crate::gpu::Imported),
}

impl Region {
    /// Maps `shape`'s memory from `fd`.
    pub(crate) fn open(shape: &RegionShape, fd: &OwnedFd) -> Result<Self, Error> {
        let len = usize::try_from(shape.len).map_err(|_| Error::Protocol(format!("region of {} bytes", shape.len)))?;
        match &shape.gpu {
            None => Ok(Region::Host(Mapped::new(fd, len, false)?)),
            #[cfg(feature = "cuda")]
            Some(uuid) => Ok(Region::Gpu(crate::gpu::Imported::open(fd, len, uuid)?)),
            #[cfg(not(feature = "cuda"))]
            Some(uuid) => Err(Error::Protocol(format!(
                "region \"{}\" is GPU memory on {uuid}, and this client was built without CUDA (daqiri-consumer's cuda feature)",
                shape.name
            ))),
        }
    }

    /// `len` bytes at `offset`; `None` where the gateway named bytes outside
    /// what it mapped.
    pub(crate) fn memory(&self, offset: u64, len: u32) -> Option<Memory<'_>> {
        match self {
            Region::Host(map) => {
                let start = usize::try_from(offset).ok()?;
                let end = start.checked_add(len as usize)?;
                if end > map.len() {
                    return None;
                }
                // SAFETY: inside the read-only mapping, which lives as long as `self`.
                Some(Memory::Host(unsafe { std::slice::from_raw_parts(map.base().as_ptr().add(start), end - start) }))
            }
            #[cfg(feature = "cuda")]
            Region::Gpu(imported) => imported.segment(offset, len).map(Memory::Gpu),
        }
    }
}
