//! daqiri-operator: reconciles `DaqiriPort` / `DaqiriFlow` into gateway configs.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use daqiri_operator::controller::{self, Context, Metrics, Options};
use daqiri_operator::gateway::GatewayClient;
use daqiri_operator::leader::{LeaderElector, RETRY_PERIOD};
use daqiri_operator::node_config::NodeConfigAgent;
use kube::runtime::events::{Recorder, Reporter};

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
    /// Create or update the CRDs in the cluster (server-side apply); the
    /// chart runs this as its pre-install/pre-upgrade hook.
    ApplyCrds {
        /// Also label this namespace with the Pod Security level its gateways need.
        #[arg(long, requires = "pod_security")]
        label_namespace: Option<String>,
        /// The level: `privileged`, `baseline` or `restricted`.
        #[arg(long, value_parser = ["privileged", "baseline", "restricted"])]
        pod_security: Option<String>,
    },
    /// Run the controller (in a cluster, or against the current kubeconfig).
    Run(RunArgs),
    /// Keep a gateway's config file equal to its node's ConfigMap (runs beside each gateway).
    NodeConfig(NodeConfigArgs),
    /// Stop the operator of a namespace and remove its finalizers, so the
    /// namespace can be deleted; the chart runs this as its pre-delete hook.
    Release {
        /// Namespace of the resources and the Lease.
        #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
        namespace: String,
        /// The operator's Lease (its `run --lease-name`).
        #[arg(long, default_value = "daqiri-operator")]
        lease_name: String,
        /// The operator's Deployment: the Lease goes with it.
        #[arg(long, default_value = "daqiri-operator")]
        operator_deployment: String,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Namespace of the resources, the ConfigMaps and the gateway pods.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Prefix of the per-node ConfigMaps: `<prefix>-<node>`, key `config.yaml`.
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
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Lease used to elect one active replica.
    #[arg(long, default_value = "daqiri-operator")]
    lease_name: String,
    /// Identity in the lease and in events (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "daqiri-operator")]
    identity: String,
}

#[derive(Debug, Args)]
struct NodeConfigArgs {
    /// Namespace of the ConfigMaps.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Prefix of the per-node ConfigMaps (the operator's `--config-map`).
    #[arg(long, default_value = "daqiri-gateway-config")]
    config_map: String,
    /// This node's name.
    #[arg(long, env = "NODE_NAME")]
    node: String,
    /// The file the gateway reads.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let runtime = || tokio::runtime::Runtime::new().context("cannot start the async runtime");
    match Cli::parse().command {
        Command::Crdgen { out } => daqiri_operator::crdgen::write(&out),
        Command::ApplyCrds { label_namespace, pod_security } => {
            runtime()?.block_on(apply_crds(label_namespace.zip(pod_security)))
        }
        Command::Run(args) => runtime()?.block_on(run(args)),
        Command::Release { namespace, lease_name, operator_deployment } => runtime()?.block_on(async {
            let client = kube::Client::try_default().await.context("cannot reach the Kubernetes API")?;
            let released =
                daqiri_operator::uninstall::release(client, &namespace, &lease_name, &operator_deployment).await?;
            println!(
                "the operator of {namespace} is stopped; {} resources let go of its finalizer, {} of its objects deleted",
                released.finalizers, released.deleted
            );
            Ok(())
        }),
        Command::NodeConfig(args) => runtime()?.block_on(async {
            let client = kube::Client::try_default().await.context("cannot reach the Kubernetes API")?;
            let agent =
                NodeConfigAgent { namespace: args.namespace, prefix: args.config_map, node: args.node, out: args.out };
            tokio::select! {
                result = agent.run(client) => result,
                () = shutdown_signal() => Ok(()),
            }
        }),
    }
}

async fn apply_crds(pod_security: Option<(String, String)>) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await.context("cannot reach the Kubernetes API")?;
    daqiri_operator::crdgen::apply(client.clone()).await?;
    if let Some((namespace, level)) = pod_security {
        daqiri_operator::crdgen::label_pod_security(client, &namespace, &level).await?;
    }
    Ok(())
}

/// Seconds since the epoch of the last answered Lease round: /readyz.
#[derive(Debug, Clone, Default)]
struct Readiness(Arc<AtomicI64>);

impl Readiness {
    fn now() -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
    }

    fn contacted(&self) {
        self.0.store(Self::now(), Ordering::Relaxed);
    }

    /// Ready while the API answered within the last few lease rounds.
    fn ready(&self) -> bool {
        Self::now() - self.0.load(Ordering::Relaxed) <= 3 * RETRY_PERIOD.as_secs() as i64 + 1
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
    let readiness = Readiness::default();
    serve_metrics(args.metrics_addr, metrics.clone(), readiness.clone()).await?;
    let reporter = Reporter { controller: controller::MANAGER.into(), instance: Some(args.identity.clone()) };
    let ctx = Arc::new(Context::new(
        client.clone(),
        args.namespace.clone(),
        Options { config_map: args.config_map, gateway_selector: args.gateway_selector },
        GatewayClient::new(args.gateway_admin_port, token),
        Recorder::new(client.clone(), reporter),
        metrics,
    ));
    let elector = LeaderElector::new(client, &args.namespace, &args.lease_name, &args.identity);
    let contacted = || readiness.contacted();
    tracing::info!(identity = %args.identity, "waiting for the lease {}", args.lease_name);
    tokio::select! {
        () = elector.acquire(&contacted) => {}
        () = shutdown_signal() => return Ok(()),
    }
    tracing::info!("leading: reconciling DaqiriPort and DaqiriFlow in {}", args.namespace);
    let outcome = tokio::select! {
        () = controller::run(ctx) => Ok(()),
        lost = elector.hold(&contacted) => Err(anyhow::anyhow!("{lost}; exiting so that the new leader takes over alone")),
        () = shutdown_signal() => Ok(()),
    };
    // Cleared, not left to expire: a standby takes over at its next retry.
    match tokio::time::timeout(Duration::from_secs(5), elector.release()).await {
        Ok(Ok(())) => tracing::info!("released the lease {}", args.lease_name),
        Ok(Err(e)) => tracing::warn!("cannot release the lease {}: {e}", args.lease_name),
        Err(_) => tracing::warn!("releasing the lease {} timed out", args.lease_name),
    }
    outcome
}

/// SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler can always be installed");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

async fn serve_metrics(addr: SocketAddr, metrics: Metrics, readiness: Readiness) -> anyhow::Result<()> {
    use axum::http::StatusCode;
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(move || async move { metrics.render() }))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/readyz",
            axum::routing::get(move || async move {
                if readiness.ready() {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "the Kubernetes API has not answered the lease rounds")
                }
            }),
        );
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on --metrics-addr {addr}"))?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}
