//! `daqiri-gateway check FILE...`: judge configs as DAQIRI would, and list
//! what this host or build cannot run as warnings.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use daqiri_config::{Diagnostic, Document, KeyPolicy};

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
        let keys = if args.lenient { KeyPolicy::Lenient } else { KeyPolicy::Strict };
        let (valid, findings) = check_file(file, keys);
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

/// A template's placeholders are warnings: a file whose only problem is
/// placeholders is valid here, and `run` refuses it until they are replaced.
fn check_file(file: &Path, keys: KeyPolicy) -> (bool, Vec<Diagnostic>) {
    let doc = match Document::read_with(file, keys) {
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
