//! A packet as a DLPack capsule (`__dlpack__`): a one-dimensional uint8
//! tensor over its bytes where they lie, host or GPU memory, so that
//! `torch.from_dlpack`, `cupy.from_dlpack` or `numpy.from_dlpack` read it
//! in place. The structs are dlpark's (the DLPack C ABI); the capsule is
//! made here because dlpark's Python side pins another PyO3.
//!
//! The tensor keeps its packet (and so its burst) alive and counts as an
//! export of the burst until its consumer frees it, as a buffer view does.

use std::ffi::{CStr, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLTensor};
use pyo3::prelude::*;
use pyo3::{Py, ffi};

/// The capsule's name while unconsumed; a consumer renames it when it takes it.
const NAME: &CStr = c"dltensor";

/// Where a packet's bytes are, as DLPack names devices.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    /// `None` for host memory, else the CUDA device (ordinal in this process).
    pub(crate) gpu: Option<usize>,
}

impl Place {
    /// `(device type, device id)`, as `__dlpack_device__` answers.
    pub(crate) fn device(&self) -> (i32, i32) {
        match self.gpu {
            None => (DLDeviceType::CPU.0 as i32, 0),
            Some(ordinal) => (DLDeviceType::CUDA.0 as i32, ordinal as i32),
        }
    }
}

/// What the tensor owns until its consumer frees it.
struct Held {
    shape: [i64; 1],
    strides: [i64; 1],
    /// The packet, keeping its burst unreleased.
    _packet: Py<PyAny>,
    exports: Arc<AtomicUsize>,
}

/// A new capsule over `place`, owning a reference to `packet`; `exports`
/// counts it until the tensor is freed.
pub(crate) fn capsule(
    py: Python<'_>,
    place: Place,
    packet: Py<PyAny>,
    exports: &Arc<AtomicUsize>,
) -> PyResult<Py<PyAny>> {
    let held =
        Box::new(Held { shape: [place.len as i64], strides: [1], _packet: packet, exports: Arc::clone(exports) });
    let (kind, id) = place.device();
    let held = Box::into_raw(held);
    let tensor = Box::into_raw(Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data: place.ptr as *mut c_void,
            device: DLDevice { device_type: DLDeviceType(kind as u32), device_id: id },
            ndim: 1,
            dtype: DLDataType { code: DLDataTypeCode::UINT, bits: 8, lanes: 1 },
            // SAFETY: `held` lives until the deleter frees it with the tensor.
            shape: unsafe { (*held).shape.as_mut_ptr() },
            // SAFETY: as above.
            strides: unsafe { (*held).strides.as_mut_ptr() },
            byte_offset: 0,
        },
        manager_ctx: held.cast(),
        deleter: Some(delete_tensor),
    }));
    exports.fetch_add(1, Ordering::AcqRel);
    // SAFETY: a capsule over the tensor just made; `free_unconsumed` frees
    // it where no consumer took it.
    let capsule = unsafe { ffi::PyCapsule_New(tensor.cast(), NAME.as_ptr(), Some(free_unconsumed)) };
    if capsule.is_null() {
        // SAFETY: the tensor is still ours: no capsule holds it.
        unsafe { delete_tensor(tensor) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, owned from here.
    Ok(unsafe { Py::from_owned_ptr(py, capsule) })
}

/// The tensor's deleter: frees it and what it holds, and counts the export gone.
unsafe extern "C" fn delete_tensor(tensor: *mut DLManagedTensor) {
    // SAFETY: DLPack calls the deleter once, with the tensor `capsule` made.
    let tensor = unsafe { Box::from_raw(tensor) };
    // SAFETY: the context `capsule` boxed for this tensor.
    let held = unsafe { Box::from_raw(tensor.manager_ctx.cast::<Held>()) };
    held.exports.fetch_sub(1, Ordering::AcqRel);
    // A consumer may free the tensor on a thread of its own: let go of the
    // packet with the interpreter attached.
    Python::attach(|_| drop(held));
}

/// The capsule's destructor: frees the tensor only where no consumer took
/// it (a consumer renames the capsule and calls the deleter itself).
unsafe extern "C" fn free_unconsumed(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls this with the dying capsule.
    if unsafe { ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) } == 1 {
        // SAFETY: an unconsumed capsule still holds our tensor.
        let tensor = unsafe { ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) };
        // SAFETY: made by `capsule`, never deleted: nobody consumed it.
        unsafe { delete_tensor(tensor.cast()) };
    }
}
