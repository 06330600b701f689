//! `daqiri-gateway demo`: the gateway on its embedded default config and the
//! generator sending both of its flows, in one process, so a newcomer sees
//! traffic, steering and sequence checks with one command.

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use crate::run::{self, RunArgs};
use crate::shutdown::ShutdownFlag;
use crate::traffic_gen::{self, GenArgs, Proto};

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Seconds of traffic.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Packets per second per flow.
    #[arg(long, default_value_t = 100_000.0)]
    rate: f64,
    /// UDP payload bytes.
    #[arg(long, default_value_t = 1000)]
    payload_size: usize,
}

pub(crate) fn main(args: DemoArgs) -> anyhow::Result<ExitCode> {
    // A show on any machine: the default config's cores 0 and 1 may be absent.
    daqiri::preflight::allow_unpinned_cores(true);
    let config = run::load(None)?;
    let shutdown = ShutdownFlag::install()?;
    let run_args = RunArgs {
        config: None,
        seq_offset: Some(0),
        digest: false,
        consumer_cores: None,
        duration: None,
        exit_when_idle: Some(1.0),
        status_interval: 1.0,
        summary_json: None,
        admin_addr: "127.0.0.1:9464".parse().expect("literal address"),
        no_admin: false,
        admin_token_file: None,
        admin_read_token_file: None,
        capture_dir: std::env::temp_dir().join("daqiri-demo-captures"),
        capture_free_space_floor_mb: 256,
        max_captures: crate::capture::DEFAULT_MAX_CAPTURES,
        capture_memory_mb: crate::capture::DEFAULT_CAPTURE_MEMORY_MB,
        capture_s3: crate::capture::S3Settings::default(),
        consumer_socket: None,
        consumer_token_file: None,
        consumer_max_connections: 256,
        consumer_budget_percent: crate::subscriptions::DEFAULT_BUDGET_PERCENT,
        consumer_host_memory_only: false,
        wait_for_config: false,
        allow_unpinned_cores: true,
        lenient: false,
    };
    let gateway = {
        let shutdown = shutdown.clone();
        std::thread::spawn(move || run::run_gateway(Some(config), &run_args, &shutdown))
    };
    // Give the gateway a moment to bind before traffic starts.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let senders: Vec<_> = [10000u16, 11000]
        .into_iter()
        .map(|src_port| {
            let gen_args = GenArgs {
                dest: "127.0.0.1:4096".parse().expect("literal address"),
                proto: Proto::Udp,
                rate: args.rate,
                payload_size: Some(args.payload_size),
                count: None,
                duration: Some(args.duration),
                seq_offset: Some(0),
                seq_start: Some(0),
                src_port: Some(src_port),
                flows: 1,
                batch: 32,
                shuffle_window: 1,
                fill: false,
                config: None,
                summary_json: None,
            };
            let shutdown = shutdown.clone();
            std::thread::spawn(move || traffic_gen::generate(&gen_args, &shutdown))
        })
        .collect();
    for sender in senders {
        sender.join().map_err(|_| anyhow::anyhow!("a generator thread panicked"))??;
    }
    let summary = gateway.join().map_err(|_| anyhow::anyhow!("the gateway thread panicked"))??;
    shutdown.request();
    let clean = summary["sequences"]
        .as_array()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|f| f["in_order_without_loss"] == true));
    if !clean {
        bail!("the demo saw loss or reordering; see the summary above");
    }
    println!("demo: every flow arrived complete and in order");
    Ok(ExitCode::SUCCESS)
}
