//! GPUDirect Storage writes (cuFile): bursts whose segments live in GPU
//! memory go to one file without a copy through host code. Device segments
//! are written by cuFile; host bytes (pcap record headers, the header
//! segment of a header-data split) by an ordinary positioned write of the
//! same file, so a record's pieces land side by side.
//!
//! Where the nvidia-fs driver is absent, cuFile runs in compatibility mode
//! (it copies through its own pinned bounce buffers and writes with POSIX
//! calls); [`GdsWriter::mode`] says which mode this file got.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use cudarc::cufile::result as cufile;
use cudarc::cufile::safe::{Cufile, FileHandle};
use cudarc::cufile::sys;

use super::{PcapResolution, WriteSummary};
use crate::burst::Burst;
use crate::error::{Error, Result, Status};
use crate::memory::DeviceSlice;
use crate::memory::SegmentMemory;

/// Most device segments in one cuFile batch (cuFile's default `io_batchsize`).
const BATCH_ENTRIES: usize = 128;

/// How cuFile moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GdsMode {
    /// nvidia-fs is loaded and the file is open for direct I/O: the NIC-free
    /// DMA path from GPU memory to storage.
    Direct,
    /// cuFile's compatibility mode: through host bounce buffers.
    Compatibility,
}

impl GdsMode {
    /// `direct` or `compatibility`.
    pub const fn as_str(self) -> &'static str {
        match self {
            GdsMode::Direct => "direct",
            GdsMode::Compatibility => "compatibility",
        }
    }
}

/// What a GDS file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GdsFormat {
    /// Each packet's bytes (all segments in order), back to back.
    Raw,
    /// A classic pcap file (Ethernet, microsecond records) keeping at most
    /// `snaplen` bytes of each packet, as [`PcapWriter`](super::PcapWriter) writes.
    Pcap {
        /// Bytes kept of each packet ([`DEFAULT_SNAPLEN`](super::DEFAULT_SNAPLEN) is pcap's usual).
        snaplen: u32,
    },
}

/// One file written through cuFile.
#[derive(Debug)]
pub struct GdsWriter {
    path: PathBuf,
    format: GdsFormat,
    mode: GdsMode,
    /// Registered with cuFile, for device bytes.
    device_side: FileHandle,
    /// The same file, for host bytes.
    host_side: File,
    /// Where the next record starts.
    end: u64,
}

impl GdsWriter {
    /// Creates (or truncates) `path` and registers it with cuFile.
    pub fn create(path: impl AsRef<Path>, format: GdsFormat) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let fail = |doing: &str, e: std::io::Error| {
            Error::io(Status::GenericFailure, format!("{doing} {}", path.display()), e)
        };
        let host_side = File::create(&path).map_err(|e| fail("cannot create", e))?;
        // Direct I/O where the filesystem has it (tmpfs and overlayfs do not).
        let open = |flags| OpenOptions::new().write(true).custom_flags(flags).open(&path);
        let (file, direct) = match open(libc::O_DIRECT) {
            Ok(file) => (file, true),
            Err(_) => (open(0).map_err(|e| fail("cannot open", e))?, false),
        };
        let device_side = driver()?.register(file).map_err(|e| {
            let hint = "cufile.log says why; in a container without udev cuFile cannot tell the filesystem \
                        type unless /run/udev/data/b<major>:<minor> of the disk names it, as tests/gpu/run.sh writes";
            Error::new(Status::GenericFailure, format!("cuFile cannot register {}: {e:?} ({hint})", path.display()))
        })?;
        let mode = if direct && Path::new("/proc/driver/nvidia-fs/version").exists() {
            GdsMode::Direct
        } else {
            GdsMode::Compatibility
        };
        let mut writer = Self { path, format, mode, device_side, host_side, end: 0 };
        if let GdsFormat::Pcap { snaplen } = format {
            writer.write_host(&super::pcap_global_header(PcapResolution::Micros, snaplen))?;
        }
        Ok(writer)
    }

    /// How cuFile moves this file's bytes.
    pub fn mode(&self) -> GdsMode {
        self.mode
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes every packet of `burst` and returns once the bytes are in the
    /// file (waiting first for device work on the burst, such as its copy).
    pub fn write_burst(&mut self, burst: &Burst) -> Result<WriteSummary> {
        burst.wait_ready();
        let (pieces, summary) = self.lay_out(burst)?;
        for (offset, slice) in pieces {
            // SAFETY: the burst lends `slice` (device memory it holds) for
            // the call; cuFile reads `len` bytes from it, synchronously.
            let written = unsafe {
                cufile::write(self.device_side.cu(), slice.ptr().address() as _, slice.len(), offset as i64, 0)
            };
            self.check_written(written, slice.len())?;
        }
        Ok(summary)
    }

    /// Writes `burst` with cuFile batch I/O: host bytes now, device bytes
    /// submitted in batches that the returned handle waits for. The handle
    /// holds the burst until then.
    pub fn write_burst_async(&mut self, burst: Burst) -> Result<GdsWriteHandle> {
        burst.wait_ready();
        let (pieces, summary) = self.lay_out(&burst)?;
        let mut batches = Vec::new();
        for chunk in pieces.chunks(BATCH_ENTRIES) {
            batches.push(Batch::submit(&self.device_side, chunk).map_err(|e| self.cufile_error(e))?);
        }
        Ok(GdsWriteHandle { burst, batches, summary, path: self.path.clone() })
    }

    /// Writes one packet given as its segments in order (host bytes and
    /// device memory the caller holds for the call), synchronously: for
    /// packets that are not in a burst, such as a capture's copies. Returns
    /// the bytes it added to the file.
    pub fn write_packet(&mut self, segments: &[SegmentMemory<'_>], time: SystemTime) -> Result<u64> {
        let start = self.end;
        let mut pieces = Vec::new();
        self.lay_out_packet(segments.iter().copied(), time, &mut pieces)?;
        for (offset, slice) in pieces {
            // SAFETY: the caller lends `slice` for the call; cuFile reads
            // `len` bytes from it, synchronously.
            let written = unsafe {
                cufile::write(self.device_side.cu(), slice.ptr().address() as _, slice.len(), offset as i64, 0)
            };
            self.check_written(written, slice.len())?;
        }
        Ok(self.end - start)
    }

    /// Writes the host bytes of each packet at their place and returns
    /// where each device segment goes.
    fn lay_out<'b>(&mut self, burst: &'b Burst) -> Result<(Vec<(u64, DeviceSlice<'b>)>, WriteSummary)> {
        let mut pieces = Vec::new();
        let mut summary = WriteSummary::default();
        let now = SystemTime::now();
        for packet in burst.packets() {
            let segments = (0..crate::MAX_SEGMENTS).filter_map(|s| packet.segment_memory(s));
            let written = self.lay_out_packet(segments, now, &mut pieces)?;
            if written > 0 {
                summary.packets += 1;
                summary.bytes += written;
            }
        }
        Ok((pieces, summary))
    }

    /// One packet: its host bytes written now, its device segments added to
    /// `pieces` at their file offsets. Returns the bytes it takes in the file.
    fn lay_out_packet<'b>(
        &mut self,
        segments: impl Iterator<Item = SegmentMemory<'b>> + Clone,
        time: SystemTime,
        pieces: &mut Vec<(u64, DeviceSlice<'b>)>,
    ) -> Result<u64> {
        let len: usize = segments.clone().map(|s| s.len()).sum();
        if len == 0 {
            return Ok(0);
        }
        let start = self.end;
        // A pcap record keeps at most the snap length, as PcapWriter does.
        let mut left = len;
        if let GdsFormat::Pcap { snaplen } = self.format {
            left = len.min(snaplen as usize);
            self.write_host(&super::pcap_record_header(PcapResolution::Micros, time, left as u32, len as u32))?;
        }
        for segment in segments {
            match segment {
                SegmentMemory::Host(bytes) => {
                    let take = bytes.len().min(left);
                    self.write_host(&bytes[..take])?;
                    left -= take;
                }
                SegmentMemory::Device(slice) => {
                    let take = slice.len().min(left);
                    if take > 0 {
                        pieces.push((self.end, DeviceSlice::new(slice.ptr(), take)));
                    }
                    self.end += take as u64;
                    left -= take;
                }
            }
        }
        Ok(self.end - start)
    }

    fn write_host(&mut self, bytes: &[u8]) -> Result<()> {
        self.host_side
            .write_all_at(bytes, self.end)
            .map_err(|e| Error::io(Status::GenericFailure, format!("cannot write {}", self.path.display()), e))?;
        self.end += bytes.len() as u64;
        Ok(())
    }

    fn check_written(&self, written: std::result::Result<isize, cufile::CufileError>, len: usize) -> Result<()> {
        match written {
            Ok(n) if n as usize == len => Ok(()),
            Ok(n) => Err(Error::new(
                Status::GenericFailure,
                format!("cuFile wrote {n} of {len} bytes to {}", self.path.display()),
            )),
            Err(e) => Err(self.cufile_error(e)),
        }
    }

    fn cufile_error(&self, e: cufile::CufileError) -> Error {
        Error::new(Status::GenericFailure, format!("cuFile write to {} failed: {e:?}", self.path.display()))
    }
}

/// An asynchronous GDS write in flight: wait for it to get the burst back.
#[derive(Debug)]
pub struct GdsWriteHandle {
    burst: Burst,
    batches: Vec<Batch>,
    summary: WriteSummary,
    path: PathBuf,
}

impl GdsWriteHandle {
    /// Waits for every batch; returns the burst and what was written.
    pub fn wait(mut self) -> (Burst, Result<WriteSummary>) {
        let mut result = Ok(self.summary);
        for batch in self.batches.drain(..) {
            if let Err(e) = batch.wait() {
                result = Err(Error::new(
                    Status::GenericFailure,
                    format!("cuFile batch write to {}: {e}", self.path.display()),
                ));
            }
        }
        (self.burst, result)
    }
}

/// One cuFile batch: up to [`BATCH_ENTRIES`] device segments.
#[derive(Debug)]
struct Batch {
    handle: sys::CUfileBatchHandle_t,
    /// Bytes each entry must write.
    sizes: Vec<usize>,
}

// SAFETY: a batch handle is an opaque id cuFile accepts from any thread.
unsafe impl Send for Batch {}

impl Batch {
    fn submit(file: &FileHandle, pieces: &[(u64, DeviceSlice<'_>)]) -> std::result::Result<Self, cufile::CufileError> {
        let handle = cufile::batch_io_setup(pieces.len() as u32)?;
        let params: Vec<sys::CUfileIOParams_t> = pieces
            .iter()
            .enumerate()
            .map(|(entry, &(offset, slice))| sys::CUfileIOParams_t {
                mode: sys::CUfileBatchMode_t::CUFILE_BATCH,
                u: sys::CUfileIOParams__bindgen_ty_1 {
                    batch: sys::CUfileIOParams__bindgen_ty_1__bindgen_ty_1 {
                        devPtr_base: slice.ptr().address() as _,
                        file_offset: offset as i64,
                        devPtr_offset: 0,
                        size: slice.len(),
                    },
                },
                fh: file.cu(),
                opcode: sys::CUfileOpcode_t::CUFILE_WRITE,
                // The entry's position, so a completion names what it wrote.
                cookie: std::ptr::without_provenance_mut(entry),
            })
            .collect();
        // SAFETY: `handle` was just set up for this many entries; each entry
        // names device memory the burst holds until the batch is waited for
        // (the handle that owns this batch owns the burst too).
        if let Err(e) = unsafe { cufile::batch_io_submit(handle, &params, 0) } {
            // SAFETY: set up above, destroyed once.
            let _ = unsafe { cufile::batch_io_destroy(handle) };
            return Err(e);
        }
        Ok(Self { handle, sizes: pieces.iter().map(|p| p.1.len()).collect() })
    }

    /// Waits until every entry completed; an error names the first that
    /// failed or wrote fewer bytes than it was given.
    fn wait(self) -> std::result::Result<(), String> {
        let mut done = 0usize;
        let mut failure = None;
        let mut events = vec![
            sys::CUfileIOEvents_t {
                cookie: std::ptr::null_mut(),
                status: sys::CUfileStatus_t::CUFILE_WAITING,
                ret: 0
            };
            self.sizes.len()
        ];
        let timeout = sys::timespec { tv_sec: 1, tv_nsec: 0 };
        while done < self.sizes.len() {
            let mut nr = events.len() as u32;
            // SAFETY: the handle is live until destroyed below; `events` has room for `nr` entries.
            if let Err(e) = unsafe { cufile::batch_io_get_status(self.handle, 1, &mut nr, &mut events, &timeout) } {
                failure.get_or_insert(format!("status: {e:?}"));
                break;
            }
            for event in &events[..nr as usize] {
                let size = self.sizes.get(event.cookie.addr()).copied();
                if event.status != sys::CUfileStatus_t::CUFILE_COMPLETE {
                    failure.get_or_insert(format!("an entry ended {:?}", event.status));
                } else if size != Some(event.ret) {
                    failure.get_or_insert(format!("an entry wrote {} of {size:?} bytes", event.ret));
                }
            }
            done += nr as usize;
        }
        // SAFETY: set up in `submit`, destroyed once, after every entry finished.
        let _ = unsafe { cufile::batch_io_destroy(self.handle) };
        failure.map_or(Ok(()), Err)
    }
}

/// The cuFile driver, opened once per process.
fn driver() -> Result<Arc<Cufile>> {
    static DRIVER: OnceLock<std::result::Result<Arc<Cufile>, String>> = OnceLock::new();
    crate::gpu::gpu_count()?;
    DRIVER
        .get_or_init(|| Cufile::new().map_err(|e| format!("{e:?}")))
        .clone()
        .map_err(|e| Error::new(Status::NotSupported, format!("GPUDirect Storage (libcufile) cannot start: {e}")))
}
