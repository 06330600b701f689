//! Reading a YAML document into the typed model.

use std::collections::BTreeMap;
use std::path::Path;

use crate::diagnostic::{Report, YamlPath};
use crate::model::{DaqiriSection, EngineConfig};
use crate::valid::ValidConfig;

/// A parsed DAQIRI YAML document.
#[derive(Debug, Clone)]
pub struct Document {
    /// `daqiri.cfg`.
    pub config: EngineConfig,
    /// Other top-level sections (`bench_tx`, `socket_bench_server`, ...), kept for tools.
    pub sections: BTreeMap<String, serde_yaml::Value>,
    /// Keys inside `daqiri:` that DAQIRI does not define, as warnings.
    pub unknown_keys: Report,
}

impl Document {
    /// Parses YAML text. A type error (a string where a number belongs, an
    /// unknown enum value, a missing key) is reported with its YAML path.
    pub fn parse(text: &str) -> Result<Self, Report> {
        let mut unknown_keys = Report::default();
        let de = serde_yaml::Deserializer::from_str(text);
        let mut on_ignored = |ignored: serde_ignored::Path<'_>| {
            let path = ignored_path(&ignored);
            // Top-level sections other than `daqiri` belong to tools; only keys inside ours are suspect.
            if path.starts_with("daqiri.") {
                unknown_keys.warn(
                    &YamlPath::from_text(path),
                    "unknown key, ignored (check the spelling against the configuration reference)",
                );
            }
        };
        let tracked = serde_ignored::Deserializer::new(de, &mut on_ignored);
        let section: DaqiriSection = serde_path_to_error::deserialize(tracked).map_err(|err| {
            let mut report = Report::default();
            let path = err.path().to_string();
            let path = if path == "." { "(document)".to_owned() } else { path };
            report.error(&YamlPath::from_text(path), err.inner().to_string());
            report
        })?;
        let sections = match serde_yaml::from_str::<BTreeMap<String, serde_yaml::Value>>(text) {
            Ok(mut all) => {
                all.remove("daqiri");
                all
            }
            Err(_) => BTreeMap::new(),
        };
        Ok(Document { config: section.daqiri.cfg, sections, unknown_keys })
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<Self, Report> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            let mut report = Report::default();
            report.error(&YamlPath::from_text(path.display().to_string()), format!("cannot read config file: {err}"));
            report
        })?;
        Self::parse(&text)
    }

    /// Validates the engine config; unknown-key warnings are carried over.
    pub fn validate(&self) -> Result<ValidConfig, Report> {
        let mut valid = self.config.clone().validate().map_err(|mut report| {
            report.diagnostics.splice(0..0, self.unknown_keys.diagnostics.iter().cloned());
            report
        })?;
        valid.prepend_warnings(self.unknown_keys.clone());
        Ok(valid)
    }

    /// Serialises the engine config back to DAQIRI YAML (`daqiri: cfg: ...`).
    pub fn engine_yaml(config: &EngineConfig) -> String {
        let section = DaqiriSection { daqiri: crate::model::DaqiriBody { cfg: config.clone() } };
        serde_yaml::to_string(&section).expect("the config model always serialises")
    }
}

fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path as P;
    match path {
        P::Root => String::new(),
        P::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        P::Map { parent, key } => {
            let parent = ignored_path(parent);
            if parent.is_empty() { key.clone() } else { format!("{parent}.{key}") }
        }
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => ignored_path(parent),
    }
}
