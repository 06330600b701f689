//! DAQIRI's Python S3 writer: `S3WriterConfig`, `S3WriteStatus`, `S3Writer`
//! (`write_raw_objects`, `write_raw_objects_async`, `destroy`) and
//! `S3WriteHandle` (`poll`, `wait`, `destroy`), over libdaqiri's
//! `daqiri_s3_*` calls with the GIL released around them. A failed create,
//! submit or wait raises RuntimeError naming the call, the status and
//! libdaqiri's message, as DAQIRI's binding raises.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::bursts::BurstParams;
use crate::cstr::c_string;
use crate::status::{Status, last_error_text};

type WriterHandle = *mut daqiri_capi::S3WriterHandle;
type WriteHandle = *mut daqiri_capi::S3WriteHandle;

/// Where and how a writer uploads (DAQIRI's defaults).
#[pyclass(module = "daqiri", get_all, set_all)]
#[derive(Debug, Clone)]
pub(crate) struct S3WriterConfig {
    bucket: String,
    region: String,
    endpoint_override: String,
    path_style: bool,
    /// No AWS SDK here to initialise: kept for DAQIRI's programs, no effect.
    aws_sdk_already_initialized: bool,
    max_inflight_uploads: u32,
    max_staged_bytes: u64,
}

#[pymethods]
impl S3WriterConfig {
    #[new]
    fn new() -> Self {
        Self {
            bucket: String::new(),
            region: String::new(),
            endpoint_override: String::new(),
            path_style: false,
            aws_sdk_already_initialized: false,
            max_inflight_uploads: 8,
            max_staged_bytes: 1 << 30,
        }
    }
}

/// Counts of an upload.
#[pyclass(module = "daqiri", get_all, set_all)]
#[derive(Debug, Clone, Default)]
pub(crate) struct S3WriteStatus {
    completed_objects: u32,
    failed_objects: u32,
    bytes_uploaded: u64,
}

#[pymethods]
impl S3WriteStatus {
    #[new]
    fn new() -> Self {
        Self::default()
    }
}

impl From<daqiri_capi::S3WriteStatus> for S3WriteStatus {
    fn from(s: daqiri_capi::S3WriteStatus) -> Self {
        Self {
            completed_objects: s.completed_objects,
            failed_objects: s.failed_objects,
            bytes_uploaded: s.bytes_uploaded,
        }
    }
}

/// RuntimeError for a call that answered `code`.
fn raise(call: &str, code: i32) -> PyResult<()> {
    match Status::of(code) {
        Status::SUCCESS => Ok(()),
        status => Err(PyRuntimeError::new_err(format!("{call} failed: {status:?}: {}", last_error_text()))),
    }
}

/// One submitted upload; destroyed (waiting for it) when dropped.
#[pyclass(module = "daqiri")]
#[derive(Debug)]
pub(crate) struct S3WriteHandle {
    handle: Option<usize>,
}

impl S3WriteHandle {
    fn live(&self) -> PyResult<WriteHandle> {
        self.handle
            .map(|h| h as WriteHandle)
            .ok_or_else(|| PyRuntimeError::new_err("S3 write handle has already been destroyed"))
    }
}

#[pymethods]
impl S3WriteHandle {
    /// (Status, S3WriteStatus): SUCCESS once every object is uploaded, NOT_READY while some are in flight.
    fn poll(&self) -> PyResult<(Status, S3WriteStatus)> {
        let mut status = daqiri_capi::S3WriteStatus::default();
        let code = daqiri_capi::daqiri_gw_s3_write_poll(self.live()?, &raw mut status);
        Ok((Status::of(code), status.into()))
    }

    /// Waits for every object; raises on a failed one.
    fn wait(&self, py: Python<'_>) -> PyResult<S3WriteStatus> {
        let handle = self.live()? as usize;
        let mut status = daqiri_capi::S3WriteStatus::default();
        let code = py.detach(|| daqiri_capi::daqiri_gw_s3_write_wait(handle as WriteHandle, &raw mut status));
        raise("daqiri_s3_write_wait", code)?;
        Ok(status.into())
    }

    /// Waits if uploads are in flight and releases the handle.
    fn destroy(&mut self, py: Python<'_>) -> Status {
        match self.handle.take() {
            Some(handle) => Status::of(py.detach(|| daqiri_capi::daqiri_gw_s3_write_destroy(handle as WriteHandle))),
            None => Status::SUCCESS,
        }
    }
}

impl Drop for S3WriteHandle {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            daqiri_capi::daqiri_gw_s3_write_destroy(handle as WriteHandle);
        }
    }
}

/// Uploads bursts' packets as S3 objects, `<object_prefix>_<index>`.
#[pyclass(module = "daqiri")]
#[derive(Debug)]
pub(crate) struct S3Writer {
    writer: Option<usize>,
}

impl S3Writer {
    fn live(&self) -> PyResult<usize> {
        self.writer.ok_or_else(|| PyRuntimeError::new_err("S3 writer has already been destroyed"))
    }
}

#[pymethods]
impl S3Writer {
    #[new]
    fn new(py: Python<'_>, config: &S3WriterConfig) -> PyResult<Self> {
        let bucket = c_string("bucket", &config.bucket)?;
        let region = c_string("region", &config.region)?;
        let endpoint = c_string("endpoint_override", &config.endpoint_override)?;
        let (path_style, inflight, staged) = (config.path_style, config.max_inflight_uploads, config.max_staged_bytes);
        let mut writer: usize = 0;
        let code = py.detach(|| {
            let mut made: WriterHandle = std::ptr::null_mut();
            // SAFETY: NUL-terminated strings that live through the call; `made` is a writable out-parameter.
            let code = unsafe {
                daqiri_capi::daqiri_gw_s3_writer_create(
                    bucket.as_ptr(),
                    region.as_ptr(),
                    endpoint.as_ptr(),
                    path_style,
                    inflight,
                    staged,
                    &raw mut made,
                )
            };
            writer = made as usize;
            code
        });
        raise("daqiri_s3_writer_create", code)?;
        Ok(Self { writer: Some(writer) })
    }

    /// Stages the burst's packets (from `packet_data_offset` on) and starts
    /// their uploads; the burst may be freed once this returns.
    #[pyo3(signature = (burst, object_prefix, packet_data_offset = 0))]
    fn write_raw_objects_async(
        &self,
        py: Python<'_>,
        burst: &BurstParams,
        object_prefix: &str,
        packet_data_offset: u64,
    ) -> PyResult<S3WriteHandle> {
        let writer = self.live()?;
        let prefix = c_string("object_prefix", object_prefix)?;
        let burst = burst.handle() as usize;
        let mut handle: usize = 0;
        let code = py.detach(|| {
            let mut made: WriteHandle = std::ptr::null_mut();
            // SAFETY: a NUL-terminated string that lives through the call; `made` is a writable out-parameter.
            let code = unsafe {
                daqiri_capi::daqiri_gw_write_raw_to_s3_objects_async(
                    writer as WriterHandle,
                    burst as *mut daqiri_capi::BurstParams,
                    prefix.as_ptr(),
                    packet_data_offset,
                    &raw mut made,
                )
            };
            handle = made as usize;
            code
        });
        raise("daqiri_write_raw_to_s3_objects_async", code)?;
        Ok(S3WriteHandle { handle: Some(handle) })
    }

    /// Uploads and waits: the counts, or RuntimeError on a failed object.
    #[pyo3(signature = (burst, object_prefix, packet_data_offset = 0))]
    fn write_raw_objects(
        &self,
        py: Python<'_>,
        burst: &BurstParams,
        object_prefix: &str,
        packet_data_offset: u64,
    ) -> PyResult<S3WriteStatus> {
        let mut handle = self.write_raw_objects_async(py, burst, object_prefix, packet_data_offset)?;
        let status = handle.wait(py);
        handle.destroy(py);
        status
    }

    /// Releases the writer; uploads already submitted go on.
    fn destroy(&mut self, py: Python<'_>) -> Status {
        match self.writer.take() {
            Some(writer) => Status::of(py.detach(|| daqiri_capi::daqiri_gw_s3_writer_destroy(writer as WriterHandle))),
            None => Status::SUCCESS,
        }
    }
}

impl Drop for S3Writer {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            daqiri_capi::daqiri_gw_s3_writer_destroy(writer as WriterHandle);
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<S3WriterConfig>()?;
    m.add_class::<S3WriteStatus>()?;
    m.add_class::<S3WriteHandle>()?;
    m.add_class::<S3Writer>()?;
    Ok(())
}
