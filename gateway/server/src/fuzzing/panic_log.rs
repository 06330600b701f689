//! AFL keeps a crashing input but not what the target printed, and an input
//! that fails only after the ones before it (a persistent process's state,
//! a loaded machine's timing) passes when replayed alone: so each panic's
//! message is also appended to a file that `tests/fuzz.sh` prints.

use std::io::Write;

/// File in the temporary directory (`tests/fuzz.sh` gives each target its own).
pub const PANIC_LOG: &str = "panics.log";

/// From now on, each panic's message and place is also appended to
/// [`PANIC_LOG`] in `std::env::temp_dir()`, before the panic hook there was.
pub fn log_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let path = std::env::temp_dir().join(PANIC_LOG);
        if let Ok(mut log) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(log, "pid {}: {info}", std::process::id());
        }
        previous(info);
    }));
}
