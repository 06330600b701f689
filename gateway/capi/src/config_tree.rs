//! A config as a tree the C++ and Python faces read and build field by
//! field: DAQIRI's `parse_network_config`, `daqiri_init(NetworkConfig&)`
//! and `get_engine_type`.
//!
//! The tree is the `daqiri.cfg` mapping as the config model writes it
//! (defaults filled in), addressed by dotted paths of YAML keys and list
//! indices (`interfaces.0.rx.queues.1.cpu_core`). What validation resolved
//! and DAQIRI's `NetworkConfig` reports beside the keys (the engine, the
//! transport, the direction) sits under `(derived)`, which no YAML key can
//! name. A parsed tree remembers which leaves were read, so a key that the
//! reader's structs have no field for is named instead of dropped.

use std::collections::HashSet;
use std::ffi::{CString, c_char};
use std::path::Path;
use std::sync::Mutex;

use daqiri::{Error, Status};
use daqiri_config::{Document, InterfaceBackend, Transport, ValidConfig};
use serde_yaml::{Mapping, Value};

use crate::lifecycle::{self, Source, text};
use crate::status::{self, SUCCESS};

/// The key of what validation resolved; not a YAML key.
pub const DERIVED: &str = "(derived)";

/// A config tree (`daqiri_gw_config` in C).
#[derive(Debug, Default)]
pub struct ConfigTree {
    root: Value,
    read: Mutex<HashSet<String>>,
}

/// DAQIRI's `EngineType`, as c_api.h numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum EngineType {
    /// No engine resolved (no engine runs).
    Unknown = -1,
    /// DAQIRI's DPDK engine; also the software loopback, which DAQIRI runs there.
    Dpdk = 1,
    /// Kernel sockets.
    Socket = 2,
    /// RoCE through ibverbs.
    Rdma = 3,
    /// Raw Ethernet through ibverbs.
    Ibverbs = 4,
    /// AF_XDP: ours, beyond DAQIRI's enum.
    AfXdp = 100,
}

impl EngineType {
    /// The engine a validated config runs on: its first interface's.
    pub fn of(config: &ValidConfig) -> Self {
        if config.config().interfaces.is_empty() {
            return Self::Unknown;
        }
        match config.backend(0) {
            InterfaceBackend::Socket => Self::Socket,
            InterfaceBackend::SoftwareLoopback | InterfaceBackend::Dpdk => Self::Dpdk,
            InterfaceBackend::IbverbsRaw => Self::Ibverbs,
            InterfaceBackend::Roce => Self::Rdma,
            InterfaceBackend::AfXdp => Self::AfXdp,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Dpdk => "dpdk",
            Self::Socket => "socket",
            Self::Rdma => "rdma",
            Self::Ibverbs => "ibverbs",
            Self::AfXdp => "af_xdp",
        }
    }
}

impl ConfigTree {
    /// Parses and validates a config as `daqiri_init` would, without starting it.
    pub fn parse(source: Source<'_>) -> daqiri::Result<Self> {
        let document = match source {
            Source::File(path) => Document::read(path)?,
            Source::Yaml(text) => Document::parse(text)?,
        };
        let valid = document.validate()?;
        let mut root = serde_yaml::to_value(valid.config())
            .map_err(|e| Error::new(Status::InternalError, format!("cannot write the parsed config: {e}")))?;
        if let Value::Mapping(map) = &mut root {
            map.insert(DERIVED.into(), derived(&valid));
        }
        Ok(Self { root, read: Mutex::default() })
    }

    /// The tree as YAML text (the `daqiri.cfg` mapping, `(derived)` included).
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(&self.root).unwrap_or_default()
    }

    /// The config document the tree describes, for `daqiri_init`.
    fn document(&self) -> daqiri::Result<String> {
        let mut cfg = match &self.root {
            Value::Mapping(map) => map.clone(),
            Value::Null => Mapping::new(),
            _ => return Err(Error::invalid("the config tree is not a mapping")),
        };
        cfg.remove(DERIVED);
        let mut body = Mapping::new();
        body.insert("cfg".into(), Value::Mapping(cfg));
        let mut top = Mapping::new();
        top.insert("daqiri".into(), Value::Mapping(body));
        serde_yaml::to_string(&top).map_err(|e| Error::invalid(format!("cannot write the config as YAML: {e}")))
    }

    fn at(&self, path: &str) -> Option<&Value> {
        path.split('.').try_fold(&self.root, |node, key| match node {
            Value::Mapping(map) => map.get(key),
            Value::Sequence(list) => list.get(key.parse::<usize>().ok()?),
            _ => None,
        })
    }

    /// A scalar's text (numbers in decimal, `true`/`false`), marked as read.
    pub fn get(&self, path: &str) -> Option<String> {
        let text = match self.at(path)? {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            _ => return None,
        };
        self.read.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_owned());
        Some(text)
    }

    /// A list's or map's entries, 1 for a scalar; `None` where nothing is.
    pub fn count(&self, path: &str) -> Option<usize> {
        match self.at(path)? {
            Value::Sequence(list) => Some(list.len()),
            Value::Mapping(map) => Some(map.len()),
            Value::Null => None,
            _ => Some(1),
        }
    }

    /// Sets a scalar, making the maps and lists on its way.
    pub fn set(&mut self, path: &str, value: Value) -> daqiri::Result<()> {
        let mut node = &mut self.root;
        for key in path.split('.') {
            if key.is_empty() {
                return Err(Error::invalid(format!("\"{path}\" has an empty key")));
            }
            node = match key.parse::<usize>() {
                Ok(index) => {
                    if node.is_null() {
                        *node = Value::Sequence(Vec::new());
                    }
                    let Value::Sequence(list) = node else {
                        return Err(Error::invalid(format!("\"{path}\": {key} indexes something not a list")));
                    };
                    if index > list.len() {
                        return Err(Error::invalid(format!("\"{path}\": index {index} skips entries")));
                    }
                    if index == list.len() {
                        list.push(Value::Null);
                    }
                    &mut list[index]
                }
                Err(_) => {
                    if node.is_null() {
                        *node = Value::Mapping(Mapping::new());
                    }
                    let Value::Mapping(map) = node else {
                        return Err(Error::invalid(format!("\"{path}\": {key} names a key of something not a map")));
                    };
                    map.entry(key.into()).or_insert(Value::Null)
                }
            };
        }
        *node = value;
        Ok(())
    }

    /// The first leaf not read yet, in document order.
    pub fn first_unread(&self) -> Option<String> {
        let read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        let mut stack = vec![(String::new(), &self.root)];
        while let Some((path, node)) = stack.pop() {
            let join = |key: &str| if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") };
            match node {
                Value::Mapping(map) => {
                    let entries: Vec<_> = map
                        .iter()
                        .filter_map(|(k, v)| Some((join(k.as_str()?), v)))
                        .filter(|(p, _)| p != DERIVED)
                        .collect();
                    stack.extend(entries.into_iter().rev());
                }
                Value::Sequence(list) => {
                    stack.extend(list.iter().enumerate().rev().map(|(i, v)| (join(&i.to_string()), v)))
                }
                Value::Null => {}
                _ if !read.contains(&path) => return Some(path),
                _ => {}
            }
        }
        None
    }
}

/// What `NetworkConfig` holds beside the keys: the engine, the transport
/// of the socket interfaces, and whether interfaces receive, send or both.
fn derived(valid: &ValidConfig) -> Value {
    let config = valid.config();
    let rx = config.interfaces.iter().any(|i| i.rx.is_some());
    let tx = config.interfaces.iter().any(|i| i.tx.is_some());
    let direction = match (rx, tx) {
        (true, true) => "tx_rx",
        (false, true) => "tx",
        _ => "rx",
    };
    let protocol =
        (0..config.interfaces.len()).find_map(|port| valid.endpoints(port)).map_or("invalid", |e| match e.transport {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Roce => "roce",
        });
    let mut map = Mapping::new();
    map.insert("engine_type".into(), EngineType::of(valid).name().into());
    map.insert("protocol".into(), protocol.into());
    map.insert("dir".into(), direction.into());
    Value::Mapping(map)
}

/// Copies `text` into `out` (at most `capacity` bytes with its NUL) and
/// returns its whole length, as `snprintf` does.
fn copy_out(text: &str, out: *mut c_char, capacity: usize) -> i64 {
    if !out.is_null() && capacity > 0 {
        let n = text.len().min(capacity - 1);
        // SAFETY: `out` holds `capacity` writable bytes by the C contract; n < capacity.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast(), out, n);
            *out.add(n) = 0;
        }
    }
    text.len() as i64
}

fn tree<'a>(handle: *const ConfigTree) -> daqiri::Result<&'a ConfigTree> {
    // SAFETY: null, or a tree from daqiri_gw_config_parse/new not yet freed (the C contract).
    unsafe { handle.as_ref() }.ok_or_else(|| Error::new(Status::NullPtr, "the config is a null pointer"))
}

/// Parses and validates a config file or YAML text (the rule of
/// `daqiri_gw_init`) into a new tree at `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_parse(yaml_or_path: *const c_char, out: *mut *mut ConfigTree) -> i32 {
    let source = text("the YAML text or path", yaml_or_path).and_then(lifecycle::source_of);
    // SAFETY: `out` as the C contract gives it.
    unsafe { parse_into("parse_network_config", source, out) }
}

/// Parses and validates YAML text into a new tree at `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_parse_yaml_string(yaml: *const c_char, out: *mut *mut ConfigTree) -> i32 {
    let source = text("the YAML text", yaml).map(Source::Yaml);
    // SAFETY: `out` as the C contract gives it.
    unsafe { parse_into("parse_network_config_from_yaml_string", source, out) }
}

/// Parses and validates a YAML file into a new tree at `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_parse_yaml_file(path: *const c_char, out: *mut *mut ConfigTree) -> i32 {
    let source = text("the YAML path", path).map(|path| Source::File(Path::new(path)));
    // SAFETY: `out` as the C contract gives it.
    unsafe { parse_into("parse_network_config_from_yaml_file", source, out) }
}

/// The tree of `source` at `*out` (null when it fails), as `call`.
unsafe fn parse_into(call: &str, source: daqiri::Result<Source<'_>>, out: *mut *mut ConfigTree) -> i32 {
    if out.is_null() {
        return status::fail(call, Error::new(Status::NullPtr, "out is a null pointer"));
    }
    // SAFETY: non-null and writable by the C contract.
    unsafe { *out = std::ptr::null_mut() };
    match source.and_then(ConfigTree::parse) {
        Ok(tree) => {
            // SAFETY: as above.
            unsafe { *out = Box::into_raw(Box::new(tree)) };
            SUCCESS
        }
        Err(e) => status::fail(call, e),
    }
}

/// An empty tree, to build a config in.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_config_new() -> *mut ConfigTree {
    Box::into_raw(Box::default())
}

/// Frees a tree; null is ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_free(config: *mut ConfigTree) {
    if !config.is_null() {
        // SAFETY: a tree from this library, freed once (the C contract).
        drop(unsafe { Box::from_raw(config) });
    }
}

/// A scalar's text into `out`; its length, -1 when the path holds none,
/// -2 when the tree or path is a null pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_get(
    config: *const ConfigTree,
    path: *const c_char,
    out: *mut c_char,
    capacity: usize,
) -> i64 {
    match tree(config).and_then(|tree| Ok(tree.get(text("the path", path)?))) {
        Ok(Some(value)) => copy_out(&value, out, capacity),
        Ok(None) => -1,
        Err(e) => {
            status::fail("config_get", e);
            -2
        }
    }
}

/// A list's or map's entries, 1 for a scalar, -1 where nothing is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_count(config: *const ConfigTree, path: *const c_char) -> i64 {
    match tree(config).and_then(|tree| Ok(tree.count(text("the path", path)?))) {
        Ok(count) => count.map_or(-1, |n| n as i64),
        Err(e) => {
            status::fail("config_count", e);
            -1
        }
    }
}

/// How `daqiri_gw_config_set` reads its value text.
const SET_TEXT: i32 = 0;
const SET_INTEGER: i32 = 1;
const SET_BOOL: i32 = 2;

/// Sets the scalar at `path`: `kind` 0 text, 1 a decimal integer, 2 `true`/`false`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_set(
    config: *mut ConfigTree,
    path: *const c_char,
    value: *const c_char,
    kind: i32,
) -> i32 {
    const CALL: &str = "config_set";
    // SAFETY: null, or a live tree this thread may change (the C contract).
    let Some(tree) = (unsafe { config.as_mut() }) else {
        return status::fail(CALL, Error::new(Status::NullPtr, "the config is a null pointer"));
    };
    let set = (|| {
        let path = text("the path", path)?;
        let value = text("the value", value)?;
        let scalar = match kind {
            SET_TEXT => Value::from(value),
            SET_INTEGER => match value.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => Value::from(
                    value
                        .parse::<u64>()
                        .map_err(|_| Error::invalid(format!("{path}: \"{value}\" is not an integer")))?,
                ),
            },
            SET_BOOL => Value::from(
                value
                    .parse::<bool>()
                    .map_err(|_| Error::invalid(format!("{path}: \"{value}\" is not true or false")))?,
            ),
            other => return Err(Error::invalid(format!("{path}: value kind {other} is not 0, 1 or 2"))),
        };
        tree.set(path, scalar)
    })();
    status::status_of(CALL, set)
}

/// The path of the first leaf no `get` has read into `out`; its length, 0 when all were read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_unread(config: *const ConfigTree, out: *mut c_char, capacity: usize) -> i64 {
    match tree(config) {
        Ok(tree) => copy_out(&tree.first_unread().unwrap_or_default(), out, capacity),
        Err(e) => {
            status::fail("config_unread", e);
            0
        }
    }
}

/// Starts the engine from a tree (DAQIRI's `daqiri_init(NetworkConfig&)`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_init_config(config: *const ConfigTree) -> i32 {
    const CALL: &str = "daqiri_init";
    match tree(config).and_then(ConfigTree::document) {
        Ok(yaml) => lifecycle::init(CALL, Source::Yaml(&yaml)),
        Err(e) => status::fail(CALL, e),
    }
}

/// The running engine's type (c_api.h's numbering); -1 when none runs.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_engine_type() -> i32 {
    lifecycle::engine()
        .map(|guard| EngineType::of(&guard.as_ref().expect("checked by engine()").config()) as i32)
        .unwrap_or(EngineType::Unknown as i32)
}

/// A tree's text, for tests and tools: the caller frees it with `daqiri_gw_config_free_text`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_yaml(config: *const ConfigTree) -> *mut c_char {
    tree(config).ok().and_then(|tree| CString::new(tree.to_yaml()).ok()).map_or(std::ptr::null_mut(), CString::into_raw)
}

/// Frees text from `daqiri_gw_config_yaml`; null is ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_config_free_text(text: *mut c_char) {
    if !text.is_null() {
        // SAFETY: text from daqiri_gw_config_yaml, freed once.
        drop(unsafe { CString::from_raw(text) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &str = "daqiri:\n  cfg:\n    version: 1\n    stream_type: socket\n    memory_regions:\n    - { name: rx, kind: host, num_bufs: 64, buf_size: 2048 }\n    interfaces:\n    - name: server\n      socket_config: { mode: server, local_addr: \"udp://127.0.0.1:47872\" }\n      rx:\n        queues:\n        - { name: q, id: 0, cpu_core: -1, batch_size: 4, memory_regions: [rx] }\n";

    #[test]
    fn a_parsed_tree_names_what_validation_resolved_and_the_first_leaf_not_read() {
        let tree = ConfigTree::parse(Source::Yaml(SERVER)).unwrap();
        assert_eq!(tree.get("(derived).engine_type").as_deref(), Some("socket"));
        assert_eq!(tree.get("(derived).protocol").as_deref(), Some("udp"));
        assert_eq!(tree.get("interfaces.0.rx.queues.0.cpu_core").as_deref(), Some("-1"));
        assert_eq!(tree.count("interfaces.0.rx.queues"), Some(1));
        assert_eq!(tree.count("interfaces.0.rx.queues.0.name"), Some(1));
        assert_eq!(tree.count("interfaces.0.tx"), None);
        assert_eq!(tree.first_unread().as_deref(), Some("version"));
    }

    #[test]
    fn a_built_tree_starts_as_the_yaml_it_writes() {
        let mut tree = ConfigTree::default();
        tree.set("interfaces.0.rx.queues.0.memory_regions.0", "rx".into()).unwrap();
        tree.set("version", 1.into()).unwrap();
        let yaml = tree.document().unwrap();
        assert!(yaml.starts_with("daqiri:\n  cfg:\n"), "{yaml}");
        assert!(yaml.contains("memory_regions:\n          - rx"), "{yaml}");
        let skipped = tree.set("interfaces.2.name", "x".into()).unwrap_err();
        assert!(skipped.detail().contains("index 2 skips entries"), "{}", skipped.detail());
        let into_scalar = tree.set("version.x", 1.into()).unwrap_err();
        assert!(into_scalar.detail().contains("not a map"), "{}", into_scalar.detail());
    }
}
