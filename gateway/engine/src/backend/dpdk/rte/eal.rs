//! DPDK's Environment Abstraction Layer: initialised once per process (it
//! cannot be initialised again), outside any engine, so an engine restarted
//! by a reload reuses it. Devices are added with `rte_dev_probe`, at the
//! first engine and at every later one alike.

use std::ffi::CString;
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result, Status};

/// What the first engine that needs DPDK starts EAL with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EalArgs {
    /// The main lcore (`master_core`).
    pub main_core: u32,
    /// PCIe addresses to allow; none means no PCI scan at all.
    pub pci: Vec<String>,
    /// Use hugepages (else `--no-huge`, for virtual devices without them).
    pub hugepages: bool,
}

/// The process's EAL.
#[derive(Debug)]
pub(crate) struct Eal {
    args: EalArgs,
    /// Device probing is not thread-safe in DPDK.
    probing: Mutex<()>,
}

impl Eal {
    /// The EAL, started with `args` on the first call; later calls get the
    /// same one (their devices are added with [`probe`](Self::probe)).
    pub(crate) fn get(args: EalArgs) -> Result<&'static Eal> {
        static EAL: OnceLock<std::result::Result<Eal, String>> = OnceLock::new();
        let eal = EAL.get_or_init(|| start(&args).map(|()| Eal { probing: Mutex::new(()), args: args.clone() }));
        eal.as_ref().map_err(|e| Error::new(Status::GenericFailure, e.clone()))
    }

    /// The arguments EAL was started with (the first engine's).
    pub(crate) fn args(&self) -> &EalArgs {
        &self.args
    }

    /// Creates device `devargs` (a vdev, or a PCIe address) unless its port
    /// exists already; a closed port's device was removed, so it comes back.
    pub(crate) fn probe(&self, devargs: &str) -> Result<()> {
        let _one_at_a_time = self.probing.lock().unwrap_or_else(|e| e.into_inner());
        let name = devargs.split(',').next().unwrap_or(devargs);
        let c_name = CString::new(name).map_err(|_| Error::invalid(format!("device \"{devargs}\" contains a NUL")))?;
        let mut id = 0u16;
        // SAFETY: EAL is initialised; the name is a valid C string.
        if unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) } == 0 {
            return Ok(());
        }
        let c_devargs =
            CString::new(devargs).map_err(|_| Error::invalid(format!("device \"{devargs}\" contains a NUL")))?;
        // SAFETY: EAL is initialised; devargs is a valid C string for the call.
        let rc = unsafe { dpdk_sys::rte_dev_probe(c_devargs.as_ptr()) };
        if rc < 0 {
            return Err(Error::new(
                Status::GenericFailure,
                format!("DPDK cannot create device \"{devargs}\": {}", super::errors::errno_text(rc)),
            ));
        }
        Ok(())
    }
}

/// EAL's own memory without hugepages. It is then 4 KiB pages, which DPDK
/// 25.11 maps into a PCI device's IOMMU container one by one (22.11 mapped
/// contiguous pages at once), against vfio's default limit of 65,535
/// mappings: 256 MiB took all of them and the device's probe failed with
/// ENOSPC. 128 MiB (32,768) leaves room for our regions' own mappings.
fn no_huge_megabytes(args: &EalArgs) -> &'static str {
    if args.pci.is_empty() { "256" } else { "128" }
}

/// Runs `rte_eal_init` on a thread of its own: EAL pins the calling thread
/// to the main lcore, which must not happen to the application's thread.
fn start(args: &EalArgs) -> std::result::Result<(), String> {
    let mut argv = vec![
        "daqiri".to_owned(),
        "-l".into(),
        args.main_core.to_string(),
        "--main-lcore".into(),
        args.main_core.to_string(),
        "--log-level".into(),
        "lib.eal:error".into(),
    ];
    // No shared runtime files, so several gateways (and tests) run at once;
    // EAL refuses --in-memory together with --no-huge, which has none anyway.
    if args.hugepages {
        argv.push("--in-memory".into());
    } else {
        argv.extend(["--no-huge".into(), "-m".into(), no_huge_megabytes(args).into(), "--no-shconf".into()]);
    }
    if args.pci.is_empty() {
        argv.push("--no-pci".into());
    }
    for pci in &args.pci {
        argv.extend(["-a".into(), pci.clone()]);
    }
    let line = argv.join(" ");
    let result = std::thread::Builder::new()
        .name("dpdk-eal".into())
        .spawn(move || {
            let strings: Vec<CString> = argv
                .iter()
                .map(|a| CString::new(a.as_str()).map_err(|_| format!("EAL argument {a:?} has a NUL")))
                .collect::<std::result::Result<_, _>>()?;
            let mut pointers: Vec<*mut std::os::raw::c_char> = strings.iter().map(|s| s.as_ptr().cast_mut()).collect();
            // SAFETY: `pointers` holds argc valid C strings that outlive the
            // call (EAL keeps no pointer to them); this runs once per process.
            let rc = unsafe { dpdk_sys::rte_eal_init(pointers.len() as i32, pointers.as_mut_ptr()) };
            if rc < 0 { Err(super::errors::last_error()) } else { Ok(()) }
        })
        .map_err(|e| format!("cannot start the EAL thread: {e}"))?
        .join()
        .map_err(|_| "rte_eal_init panicked".to_owned())?;
    result.map_err(|e| format!("DPDK's EAL did not start ({line}): {e}"))
}

/// Makes the calling worker thread an EAL thread, so mempool operations
/// use a per-lcore cache; without a free lcore id it works uncached.
pub(crate) fn register_thread() {
    // SAFETY: EAL is initialised (a port exists); registers only this thread.
    if unsafe { dpdk_sys::rte_thread_register() } != 0 {
        tracing::debug!(
            "no EAL lcore left for this worker: its mempool access is uncached ({})",
            super::errors::last_error()
        );
    }
}
