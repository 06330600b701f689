//! daqiri-operator: reconciles `DaqiriPort` / `DaqiriFlow` into gateway configs.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use daqiri_operator::controller::{self, Context, Metrics, Options};
use daqiri_operator::gateway::GatewayClient;
use kube::runtime::events::{Recorder, Reporter};
use kube_lease_manager::LeaseManagerBuilder;

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
    /// Run the controllers (in a cluster, or against the current kubeconfig).
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Namespace of the resources, the ConfigMap and the gateway pods.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// ConfigMap the gateways mount; one key per node, `<node>.yaml`.
    #[arg(long, default_value = "daqiri-gateway-config")]
    config_map: String,
    /// Label selector of the gateway pods.
    #[arg(long, default_value = "app.kubernetes.io/component=gateway")]
    gateway_selector: String,
    /// Admin API port of the gateway pods.
    #[arg(long, default_value_t = 9464)]
    gateway_admin_port: u16,
    /// File holding the gateways' admin bearer token.
    #[arg(long)]
    gateway_token_file: Option<PathBuf>,
    /// Address of /metrics and /healthz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Lease used to elect one active replica.
    #[arg(long, default_value = "daqiri-operator")]
    lease_name: String,
    /// Identity in the lease and in events (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "daqiri-operator")]
    identity: String,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    match Cli::parse().command {
        Command::Crdgen { out } => daqiri_operator::crdgen::write(&out),
        Command::Run(args) => tokio::runtime::Runtime::new()?.block_on(run(args)),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await.context("cannot reach the Kubernetes API")?;
    let token = match &args.gateway_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --gateway-token-file {}", path.display()))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let metrics = Metrics::default();
    serve_metrics(args.metrics_addr, metrics.clone()).await?;
    let reporter = Reporter { controller: controller::MANAGER.into(), instance: Some(args.identity.clone()) };
    let ctx = Arc::new(Context {
        client: client.clone(),
        namespace: args.namespace.clone(),
        options: Options { config_map: args.config_map, gateway_selector: args.gateway_selector },
        gateway: GatewayClient::new(args.gateway_admin_port, token),
        recorder: Recorder::new(client.clone(), reporter),
        metrics,
    });
    // Only the lease holder reconciles; a replica that loses the lease exits and restarts as a follower.
    let lease = LeaseManagerBuilder::new(client, &args.lease_name)
        .with_namespace(&args.namespace)
        .with_identity(&args.identity)
        .build()
        .await
        .context("cannot set up leader election")?;
    let (mut leader, _task) = lease.watch().await;
    tracing::info!(identity = %args.identity, "waiting for the lease {}", args.lease_name);
    while !*leader.borrow_and_update() {
        leader.changed().await.context("leader election stopped")?;
    }
    tracing::info!("leading: reconciling DaqiriPort and DaqiriFlow in {}", args.namespace);
    tokio::select! {
        () = controller::run(ctx) => Ok(()),
        lost = leader.wait_for(|leading| !leading) => {
            lost.context("leader election stopped")?;
            anyhow::bail!("lost the lease {}; exiting so that a new leader takes over", args.lease_name)
        }
    }
}

async fn serve_metrics(addr: SocketAddr, metrics: Metrics) -> anyhow::Result<()> {
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(move || async move { metrics.render() }))
        .route("/healthz", axum::routing::get(|| async { "ok" }));
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on --metrics-addr {addr}"))?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}
