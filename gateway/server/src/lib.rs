//! `daqiri-gateway`: the DAQIRI engine as a command.
//!
//! `run` is the main job (the engine on a config, an application loop that
//! drains every queue, a status line per second); `check` validates configs;
//! `gen` sends paced UDP or TCP traffic; `demo` runs gateway and generator
//! together.
//!
//! The binary (`main.rs`) calls [`main`]; the library exists so the fuzz
//! targets in `fuzz/` can drive the admin API in-process ([`fuzzing`]), and
//! for the second binary, `daqiri_config_validate` ([`validate`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admin;
mod capture;
mod check;
mod client;
mod config_text;
mod consume;
mod consumer;
mod control;
mod demo;
mod device_plugin;
pub mod fuzzing;
mod live;
mod logging;
mod run;
mod seconds;
mod sequence;
mod shutdown;
mod status;
mod subscriptions;
mod telemetry;
mod traffic_gen;
pub mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The DAQIRI configuration the gateway runs when no `--config` is given.
pub(crate) const DEFAULT_CONFIG: &str = include_str!("../../../configs/default.yaml");

#[derive(Debug, Parser)]
#[command(name = "daqiri-gateway", version, about = "Packet acquisition with NVIDIA DAQIRI's configs, in Rust")]
struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the engine on a config (the embedded default when none is given).
    Run(run::RunArgs),
    /// Validate config files; exit 0 only when all are valid.
    Check(check::CheckArgs),
    /// Send paced UDP or TCP traffic.
    Gen(traffic_gen::GenArgs),
    /// Run the gateway on its default config with generated traffic.
    Demo(demo::DemoArgs),
    /// Print the JSON Schema of the DAQIRI config format.
    Schema,
    /// Show a running gateway's status and statistics.
    Status(client::StatusArgs),
    /// Start, list, stop or download captures of a running gateway.
    Capture(client::CaptureArgs),
    /// Read a running gateway's RX queue from this process, zero-copy,
    /// through its consumer socket; print what arrived as JSON.
    Consume(consume::ConsumeArgs),
}

/// The `daqiri-gateway` command line: parses the arguments and runs the subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_json);
    let result = match cli.command {
        Command::Run(args) => run::main(args),
        Command::Check(args) => check::main(args),
        Command::Gen(args) => traffic_gen::main(args),
        Command::Demo(args) => demo::main(args),
        Command::Status(args) => client::status(args),
        Command::Capture(args) => client::capture(args),
        Command::Consume(args) => consume::main(args),
        Command::Schema => {
            println!("{}", serde_json::to_string_pretty(&daqiri_config::json_schema()).expect("schema serialises"));
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command};

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The `daqiri-gateway` command lines in the shell blocks of README.md
    /// and docs/, as `(file, line, arguments)`: each starts with the command
    /// (after `sudo` or variables) or is `cargo run ... --bin daqiri-gateway -- ...`.
    fn documented_commands() -> Vec<(String, usize, Vec<String>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md")];
        files.extend(std::fs::read_dir(root.join("docs")).expect("docs/").map(|e| e.expect("an entry").path()));
        let mut found = Vec::new();
        for file in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "md")) {
            let text = std::fs::read_to_string(&file).expect("a page");
            let mut in_shell = false;
            for (n, line) in text.lines().enumerate() {
                if line.starts_with("```") {
                    in_shell = !in_shell && matches!(line.trim(), "```sh" | "```bash");
                    continue;
                }
                // "..." stands for any arguments: such a line shows a shape, not a command.
                if !in_shell || line.contains("...") {
                    continue;
                }
                let words =
                    shlex::split(line).unwrap_or_else(|| panic!("{}:{}: unbalanced quotes", file.display(), n + 1));
                let words: Vec<String> = words.into_iter().take_while(|w| !w.starts_with('#')).collect();
                let command = words.iter().position(|w| w != "sudo" && !w.contains('='));
                let at = match command.map(|c| (c, words[c].as_str())) {
                    Some((c, "daqiri-gateway")) => Some(c),
                    Some((_, "cargo")) if words.iter().any(|w| w == "daqiri-gateway") => {
                        words.iter().position(|w| w == "--")
                    }
                    _ => None,
                };
                if let Some(at) = at {
                    let mut args = vec!["daqiri-gateway".to_owned()];
                    args.extend(words[at + 1..].iter().cloned());
                    found.push((file.display().to_string(), n + 1, args));
                }
            }
        }
        found
    }

    #[test]
    fn every_command_the_readme_and_docs_show_parses() {
        let commands = documented_commands();
        assert!(commands.len() >= 10, "the pages show the gateway's commands: {commands:?}");
        for (file, line, args) in commands {
            if let Err(e) = Cli::try_parse_from(&args) {
                panic!("{file}:{line}: `{}` does not parse:\n{e}", args.join(" "));
            }
        }
    }

    #[test]
    fn run_reads_its_consumer_cores() {
        let cli = Cli::try_parse_from(["daqiri-gateway", "run", "--consumer-cores", "5-6,9"]).expect("parses");
        let Command::Run(args) = cli.command else { panic!("a run command") };
        assert_eq!(args.consumer_cores.map(|c| c.0), Some(vec![5, 6, 9]));
    }
}
