//! How a bed met a scenario, recorded for the generated table
//! (`tests/conformance_table.py` writes docs/conformance.md from them).

use std::path::PathBuf;

/// A scenario's result on one bed. A failure panics and records nothing.
#[derive(Debug)]
pub enum Outcome {
    Passed,
    /// Refused with `NOT_SUPPORTED` naming this YAML path.
    Refused(String),
    /// The scenario means nothing on this bed, and why.
    NotApplicable(&'static str),
    /// Passed but for a limit of the bed's driver, said here, which the
    /// scenario bounded.
    PassedWithin(String),
}

/// Where the results go: `<dir>/<scenario>/<bed>`, with `dir` from
/// `CONFORMANCE_RESULTS` (the GPU machine's run, which has no build tree)
/// or else `target/tmp/conformance`.
fn results() -> PathBuf {
    std::env::var_os("CONFORMANCE_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance"))
}

/// Records `outcome` of `scenario` on `bed`.
pub fn record(bed: &str, scenario: &str, outcome: &Outcome) {
    let dir = results().join(scenario);
    std::fs::create_dir_all(&dir).expect("the results folder");
    let text = match outcome {
        Outcome::Passed => "passed".to_owned(),
        Outcome::Refused(path) => format!("refused by path: `{path}`"),
        Outcome::NotApplicable(why) => format!("not applicable: {why}"),
        Outcome::PassedWithin(limit) => format!("passed within a limit: {limit}"),
    };
    std::fs::write(dir.join(bed), text).expect("the result file");
}
