//! `daqiri-gateway`: see the library's documentation for the subcommands.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    daqiri_gateway::main()
}
