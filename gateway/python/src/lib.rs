//! The `daqiri_gateway` Python module (PyO3): subscribe to a running
//! gateway's RX queue, flow or reorder plan through its consumer socket,
//! and read bursts in the gateway's memory, mapped read-only. A packet is
//! a read-only buffer, so `numpy.frombuffer(packet, numpy.float32)` views a
//! reorder plan's aggregate in place, without a copy.
//!
//! A packet in the gateway's GPU memory (a `device` region, say a GPU
//! reorder plan's aggregates) is mapped read-only on the same GPU here and
//! read through DLPack: `torch.from_dlpack(packet)` or
//! `cupy.from_dlpack(packet)` view it in place (host packets too).
//!
//! A burst goes back to the gateway when it is released (`release()`, the
//! end of a `with` block) or collected; `release()` while a buffer of it is
//! still exported (a numpy array or a DLPack tensor alive) raises
//! `BufferError`, and a `with` block then leaves it to go back once the
//! last view is gone.

mod dlpack;

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use daqiri_consumer::{Memory, Options, Subscription as Client, Taken, Target, WhenFull};
use dlpack::Place;
use pyo3::exceptions::{PyBufferError, PyConnectionError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::{create_exception, ffi};

create_exception!(
    daqiri_gateway,
    Ended,
    PyConnectionError,
    "The gateway ended the subscription; the message says why."
);
create_exception!(
    daqiri_gateway,
    Refused,
    PyConnectionError,
    "The gateway refused the subscription; the message says why."
);

fn error(e: daqiri_consumer::Error) -> PyErr {
    match e {
        daqiri_consumer::Error::Ended(reason) => Ended::new_err(reason),
        daqiri_consumer::Error::Refused(reason) => Refused::new_err(reason),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// A subscription to one of a gateway's RX queues, flows or reorder plans.
#[pyclass(unsendable, module = "daqiri_gateway")]
struct Subscription {
    client: Client,
}

#[pymethods]
impl Subscription {
    /// Subscribes through the consumer socket at `socket` to `interface`'s
    /// RX queue `queue`, flow `flow` or reorder plan `plan` (one of them;
    /// queue 0 when none is named).
    #[new]
    #[pyo3(signature = (socket, interface, *, queue=None, flow=None, plan=None, slots=256, group=None, hold_back=false, token=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn new(
        py: Python<'_>,
        socket: std::path::PathBuf,
        interface: &str,
        queue: Option<u16>,
        flow: Option<u32>,
        plan: Option<String>,
        slots: u32,
        group: Option<String>,
        hold_back: bool,
        token: Option<String>,
    ) -> PyResult<Self> {
        let target = match (queue, flow, plan) {
            (_, None, None) => Target::queue(interface, queue.unwrap_or(0)),
            (None, Some(flow), None) => Target::flow(interface, flow),
            (None, None, Some(plan)) => Target::plan(interface, &plan),
            _ => return Err(PyValueError::new_err("name one of queue, flow and plan")),
        };
        let when_full = if hold_back { WhenFull::HoldBack } else { WhenFull::Drop };
        let options = Options { slots, group, when_full, token };
        let client = py.detach(|| Client::connect(socket, target, options)).map_err(error)?;
        Ok(Self { client })
    }

    /// The subscription's id, as the gateway's stats list it.
    #[getter]
    fn id(&self) -> u64 {
        self.client.id()
    }

    /// The next burst, waiting up to `timeout` seconds (for ever with
    /// None); None when none came in time. Raises `Ended` once the gateway
    /// ended the subscription and every burst before that was taken.
    #[pyo3(signature = (timeout=None))]
    fn next(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Option<Burst>> {
        let deadline = timeout.map(|t| std::time::Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        let taken = loop {
            // Short waits, so that Ctrl-C (a signal Python handles) is seen.
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let wait = left.map_or(Duration::from_millis(100), |l| l.min(Duration::from_millis(100)));
            let taken = slf.borrow().client.next_taken(Some(wait)).map_err(error)?;
            if taken.is_some() || left.is_some_and(|l| l <= wait) {
                break taken;
            }
            slf.py().check_signals()?;
        };
        Ok(taken.map(|taken| Burst {
            subscription: slf.unbind(),
            taken: Cell::new(Some(taken)),
            exported: Arc::default(),
        }))
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Iterating waits for each burst, until the gateway ends the subscription.
    fn __next__(slf: Bound<'_, Self>) -> PyResult<Option<Burst>> {
        let py = slf.py();
        match Self::next(slf, None) {
            Err(e) if e.is_instance_of::<Ended>(py) => Ok(None),
            other => other,
        }
    }
}

/// One burst: its packets, in the gateway's memory until released.
#[pyclass(unsendable, module = "daqiri_gateway")]
struct Burst {
    subscription: Py<Subscription>,
    /// `None` once released.
    taken: Cell<Option<Taken>>,
    /// Views of its packets alive now (buffers and DLPack tensors; a
    /// tensor may be freed on another thread).
    exported: Arc<AtomicUsize>,
}

impl Burst {
    fn held(&self) -> PyResult<Taken> {
        self.taken.get().ok_or_else(|| PyValueError::new_err("the burst was released"))
    }

    /// Gives the burst back once no buffer of it is exported.
    fn give_back(&self, py: Python<'_>) -> PyResult<()> {
        if self.exported.load(Ordering::Acquire) > 0 {
            return Err(PyBufferError::new_err(
                "a view of this burst is still in use (a numpy array, memoryview or DLPack tensor of one of its packets)",
            ));
        }
        if let Some(taken) = self.taken.take() {
            self.subscription.borrow(py).client.release(taken);
        }
        Ok(())
    }
}

#[pymethods]
impl Burst {
    /// The packets, each a read-only buffer (host memory) and a DLPack
    /// producer (host or GPU memory).
    fn packets(slf: Bound<'_, Self>) -> PyResult<Vec<Packet>> {
        let this = slf.borrow();
        let taken = this.held()?;
        let subscription = this.subscription.borrow(slf.py());
        let packets = subscription
            .client
            .packets_of(&taken)
            .map(|p| Packet {
                burst: slf.clone().unbind(),
                place: p.memory(0).map_or(Place { ptr: 0, len: 0, gpu: None }, place),
                flow_id: p.flow_id(),
                timestamp: p.timestamp(),
                immediate: p.immediate(),
            })
            .collect();
        Ok(packets)
    }

    fn __iter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, pyo3::types::PyIterator>> {
        let packets = Self::packets(slf.clone())?;
        pyo3::types::PyIterator::from_object(&packets.into_pyobject(slf.py())?)
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.held()?.len())
    }

    /// The gateway's port id and RX queue id it came from.
    #[getter]
    fn port_queue(&self) -> PyResult<(u16, u16)> {
        Ok(self.held()?.port_queue())
    }

    /// Its number in the subscription.
    #[getter]
    fn sequence(&self) -> PyResult<u64> {
        Ok(self.held()?.sequence())
    }

    /// Bursts the gateway dropped for this consumer (its ring full) just before it.
    #[getter]
    fn lost_before(&self) -> PyResult<u64> {
        Ok(self.held()?.lost_before())
    }

    /// DAQIRI's burst flags (`REORDERED`, `REORDER_TIMEOUT`: this module's
    /// constants of those names).
    #[getter]
    fn flags(&self) -> PyResult<u32> {
        Ok(self.held()?.flags())
    }

    /// A reorder aggregate's batch id; None for other bursts.
    #[getter]
    fn batch_id(&self) -> PyResult<Option<u64>> {
        Ok(self.held()?.batch_id())
    }

    /// A reorder aggregate's source packets (how many went into it).
    #[getter]
    fn source_packets(&self) -> PyResult<u32> {
        Ok(self.held()?.source_packets())
    }

    /// A reorder aggregate's slots; 0 for other bursts.
    #[getter]
    fn aggregate_slots(&self) -> PyResult<u32> {
        Ok(self.held()?.aggregate_slots())
    }

    /// A reorder aggregate's empty slots, lowest first: their packets never
    /// came, and their bytes are zeros.
    #[getter]
    fn missing_slots(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        Ok(self.subscription.borrow(py).client.missing_slots(&self.held()?))
    }

    /// Gives the burst back to the gateway now.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.give_back(py)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The end of a `with` block releases the burst, or, while a view of
    /// one of its packets is still alive, leaves it to go back with the last.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        if self.exported.load(Ordering::Acquire) == 0 {
            self.give_back(py)?;
        }
        Ok(())
    }
}

impl Drop for Burst {
    fn drop(&mut self) {
        // Collected: no packet (and so no buffer of one) refers to it any more.
        if let Some(taken) = self.taken.take() {
            Python::attach(|py| self.subscription.borrow(py).client.release(taken));
        }
    }
}

/// Where a segment's bytes are, for Python.
fn place(memory: Memory<'_>) -> Place {
    match memory {
        Memory::Host(bytes) => Place { ptr: bytes.as_ptr() as u64, len: bytes.len(), gpu: None },
        Memory::Gpu(segment) => Place { ptr: segment.ptr(), len: segment.len(), gpu: Some(segment.device()) },
    }
}

/// One packet: its bytes in the gateway's memory, read-only: a buffer
/// (host memory) and a DLPack producer (host or GPU memory).
#[pyclass(unsendable, module = "daqiri_gateway")]
struct Packet {
    burst: Py<Burst>,
    place: Place,
    flow_id: Option<u32>,
    timestamp: Option<u64>,
    immediate: Option<u32>,
}

impl Packet {
    /// The burst's export count, once checked that it is still held.
    fn exports(slf: &Bound<'_, Self>) -> PyResult<Arc<AtomicUsize>> {
        let this = slf.borrow();
        let burst = this.burst.borrow(slf.py());
        burst.held()?;
        Ok(Arc::clone(&burst.exported))
    }
}

#[pymethods]
impl Packet {
    fn __len__(&self) -> usize {
        self.place.len
    }

    /// The flow it matched, if any.
    #[getter]
    fn flow_id(&self) -> Option<u32> {
        self.flow_id
    }

    /// Its receive timestamp in nanoseconds, where the NIC stamped it.
    #[getter]
    fn timestamp(&self) -> Option<u64> {
        self.timestamp
    }

    /// Its immediate (RDMA write or SEND with immediate), if any.
    #[getter]
    fn immediate(&self) -> Option<u32> {
        self.immediate
    }

    /// Where it lies: "cpu", or "cuda:N" for GPU memory (N as this process
    /// numbers its GPUs), as PyTorch names devices.
    #[getter]
    fn device(&self) -> String {
        self.place.gpu.map_or_else(|| "cpu".to_owned(), |ordinal| format!("cuda:{ordinal}"))
    }

    /// DLPack: a one-dimensional uint8 tensor over the bytes, in place.
    /// The bytes are complete when the packet is delivered, so any
    /// `stream` may read them at once; no copy is ever made.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: Bound<'_, Self>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (stream, max_version);
        let place = slf.borrow().place;
        if dl_device.is_some_and(|d| d != place.device()) {
            return Err(PyBufferError::new_err(format!(
                "the packet lies on DLPack device {:?}; it is not copied to another",
                place.device()
            )));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err("a packet is only lent in place (copy=True asks for a copy)"));
        }
        let exports = Self::exports(&slf)?;
        dlpack::capsule(slf.py(), place, slf.clone().into_any().unbind(), &exports)
    }

    /// DLPack: `(device type, device id)`: (1, 0) for host memory, (2, N)
    /// for CUDA device N.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.place.device()
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(PyBufferError::new_err("a packet is read-only: it lies in the gateway's memory"));
        }
        let place = slf.borrow().place;
        if place.gpu.is_some() {
            return Err(PyBufferError::new_err(
                "the packet lies in GPU memory, which the CPU cannot read: use torch.from_dlpack(packet) or cupy.from_dlpack(packet)",
            ));
        }
        let exports = Self::exports(&slf)?;
        // SAFETY: `view` is the caller's; the bytes stay mapped and unreleased
        // while the view holds this packet (and so its burst): `release()`
        // refuses while `exported` counts the view.
        let filled = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), place.ptr as *mut _, place.len as ffi::Py_ssize_t, 1, flags)
        };
        if filled != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        exports.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    unsafe fn __releasebuffer__(slf: Bound<'_, Self>, _view: *mut ffi::Py_buffer) {
        let this = slf.borrow();
        let burst = this.burst.borrow(slf.py());
        burst.exported.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The module.
#[pymodule]
fn daqiri_gateway(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Subscription>()?;
    module.add_class::<Burst>()?;
    module.add_class::<Packet>()?;
    module.add("REORDERED", daqiri_consumer::ring::flags::REORDERED)?;
    module.add("REORDER_TIMEOUT", daqiri_consumer::ring::flags::REORDER_TIMEOUT)?;
    module.add("Ended", module.py().get_type::<Ended>())?;
    module.add("Refused", module.py().get_type::<Refused>())?;
    Ok(())
}
