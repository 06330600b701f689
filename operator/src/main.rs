//! daqiri-operator: reconciles `DaqiriPort` / `DaqiriFlow` into gateway configs.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the CRD manifests (one YAML file per CRD).
    Crdgen {
        /// Output directory.
        #[arg(long, default_value = "crds")]
        out: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crdgen { out } => daqiri_operator::crdgen::write(&out),
    }
}
