//! Reading a YAML document into the typed model.

use std::collections::BTreeMap;
use std::path::Path;

use crate::diagnostic::{Report, YamlPath};
use crate::model::{DaqiriSection, EngineConfig};
use crate::placeholder::{self, Placeholder};
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
    /// Template placeholders (`<...>` values) still in the document.
    pub placeholders: Vec<Placeholder>,
}

/// How strictly a document's language is read: keys the model does not
/// know, and numbers written as upstream's strict parser refuses them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strictness {
    /// As upstream's parser since its config language went strict: an
    /// unknown key is an error at its path, naming the keys its map takes;
    /// so is a quoted, ambiguous or YAML 1.1 number where an integer goes
    /// (see `number_syntax`).
    #[default]
    Strict,
    /// For files written for older, lenient parsers: an unknown key is a
    /// warning, except where ignoring it would change what lands where (a
    /// flow's match or action, a queue, a reorder config), which stays
    /// refused; numbers are read as serde_yaml reads them.
    Lenient,
}

/// What `check` makes of a document that may still be a template.
#[derive(Debug)]
pub struct TemplateCheck {
    /// The checked config, when it validated with its placeholders stood in for.
    pub valid: Option<ValidConfig>,
    /// Placeholders as warnings, then what validation found beyond them.
    pub report: Report,
}

impl Document {
    /// Parses YAML text. A type error (a string where a number belongs, an
    /// unknown enum value, a missing key) is reported with its YAML path.
    ///
    /// A document over [`crate::nesting`]'s size or depth is refused before parsing.
    ///
    /// Template placeholders are recorded, and a neutral value stands in for
    /// each one its field cannot hold (see [`crate::placeholder`]).
    pub fn parse(text: &str) -> Result<Self, Report> {
        Self::parse_with(text, Strictness::Strict)
    }

    /// As [`parse`](Self::parse), read as `strictness` says.
    pub fn parse_with(text: &str, strictness: Strictness) -> Result<Self, Report> {
        crate::nesting::check(text)?;
        let numbers = match strictness {
            Strictness::Strict => crate::number_syntax::check(text),
            Strictness::Lenient => Report::default(),
        };
        let mut value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|err| {
            let mut report = Report::default();
            report.error(&YamlPath::from_text("(document)"), err.to_string());
            report
        })?;
        let placeholders = placeholder::find(&value);
        // Each retry stands a value in for the placeholder the last attempt stopped at.
        let mut tries = 0;
        let (section, unknown_keys) = loop {
            let error = match Self::parse_value(value.clone(), strictness) {
                Ok(parsed) => break parsed,
                Err(error) => error,
            };
            let stuck = error.diagnostics.first().map(|d| d.path.clone()).unwrap_or_default();
            let Some(p) = placeholders.iter().find(|p| p.covers(&stuck)) else {
                return Err(numbers_then(&numbers, error));
            };
            // A number first (cpu_core, ports, sizes), then nothing at all.
            tries += 1;
            p.stand_in(&mut value, (tries % 2 == 1).then(|| serde_yaml::Value::from(0)));
            if tries > 2 * placeholders.len() {
                return Err(numbers_then(&numbers, error));
            }
        };
        let unknown_keys = numbers_then(&numbers, unknown_keys);
        let sections = match value {
            serde_yaml::Value::Mapping(all) => all
                .into_iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v)))
                .filter(|(k, _)| k != "daqiri")
                .collect(),
            _ => BTreeMap::new(),
        };
        Ok(Document { config: section.daqiri.cfg, sections, unknown_keys, placeholders })
    }

    fn parse_value(value: serde_yaml::Value, strictness: Strictness) -> Result<(DaqiriSection, Report), Report> {
        let mut unknown_keys = Report::default();
        let de = value;
        let mut on_ignored = |ignored: serde_ignored::Path<'_>| {
            let path = ignored_path(&ignored);
            // Top-level sections other than `daqiri` belong to tools; only keys inside ours are suspect.
            if !path.starts_with("daqiri.") {
                return;
            }
            if strictness == Strictness::Strict {
                unknown_keys.error(&YamlPath::from_text(path.clone()), unknown_key_message(&path));
                return;
            }
            match section_that_changes_meaning(&path) {
                Some(section) => unknown_keys.refuse(
                    &YamlPath::from_text(path),
                    format!(
                        "unknown key in {section}: ignoring it would change what lands where, so the config is refused (NOT_SUPPORTED); check the spelling against the configuration reference, or remove the key"
                    ),
                ),
                None => unknown_keys.warn(
                    &YamlPath::from_text(path),
                    "unknown key, ignored (check the spelling against the configuration reference)",
                ),
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
        Ok((section, unknown_keys))
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<Self, Report> {
        Self::read_with(path, Strictness::Strict)
    }

    /// As [`read`](Self::read), read as `strictness` says.
    pub fn read_with(path: &Path, strictness: Strictness) -> Result<Self, Report> {
        let text = crate::nesting::read_text(path).map_err(|err| {
            let mut report = Report::default();
            report.error(&YamlPath::from_text(path.display().to_string()), format!("cannot read config file: {err}"));
            report
        })?;
        Self::parse_with(&text, strictness)
    }

    /// Validates the engine config for running: unknown-key warnings are
    /// carried over, and every template placeholder is an error.
    pub fn validate(&self) -> Result<ValidConfig, Report> {
        if !self.placeholders.is_empty() {
            let mut report = placeholder::report(&self.placeholders, true);
            if let Err(more) = self.validate_as_written() {
                report.extend(self.beyond_placeholders(more));
            }
            return Err(report);
        }
        self.validate_as_written()
    }

    /// Validates a document that may still be a template (`check`): each
    /// placeholder is a warning, and only problems beyond them are errors.
    pub fn validate_as_template(&self) -> TemplateCheck {
        let mut report = placeholder::report(&self.placeholders, false);
        match self.validate_as_written() {
            Ok(valid) => {
                let warnings = Report { diagnostics: valid.warnings().to_vec() };
                report.extend(self.beyond_placeholders(warnings));
                TemplateCheck { valid: Some(valid), report }
            }
            Err(errors) => {
                report.extend(self.beyond_placeholders(errors));
                TemplateCheck { valid: None, report }
            }
        }
    }

    /// Drops what a placeholder's own path already explains.
    fn beyond_placeholders(&self, mut report: Report) -> Report {
        report.diagnostics.retain(|d| !self.placeholders.iter().any(|p| p.covers(&d.path)));
        report
    }

    fn validate_as_written(&self) -> Result<ValidConfig, Report> {
        let mut config = self.config.clone();
        let mut notes = self.unknown_keys.clone();
        notes.extend(crate::rdma_bench::fill_from_bench(&mut config, &self.sections));
        let mut valid = config.validate().map_err(|mut report| {
            report.diagnostics.splice(0..0, notes.diagnostics.iter().cloned());
            report
        })?;
        if notes.has_errors() {
            notes.diagnostics.extend(valid.warnings().iter().cloned());
            return Err(notes);
        }
        valid.prepend_warnings(notes);
        Ok(valid)
    }

    /// Serialises the engine config back to DAQIRI YAML (`daqiri: cfg: ...`).
    pub fn engine_yaml(config: &EngineConfig) -> String {
        let section = DaqiriSection { daqiri: crate::model::DaqiriBody { cfg: config.clone() } };
        serde_yaml::to_string(&section).expect("the config model always serialises")
    }
}

/// `numbers`' findings, then `later`'s, less those at a path a number's
/// finding explains already (serde's "invalid type" for the same scalar).
fn numbers_then(numbers: &Report, later: Report) -> Report {
    let mut all = numbers.clone();
    all.diagnostics
        .extend(later.diagnostics.into_iter().filter(|d| !numbers.diagnostics.iter().any(|n| n.path == d.path)));
    all
}

/// The strict parser's refusal of the key at `path`: the keys its map takes,
/// and the one it was probably meant to be.
fn unknown_key_message(path: &str) -> String {
    let key = path.rsplit('.').next().unwrap_or(path);
    let Some(known) = crate::schema_at::known_keys(path) else {
        return format!("unknown key \"{key}\" (--lenient ignores unknown keys, with a warning each)");
    };
    let hint = crate::schema_at::closest(key, &known).map(|k| format!(" (did you mean \"{k}\"?)")).unwrap_or_default();
    format!(
        "unknown key \"{key}\"{hint}; this map takes: {} (--lenient ignores unknown keys, with a warning each)",
        known.join(", ")
    )
}

/// The section an unknown key at `path` sits in, where ignoring it would
/// change what lands where: a flow's match or action, a queue, a reorder
/// config. Elsewhere an unknown key is a warning.
fn section_that_changes_meaning(path: &str) -> Option<&'static str> {
    let segments: Vec<&str> = path.split('.').collect();
    // The last segment is the unknown key itself; what contains it decides.
    let within = &segments[..segments.len().saturating_sub(1)];
    within.iter().enumerate().find_map(|(i, segment)| {
        let next = within.get(i + 1).copied();
        let previous = i.checked_sub(1).map(|p| within[p]);
        if segment.starts_with("reorder_configs[") {
            Some("a reorder config")
        } else if segment.starts_with("queues[") && matches!(previous, Some("rx" | "tx")) {
            Some("a queue")
        } else if segment.starts_with("flows[") && next == Some("match") {
            Some("a flow's match")
        } else if segment.starts_with("flows[") && next.is_some_and(|n| n == "action" || n.starts_with("actions[")) {
            Some("a flow's action")
        } else {
            None
        }
    })
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
