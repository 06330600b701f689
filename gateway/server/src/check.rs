//! `daqiri-gateway check FILE...`: judge configs as DAQIRI would, and list
//! what this host or build cannot run as warnings.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use daqiri_config::{Diagnostic, Document, Strictness};

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Config files to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print findings as JSON.
    #[arg(long)]
    json: bool,
    /// Judge files written for older, lenient parsers: an unknown key is a
    /// warning (listed), not an error, except where ignoring it would change
    /// what lands where.
    #[arg(long)]
    lenient: bool,
}

pub(crate) fn main(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let mut all_valid = true;
    for file in &args.files {
        let strictness = if args.lenient { Strictness::Lenient } else { Strictness::Strict };
        let (valid, findings) = check_file(file, strictness);
        all_valid &= valid;
        if args.json {
            let out = serde_json::json!({ "file": file, "valid": valid, "diagnostics": findings });
            println!("{out}");
            continue;
        }
        for d in &findings {
            println!("{}: {d}", file.display());
        }
        let (errors, warnings) = count(&findings);
        let verdict = if valid { "valid" } else { "INVALID" };
        println!("{}: {verdict} ({errors} errors, {warnings} warnings)", file.display());
    }
    Ok(if all_valid { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn check_file(file: &Path, strictness: Strictness) -> (bool, Vec<Diagnostic>) {
    match daqiri_config::nesting::read_text(file) {
        Ok(text) => judge(&text, strictness),
        Err(e) => {
            let path = daqiri_config::YamlPath::from_text(file.display().to_string());
            let unread =
                Diagnostic::new(daqiri_config::Severity::Error, &path, format!("cannot read config file: {e}"));
            (false, vec![unread])
        }
    }
}

/// Whether a config's text is valid, and every finding: a template's
/// placeholders are warnings, so a file whose only problem is placeholders
/// is valid here (`run` refuses it until they are replaced); what this host
/// or build cannot run is a warning too.
pub(crate) fn judge(text: &str, strictness: Strictness) -> (bool, Vec<Diagnostic>) {
    let doc = match Document::parse_with(text, strictness) {
        Ok(doc) => doc,
        Err(report) => return (false, report.diagnostics),
    };
    let checked = doc.validate_as_template();
    let valid = !checked.report.has_errors();
    let mut findings = checked.report.diagnostics;
    if let Some(config) = &checked.valid {
        findings.extend(daqiri::preflight::host_warnings(config));
    }
    (valid, findings)
}

fn count(findings: &[Diagnostic]) -> (usize, usize) {
    let errors = findings.iter().filter(|d| d.severity == daqiri_config::Severity::Error).count();
    (errors, findings.len() - errors)
}
