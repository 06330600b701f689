//! Config text as the gateway runs it: parsed, device-plugin addresses
//! resolved from this container's environment, validated.

use std::path::Path;

use daqiri_config::{Document, Report, ValidConfig};

use crate::device_plugin;

/// Parses, resolves and validates; every finding carries its YAML path.
pub(crate) fn validate(yaml: &str) -> Result<ValidConfig, Report> {
    let mut doc = Document::parse(yaml)?;
    device_plugin::resolve_document(
        &mut doc,
        |var| std::env::var(var).ok(),
        Path::new(device_plugin::DEVICE_INFO_DIR),
        Path::new(device_plugin::SYSFS),
    )?;
    doc.validate()
}
