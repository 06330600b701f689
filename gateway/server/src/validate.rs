//! `daqiri_config_validate`: upstream DAQIRI's hardware-free validator's
//! command line over `check`'s judgement, so scripts written for upstream's
//! tool run unchanged with ours. A line per file, `FILE: valid` or
//! `FILE: invalid`, each error indented under it; exit 0 when every file is
//! valid, 1 when one is not, 2 for a usage error or a file that cannot be
//! read. `--list-engines` prints the engines this build runs, one a line.
//! What this host lacks (a NIC, hugepages) is not judged, as upstream's
//! tool does not judge it; `daqiri-gateway check` says that too.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use daqiri_config::{Severity, Strictness};

#[derive(Debug, Parser)]
#[command(name = "daqiri_config_validate", version, about = "Validate DAQIRI config files without hardware")]
struct ValidateArgs {
    /// Config files to validate.
    #[arg(required_unless_present = "list_engines")]
    files: Vec<PathBuf>,
    /// Print the engines this build runs, one a line, and exit.
    #[arg(long)]
    list_engines: bool,
}

/// The `daqiri_config_validate` command line.
pub fn main() -> ExitCode {
    let args = ValidateArgs::parse();
    if args.list_engines {
        for engine in daqiri::support::engines_built() {
            println!("{}", engine.as_str());
        }
        return ExitCode::SUCCESS;
    }
    let (mut invalid, mut unreadable) = (false, false);
    for file in &args.files {
        let text = match daqiri_config::nesting::read_text(file) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("{}: cannot read: {e}", file.display());
                unreadable = true;
                continue;
            }
        };
        let (valid, findings) = crate::check::judge(&text, Strictness::Strict);
        println!("{}: {}", file.display(), if valid { "valid" } else { "invalid" });
        for error in findings.iter().filter(|d| d.severity == Severity::Error) {
            println!("  {}: {}", error.path, error.message);
        }
        invalid |= !valid;
    }
    ExitCode::from(match (unreadable, invalid) {
        (true, _) => 2,
        (false, true) => 1,
        (false, false) => 0,
    })
}
