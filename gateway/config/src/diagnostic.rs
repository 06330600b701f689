//! Findings about a config, each tied to the YAML path it is about.

use std::fmt;

use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The config cannot run as written.
    Error,
    /// The config runs, but not quite as written, or a placeholder remains.
    Warning,
}

/// One finding: where it is (`daqiri.cfg.interfaces[1].rx.flows[0].action.id`) and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// YAML path of the offending key.
    pub path: String,
    /// What is wrong and what would be valid.
    pub message: String,
    /// An error only because no build of ours can honour the key (a
    /// running engine refuses it with `NOT_SUPPORTED`), not because the
    /// config is malformed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub not_supported: bool,
}

impl Diagnostic {
    /// A finding at `path`.
    pub fn new(severity: Severity, path: &YamlPath, message: impl Into<String>) -> Self {
        Self { severity, path: path.to_string(), message: message.into(), not_supported: false }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{label}: {}: {}", self.path, self.message)
    }
}

/// All findings of one check, errors and warnings together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Findings in the order they were made.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// Records an error at `path`.
    pub fn error(&mut self, path: &YamlPath, message: impl Into<String>) {
        self.push(Severity::Error, path, message);
    }

    /// Records a warning at `path`.
    pub fn warn(&mut self, path: &YamlPath, message: impl Into<String>) {
        self.push(Severity::Warning, path, message);
    }

    /// Records an error at `path` for a key no build of ours can honour.
    pub fn refuse(&mut self, path: &YamlPath, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic { not_supported: true, ..Diagnostic::new(Severity::Error, path, message) });
    }

    fn push(&mut self, severity: Severity, path: &YamlPath, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(severity, path, message));
    }

    /// Whether every error is a key no build of ours can honour (and there is one).
    pub fn only_not_supported(&self) -> bool {
        self.has_errors() && self.errors().all(|d| d.not_supported)
    }

    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Warning)
    }

    /// Appends the findings of another report.
    pub fn extend(&mut self, other: Report) {
        self.diagnostics.extend(other.diagnostics);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for d in &self.diagnostics {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Report {}

/// A path into the YAML document, written the way users read it:
/// `daqiri.cfg.interfaces[1].rx.flows[0]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlPath(String);

impl YamlPath {
    /// `daqiri.cfg`, where every engine setting lives.
    pub fn cfg() -> Self {
        Self("daqiri.cfg".to_owned())
    }

    /// A path from its written form.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The path of a map key below this one.
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}.{key}", self.0))
    }

    /// The path of a list element below this one.
    pub fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }
}

impl fmt::Display for YamlPath {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}
