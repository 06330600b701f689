//! Log output: human-readable by default, JSON lines with `--log-json`.
//! `RUST_LOG` filters as usual (default `info`).

use tracing_subscriber::EnvFilter;

pub(crate) fn init(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
