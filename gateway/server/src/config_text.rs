//! Config text as the gateway runs it: parsed, device-plugin addresses
//! resolved from this container's environment, validated.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use daqiri_config::{Document, Report, Strictness, ValidConfig};

use crate::device_plugin;

/// `run --lenient`: for this process's configs, started and PUT alike.
static LENIENT: AtomicBool = AtomicBool::new(false);

/// How this process treats unknown keys from now on (`run --lenient`).
pub(crate) fn set_strictness(strictness: Strictness) {
    LENIENT.store(strictness == Strictness::Lenient, Ordering::Relaxed);
}

fn strictness() -> Strictness {
    if LENIENT.load(Ordering::Relaxed) { Strictness::Lenient } else { Strictness::Strict }
}

/// Parses, resolves and validates; every finding carries its YAML path.
pub(crate) fn validate(yaml: &str) -> Result<ValidConfig, Report> {
    let mut doc = Document::parse_with(yaml, strictness())?;
    device_plugin::resolve_document(
        &mut doc,
        |var| std::env::var(var).ok(),
        Path::new(device_plugin::DEVICE_INFO_DIR),
        Path::new(device_plugin::SYSFS),
    )?;
    doc.validate()
}
