//! `daqiri_config_validate`: upstream DAQIRI's config validator's command
//! line (see the library's `validate` module).

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    daqiri_gateway::validate::main()
}
