//! The reorder kernels (`reorder.cu`): compiled by NVRTC once per process
//! and GPU, launched one batch at a time on a stream.

#![allow(unsafe_code)]

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};
use daqiri_config::model::{DataTypes, Endianness, InputType, OutputType};

use super::memory::PinnedMemory;
use super::{context, cuda_error};
use crate::error::{Error, Status};
use crate::memory::{DevicePtr, DeviceSlice};
use crate::reorder::convert::output_len;

const SOURCE: &str = include_str!("reorder.cu");
const THREADS: u32 = 256;
/// Threads per block of a reorder launch: a plain copy moves a 16-byte word
/// per thread and does best with smaller blocks (H200, 512 MB aggregates:
/// 91% of a device copy at 128 threads, 64-85% at 256), the conversions do
/// more per word and best at 256 (59-65% at 128, 76-88% at 256).
fn block_threads(types: Option<&DataTypes>) -> u32 {
    if types.is_none() { 128 } else { THREADS }
}
/// Work units (16-byte words or samples) per thread where the slot
/// addresses come from the pinned table: each block first waits for its
/// slot's address across PCIe, so each does enough to hide it. A launch
/// with its addresses by value gives each thread one unit: a batch that
/// small fills the GPU only with more threads.
const UNITS_PER_THREAD: u32 = 4;
/// Input bytes a kernel thread converts at once on the aligned path
/// (`WordConvert::IN_BYTES` in reorder.cu).
fn unit_bytes(types: Option<&DataTypes>) -> usize {
    match types {
        Some(t) if t.input_type == InputType::Int4 && t.output_type == OutputType::Fp16 => 4,
        _ => 16,
    }
}

/// Slot tables in flight per stream before the oldest must have finished.
const TABLES: usize = 4;

/// Slots whose addresses a launch passes by value, as a kernel parameter
/// (`SLOTS_BY_VALUE` in reorder.cu: 8 KB of the 32 KB CUDA 12.1 allows from
/// compute capability 7.0, which every GPU CUDA 13 supports has). Read
/// from pinned memory instead, the addresses cost a batch of 1,024 slots of
/// 8 KiB 7.5 µs where a device copy of its bytes takes 4.0 µs; by value,
/// 4.7 µs (H200, plain copy).
const SLOTS_BY_VALUE: usize = 1024;

/// A launch's slot addresses, by value.
#[repr(C)]
struct SlotsByValue([u64; SLOTS_BY_VALUE]);

impl std::fmt::Debug for SlotsByValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlotsByValue")
    }
}

// SAFETY: plain data, laid out as reorder.cu's `SlotsByValue`.
unsafe impl DeviceRepr for SlotsByValue {}

/// One batch to place: each slot's payload in device-readable memory
/// (`None`: the packet never came, the slot is zeroed), all `in_len` bytes.
#[derive(Debug, Clone, Copy)]
pub struct Slots<'a> {
    /// Per slot, where its payload is.
    pub sources: &'a [Option<DeviceSlice<'a>>],
    /// Payload bytes per slot.
    pub in_len: usize,
}

/// The reorder kernels on one GPU, and the stream they run on.
#[derive(Debug)]
pub struct GpuReorder {
    ctx: Arc<CudaContext>,
    module: Arc<CudaModule>,
    stream: Arc<CudaStream>,
    /// Kernels looked up so far, by name: a plan launches one kernel for
    /// its whole life, so each batch need not ask the driver again.
    functions: Vec<(String, CudaFunction)>,
    /// Slot tables, in flight one per launch of more than [`SLOTS_BY_VALUE`] slots.
    tables: Vec<Table>,
    next_table: usize,
    /// The slot addresses of a smaller launch, copied into the launch itself.
    by_value: Box<SlotsByValue>,
}

impl GpuReorder {
    /// The kernels of GPU `gpu`, on a new stream of its own.
    pub fn new(gpu: u32) -> Result<Self, Error> {
        let ctx = context::context(gpu)?;
        let module = module(gpu, &ctx)?;
        let stream = ctx.new_stream().map_err(|e| cuda_error("creating a stream", e))?;
        let by_value = Box::new(SlotsByValue([0; SLOTS_BY_VALUE]));
        Ok(Self { ctx, module, stream, functions: Vec::new(), tables: Vec::new(), next_table: 0, by_value })
    }

    /// Runs later batches on `stream` (DAQIRI's `set_reorder_cuda_stream`),
    /// so the application can order its own work after them. The stream
    /// must belong to this GPU.
    pub fn set_stream(&mut self, stream: Arc<CudaStream>) -> Result<(), Error> {
        if stream.context().ordinal() != self.ctx.ordinal() {
            return Err(Error::new(
                Status::InvalidParameter,
                format!("the stream is on GPU {}, the plan on GPU {}", stream.context().ordinal(), self.ctx.ordinal()),
            ));
        }
        self.stream = stream;
        Ok(())
    }

    /// The stream batches run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Places `slots` into `out` (slot `s` at byte `s * out_len`),
    /// converting by `types`, asynchronously; the returned event completes
    /// with it.
    pub fn launch(
        &mut self,
        types: Option<&DataTypes>,
        slots: Slots<'_>,
        out: DeviceSlice<'_>,
        out_len: usize,
    ) -> Result<CudaEvent, Error> {
        let needed = match types {
            Some(types) => output_len(types, slots.in_len).ok_or_else(|| {
                Error::invalid(format!(
                    "{} payload bytes are not a whole number of {:?} samples",
                    slots.in_len, types.input_type
                ))
            })?,
            None => slots.in_len,
        };
        let count = slots.sources.len();
        if out_len < needed || out.len() < count * out_len {
            return Err(Error::invalid(format!(
                "{count} slots of {needed} output bytes (every {out_len}) do not fit an output of {} bytes",
                out.len()
            )));
        }
        if let Some(short) = slots.sources.iter().flatten().find(|s| s.len() < slots.in_len) {
            return Err(Error::invalid(format!("a slot's payload has {} bytes, not {}", short.len(), slots.in_len)));
        }
        let function = self.function(types)?;
        let address = |s: &Option<DeviceSlice<'_>>| s.map_or(0, |s| s.ptr().address());
        let table = if count <= SLOTS_BY_VALUE {
            for (entry, source) in self.by_value.0.iter_mut().zip(slots.sources) {
                *entry = address(source);
            }
            None
        } else {
            Some(self.table(&slots.sources.iter().map(address).collect::<Vec<_>>())?)
        };
        // The kernels take an input unit per thread where every address allows.
        let aligned = |address: u64| address.is_multiple_of(16);
        let words = slots.in_len.is_multiple_of(16)
            && out_len.is_multiple_of(16)
            && aligned(out.ptr().address())
            && slots.sources.iter().flatten().all(|s| aligned(s.ptr().address()));
        let units = if words {
            slots.in_len / unit_bytes(types)
        } else {
            types.map_or(slots.in_len, |t| slots.in_len * 8 / t.input_type.bits() as usize)
        };
        let threads = block_threads(types);
        let per_thread = if table.is_some() { UNITS_PER_THREAD } else { 1 };
        let config = LaunchConfig {
            grid_dim: ((units as u32).div_ceil(threads * per_thread).max(1), (count as u32).clamp(1, 65_535), 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let sources = table.map_or(0, |(_, address)| address);
        let args = (&*self.by_value, sources, count as u32, slots.in_len as u32, out.ptr().address(), out_len as u32);
        launch(&self.stream, &function, config, args)?;
        self.launched(table.map(|(at, _)| at))
    }

    /// Copies each `(source, destination, bytes)` on the GPU, all in one
    /// launch, asynchronously; the returned event completes with it. For a
    /// burst whose packets the CPU landed in pinned memory: its buffers are
    /// scattered, so one kernel gathers them where a DMA would need a copy
    /// per packet.
    pub fn gather(&mut self, copies: &[(DevicePtr, DevicePtr, usize)]) -> Result<CudaEvent, Error> {
        let function = self.function_named("gather_copy")?;
        let table: Vec<u64> =
            copies.iter().flat_map(|&(src, dst, len)| [src.address(), dst.address(), len as u64]).collect();
        let (at, table) = self.table(&table)?;
        let longest = copies.iter().map(|c| c.2).max().unwrap_or(0);
        let config = LaunchConfig {
            grid_dim: ((longest as u32 / 16).div_ceil(THREADS).max(1), (copies.len() as u32).clamp(1, 65_535), 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut args = self.stream.launch_builder(&function);
        let count = copies.len() as u32;
        args.arg(&table).arg(&count);
        // SAFETY: the kernel takes (const u64*, u32): `count` triples of
        // source, destination and length, each range inside memory the
        // caller holds until the returned event completes.
        unsafe { args.launch(config) }.map_err(|e| cuda_error("launching a burst copy", e))?;
        self.launched(Some(at))
    }

    /// After a launch that read slot table `at` (if any): marks the table
    /// busy until the launch is done, and returns an event that completes with it.
    fn launched(&mut self, at: Option<usize>) -> Result<CudaEvent, Error> {
        let record = || self.stream.record_event(None).map_err(|e| cuda_error("recording a kernel's event", e));
        if let Some(at) = at {
            self.tables[at].last = Some(record()?);
        }
        record()
    }

    /// Waits until every batch launched so far is placed.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.stream.synchronize().map_err(|e| cuda_error("waiting for reorder kernels", e))
    }

    /// The kernel for `types`, looked up in the module once.
    fn function(&mut self, types: Option<&DataTypes>) -> Result<CudaFunction, Error> {
        self.function_named(&kernel_name("reorder", types))
    }

    fn function_named(&mut self, name: &str) -> Result<CudaFunction, Error> {
        if let Some((_, function)) = self.functions.iter().find(|(n, _)| n == name) {
            return Ok(function.clone());
        }
        let function = self.module.load_function(name).map_err(|e| cuda_error(format!("loading {name}"), e))?;
        self.functions.push((name.to_owned(), function.clone()));
        Ok(function)
    }

    /// Sizes every slot table for launches of up to `entries` slots (or
    /// copies' words) now, so that no launch waits on a table's growth: a
    /// registration of pinned memory takes milliseconds, and giving back an
    /// outgrown table waits for the GPU.
    pub fn reserve(&mut self, entries: usize) -> Result<(), Error> {
        for at in 0..TABLES {
            self.sized(at, entries)?;
        }
        Ok(())
    }

    /// Writes the slot table of the next launch into the next table whose
    /// last launch has finished: its position and device address. The
    /// kernel reads the table from pinned memory across PCIe: a few bytes
    /// per slot, where a copy to device memory first costs a transfer's
    /// latency on every launch (measured: half the rate of 8 MB batches).
    fn table(&mut self, entries: &[u64]) -> Result<(usize, u64), Error> {
        let at = self.next_table;
        self.next_table = (at + 1) % TABLES;
        let table = self.sized(at, entries.len())?;
        for (slot, entry) in table.memory.host_bytes_mut().as_chunks_mut::<8>().0.iter_mut().zip(entries) {
            *slot = entry.to_ne_bytes();
        }
        Ok((at, table.memory.device().address()))
    }

    /// Table `at`, idle and holding at least `entries` entries.
    fn sized(&mut self, at: usize, entries: usize) -> Result<&mut Table, Error> {
        let bytes = (entries * 8).max(8);
        let gpu = self.ctx.ordinal() as u32;
        if self.tables.len() <= at {
            self.tables.push(Table::new(gpu, bytes)?);
        }
        let table = &mut self.tables[at];
        if let Some(event) = table.last.take() {
            event.synchronize().map_err(|e| cuda_error("waiting for an earlier reorder kernel", e))?;
        }
        if table.memory.len() < bytes {
            *table = Table::new(gpu, bytes)?;
        }
        Ok(table)
    }
}

/// One launch's slot table, in pinned memory the GPU reads.
#[derive(Debug)]
struct Table {
    memory: PinnedMemory,
    /// The event of the last launch that used it.
    last: Option<CudaEvent>,
}

impl Table {
    fn new(gpu: u32, bytes: usize) -> Result<Self, Error> {
        Ok(Self { memory: PinnedMemory::near_gpu(gpu, bytes.next_power_of_two())?, last: None })
    }
}

fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    config: LaunchConfig,
    (by_value, table, count, in_len, out, out_len): (&SlotsByValue, u64, u32, u32, u64, u32),
) -> Result<(), Error> {
    let mut args = stream.launch_builder(function);
    args.arg(by_value).arg(&table).arg(&count).arg(&in_len).arg(&out).arg(&out_len);
    // SAFETY: the kernel takes (SlotsByValue, const u64*, u32, u32, u8*,
    // u32) as passed (the driver copies the parameters at the launch); the
    // slot addresses, `by_value`'s first `count` when that many fit, else the
    // table's, are each 0 or the address of a payload of at least `in_len`
    // bytes, and `out` has room for `count` slots of `out_len` bytes (both
    // checked by `GpuReorder::launch`).
    unsafe { args.launch(config) }.map(drop).map_err(|e| cuda_error("launching a reorder kernel", e))
}

/// The kernel for `types` of a family (`reorder`, `by_sequence`), as
/// `reorder.cu` names them.
pub(super) fn kernel_name(family: &str, types: Option<&DataTypes>) -> String {
    let Some(types) = types else { return format!("{family}_copy") };
    let input = match types.input_type {
        InputType::Int4 => "int4",
        InputType::Int8 => "int8",
        InputType::Int16 => "int16",
        InputType::Int32 => "int32",
    };
    let output = match types.output_type {
        OutputType::Fp16 => "fp16",
        OutputType::Bf16 => "bf16",
        OutputType::Fp32 => "fp32",
        OutputType::Fp64 => "fp64",
        OutputType::Int32 => "int32",
    };
    let order = match types.endianness {
        Endianness::Host => "host",
        Endianness::Network => "network",
    };
    format!("{family}_{input}_{output}_{order}")
}

/// The kernels loaded on GPU `gpu`, compiled on first use.
fn module(gpu: u32, ctx: &Arc<CudaContext>) -> Result<Arc<CudaModule>, Error> {
    static MODULES: Mutex<Vec<(u32, Arc<CudaModule>)>> = Mutex::new(Vec::new());
    let mut modules = MODULES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, module)) = modules.iter().find(|(g, _)| *g == gpu) {
        return Ok(Arc::clone(module));
    }
    let capability = ctx.compute_capability().map_err(|e| cuda_error("reading the compute capability", e))?;
    let module = ctx.load_module(ptx(capability)?).map_err(|e| cuda_error("loading the reorder kernels", e))?;
    modules.push((gpu, Arc::clone(&module)));
    Ok(module)
}

/// `reorder.cu` compiled by NVRTC for a compute capability, once per process.
pub(super) fn ptx((major, minor): (i32, i32)) -> Result<Ptx, Error> {
    static COMPILED: Mutex<Vec<((i32, i32), Ptx)>> = Mutex::new(Vec::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ptx)) = compiled.iter().find(|(c, _)| *c == (major, minor)) {
        return Ok(ptx.clone());
    }
    let options = CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{major}{minor}"),
            "--std=c++17".into(),
            format!("--define-macro=SLOTS_BY_VALUE={SLOTS_BY_VALUE}"),
        ],
        name: Some("reorder.cu".into()),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(SOURCE, options)
        .map_err(|e| Error::new(Status::InternalError, format!("compiling the reorder kernels with NVRTC: {e}")))?;
    compiled.push(((major, minor), ptx.clone()));
    Ok(ptx)
}
