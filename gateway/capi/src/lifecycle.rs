//! The process's one engine: `daqiri_init`, `shutdown`, `print_stats`.
//!
//! As in DAQIRI, one engine may run per process: a second init before
//! `shutdown` is refused with `INTERNAL_ERROR` and leaves the running one
//! alone; after `shutdown`, init starts a fresh one. Calls on the data path
//! read the engine through an `ArcSwap`: no lock.

use std::ffi::{CStr, c_char};
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwapOption, Guard};
use daqiri::{Engine, Error, Status};
use daqiri_config::model::SocketMode;
use daqiri_config::{InterfaceBackend, ValidConfig};

use crate::logging;
use crate::status::{self, SUCCESS};

static ENGINE: ArcSwapOption<Running> = ArcSwapOption::const_empty();
/// Held by init and shutdown, so they run one at a time.
static LIFECYCLE: Mutex<()> = Mutex::new(());

/// The running engine, with what calls on the data path look up in its
/// config, read once at init: the config itself is an `Arc` the engine
/// hands out by cloning, a count every core would write on every call.
pub(crate) struct Running {
    engine: Engine,
    /// Each port's socket mode; `None` for an interface that is not a socket.
    socket_modes: Vec<Option<SocketMode>>,
}

impl Running {
    fn new(engine: Engine) -> Self {
        let config = engine.config();
        let socket_modes = (0..engine.num_ports()).map(|port| config.endpoints(port).map(|e| e.mode)).collect();
        Self { engine, socket_modes }
    }

    /// Port `port`'s socket mode; `None` when it is not a socket interface.
    pub(crate) fn socket_mode(&self, port: usize) -> Option<SocketMode> {
        self.socket_modes.get(port).copied().flatten()
    }
}

impl Deref for Running {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// The running engine, or `NOT_READY` naming the missing init.
pub(crate) fn engine() -> daqiri::Result<Guard<Option<Arc<Running>>>> {
    let guard = ENGINE.load();
    if guard.is_none() {
        return Err(Error::new(Status::NotReady, "no engine is running: call daqiri_init first"));
    }
    Ok(guard)
}

/// Runs `f` on the running engine.
pub(crate) fn with_engine<T>(f: impl FnOnce(&Running) -> daqiri::Result<T>) -> daqiri::Result<T> {
    let guard = engine()?;
    f(guard.as_ref().expect("checked by engine()"))
}

/// Where a config comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A YAML file.
    File(&'a Path),
    /// YAML text.
    Yaml(&'a str),
}

pub(crate) fn init(call: &str, source: Source<'_>) -> i32 {
    let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner());
    if ENGINE.load().is_some() {
        return status::fail(
            call,
            Error::new(Status::InternalError, "an engine is already running in this process: call shutdown first"),
        );
    }
    logging::install();
    let started = match source {
        Source::File(path) => Engine::from_file(path),
        Source::Yaml(text) => Engine::from_yaml(text),
    };
    match started {
        Ok(engine) => {
            let config = engine.config();
            logging::follow(config.config());
            pin_to_master_core(&config);
            ENGINE.store(Some(Arc::new(Running::new(engine))));
            SUCCESS
        }
        Err(e) => status::fail_loudly(call, e),
    }
}

/// `master_core` is the thread that started the engine where DAQIRI's
/// DPDK engine would run the config (raw interfaces: DPDK, the software
/// loopback, and AF_XDP in its place): its EAL pins the main lcore there.
/// DAQIRI's socket, ibverbs and RDMA engines leave the thread where it is,
/// and so do we: threads the application starts later inherit the pin,
/// which on a socket config would crowd them onto one core.
fn pin_to_master_core(config: &ValidConfig) {
    let raw = (0..config.config().interfaces.len()).any(|index| {
        matches!(
            config.backend(index),
            InterfaceBackend::Dpdk | InterfaceBackend::SoftwareLoopback | InterfaceBackend::AfXdp
        )
    });
    if let Some(core) = config.config().master_core.filter(|_| raw)
        && !core_affinity::set_for_current(core_affinity::CoreId { id: core.0 as usize })
    {
        tracing::warn!(core = core.0, "master_core: cannot pin the thread that called daqiri_init");
    }
}

/// Reads a C string argument.
pub(crate) fn text<'a>(what: &str, pointer: *const c_char) -> daqiri::Result<&'a str> {
    if pointer.is_null() {
        return Err(Error::invalid(format!("{what} is a null pointer")));
    }
    // SAFETY: a non-null C string argument, NUL-terminated by the C contract.
    let text = unsafe { CStr::from_ptr(pointer) };
    text.to_str().map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
}

/// Starts the engine from a YAML file.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_init_from_yaml_file(path: *const c_char) -> i32 {
    const CALL: &str = "daqiri_init_from_yaml_file";
    match text("the YAML path", path) {
        Ok(path) => init(CALL, Source::File(Path::new(path))),
        Err(e) => status::fail(CALL, e),
    }
}

/// Starts the engine from YAML text.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_init_from_yaml_string(yaml: *const c_char) -> i32 {
    const CALL: &str = "daqiri_init_from_yaml_string";
    match text("the YAML text", yaml) {
        Ok(yaml) => init(CALL, Source::Yaml(yaml)),
        Err(e) => status::fail(CALL, e),
    }
}

/// Starts the engine from a file when `yaml_or_path` names one, else from
/// the text itself (DAQIRI's `daqiri_init(const std::string&)`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_init(yaml_or_path: *const c_char) -> i32 {
    const CALL: &str = "daqiri_init";
    match text("the YAML text or path", yaml_or_path).and_then(source_of) {
        Ok(source) => init(CALL, source),
        Err(e) => status::fail(CALL, e),
    }
}

/// A file when `argument` names one, else YAML text; neither: named.
pub fn source_of(argument: &str) -> daqiri::Result<Source<'_>> {
    if Path::new(argument).is_file() {
        return Ok(Source::File(Path::new(argument)));
    }
    if !argument.contains(['\n', ':']) {
        return Err(Error::invalid(format!("no config file at \"{argument}\", and it is not YAML text")));
    }
    Ok(Source::Yaml(argument))
}

/// Stops the engine; bursts the program still holds stay readable and
/// freeable. Nothing happens when none runs.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_shutdown() {
    let _lifecycle = LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(engine) = ENGINE.swap(None) {
        engine.shutdown();
    }
}

/// Prints every port's and queue's counters to stdout.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_print_stats() {
    match engine() {
        Ok(guard) => print!("{}", crate::stats_text::render(&guard.as_ref().expect("checked").stats())),
        Err(e) => {
            status::fail("print_stats", e);
        }
    }
}
