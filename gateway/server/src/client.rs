//! Client subcommands that talk to a running gateway's admin API:
//! `status`, and `capture start | list | stop | download`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

#[derive(Debug, Clone, Args)]
pub(crate) struct Connection {
    /// Admin API of the gateway.
    #[arg(long, global = true, default_value = "127.0.0.1:9464")]
    admin_addr: String,
    /// File with the bearer token (the gateway's --admin-token-file).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, Args)]
pub(crate) struct CaptureArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    action: CaptureAction,
}

#[derive(Debug, Subcommand)]
enum CaptureAction {
    /// Start a capture.
    Start {
        /// Interface name.
        #[arg(long)]
        interface: String,
        /// File name stem.
        #[arg(long)]
        name: String,
        /// pcap or raw.
        #[arg(long, default_value = "pcap")]
        format: String,
        /// Only this RX queue.
        #[arg(long)]
        queue: Option<u16>,
        /// Only this flow id.
        #[arg(long)]
        flow: Option<u32>,
        /// Stop after this many packets.
        #[arg(long)]
        max_packets: Option<u64>,
        /// Stop after this many bytes.
        #[arg(long)]
        max_bytes: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Bytes kept per packet.
        #[arg(long)]
        snaplen: Option<u32>,
        /// Start the next file (or object) once the current one holds this many bytes.
        #[arg(long)]
        rotate_bytes: Option<u64>,
        /// Write to `s3://bucket[/prefix]` (the gateway's S3 store) instead of its capture directory.
        #[arg(long)]
        destination: Option<String>,
        /// Wait until it finishes, showing progress.
        #[arg(long)]
        wait: bool,
    },
    /// List captures.
    List,
    /// Stop a capture.
    Stop {
        /// Capture id.
        id: u64,
    },
    /// Download a capture's file.
    Download {
        /// Capture id.
        id: u64,
        /// Where to write it.
        #[arg(long, short)]
        output: PathBuf,
    },
}

struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl Client {
    fn new(c: &Connection) -> anyhow::Result<Self> {
        let token = match &c.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .trim()
                    .to_owned(),
            ),
            None => None,
        };
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Ok(Self { agent, base: format!("http://{}", c.admin_addr), token })
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let response = match (method, body) {
            ("POST", Some(body)) => {
                let mut r = self.agent.post(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.send_json(body)
            }
            ("DELETE", _) => {
                let mut r = self.agent.delete(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            _ => self.agent.get(&url).call(),
        };
        let mut response = response.with_context(|| format!("cannot reach the gateway at {}", self.base))?;
        let status = response.status();
        let value: Value = response.body_mut().read_json().unwrap_or(Value::Null);
        if !status.is_success() {
            let field = value["field"].as_str().map(|f| format!(" (field {f})")).unwrap_or_default();
            bail!("{status}: {}{field}", value["message"].as_str().unwrap_or("no message"));
        }
        Ok(value)
    }
}

pub(crate) fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.connection)?;
    let status = client.call("GET", "/api/v1/status", None)?;
    let stats = client.call("GET", "/api/v1/stats", None)?;
    println!(
        "daqiri-gateway {} up {:.0} s, config generation {} ({})",
        status["version"].as_str().unwrap_or("?"),
        status["uptime_s"].as_f64().unwrap_or_default(),
        status["config"]["generation"],
        &status["config"]["sha256"].as_str().unwrap_or("")
            [..12.min(status["config"]["sha256"].as_str().unwrap_or("").len())]
    );
    for iface in stats["interfaces"].as_array().into_iter().flatten() {
        println!("{} (port {})", iface["name"].as_str().unwrap_or("?"), iface["id"]);
        for q in iface["rx_queues"].as_array().into_iter().flatten() {
            println!(
                "  rx {:<12} {:>14} packets {:>12.0} pps {:>8.3} Gb/s drops {}",
                q["name"].as_str().unwrap_or("?"),
                q["packets"],
                q["packets_per_s"].as_f64().unwrap_or_default(),
                q["bits_per_s"].as_f64().unwrap_or_default() / 1e9,
                q["drops"]
            );
        }
        println!("  drops before a queue: {}", iface["port_drops"]);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn capture(args: CaptureArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.connection)?;
    match args.action {
        CaptureAction::Start {
            interface,
            name,
            format,
            queue,
            flow,
            max_packets,
            max_bytes,
            duration,
            snaplen,
            rotate_bytes,
            destination,
            wait,
        } => {
            let mut body = json!({ "format": format, "interface": interface, "name": name });
            for (key, value) in [
                ("queue", queue.map(|v| json!(v))),
                ("flow", flow.map(|v| json!(v))),
                ("max_packets", max_packets.map(|v| json!(v))),
                ("max_bytes", max_bytes.map(|v| json!(v))),
                ("duration_s", duration.map(|v| json!(v))),
                ("snaplen", snaplen.map(|v| json!(v))),
                ("rotate_bytes", rotate_bytes.map(|v| json!(v))),
                ("destination", destination.map(|v| json!(v))),
            ] {
                if let Some(v) = value {
                    body[key] = v;
                }
            }
            let info = client.call("POST", "/api/v1/captures", Some(body))?;
            let id = info["id"].as_u64().context("the gateway answered without a capture id")?;
            println!("capture {id} started");
            if wait {
                let bar = ProgressBar::new(1000);
                bar.set_style(ProgressStyle::with_template("{bar:40} {percent}% {msg}")?);
                loop {
                    let info = client.call("GET", &format!("/api/v1/captures/{id}"), None)?;
                    bar.set_position((info["progress"].as_f64().unwrap_or_default() * 1000.0) as u64);
                    bar.set_message(format!(
                        "{} packets, {} bytes, {} capture drops",
                        info["packets"], info["bytes"], info["capture_drops"]
                    ));
                    if info["state"] != "running" {
                        bar.finish();
                        println!(
                            "{}: {}",
                            info["state"].as_str().unwrap_or("?"),
                            info["reason"].as_str().unwrap_or("")
                        );
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        CaptureAction::List => {
            for c in client.call("GET", "/api/v1/captures", None)?.as_array().into_iter().flatten() {
                println!(
                    "{:>4} {:<16} {:<5} {:<9} {:>10} packets {:>12} bytes {:>6} drops  {}",
                    c["id"],
                    c["name"].as_str().unwrap_or("?"),
                    c["format"].as_str().unwrap_or("?"),
                    c["state"].as_str().unwrap_or("?"),
                    c["packets"],
                    c["bytes"],
                    c["capture_drops"],
                    c["reason"].as_str().unwrap_or("")
                );
            }
        }
        CaptureAction::Stop { id } => {
            let info = client.call("DELETE", &format!("/api/v1/captures/{id}"), None)?;
            println!(
                "capture {id} {}: {} packets in {}",
                info["state"].as_str().unwrap_or("?"),
                info["packets"],
                info["files"]
            );
        }
        CaptureAction::Download { id, output } => download(&client, id, &output)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn download(client: &Client, id: u64, output: &PathBuf) -> anyhow::Result<()> {
    let url = format!("{}/api/v1/captures/{id}/download", client.base);
    let mut response = client.agent.get(&url).call().with_context(|| format!("cannot reach {url}"))?;
    if !response.status().is_success() {
        let value: Value = response.body_mut().read_json().unwrap_or(Value::Null);
        bail!("{}: {}", response.status(), value["message"].as_str().unwrap_or("no message"));
    }
    let total = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bar = ProgressBar::new(total);
    bar.set_style(ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec}")?);
    let mut file = std::fs::File::create(output).with_context(|| format!("cannot create {}", output.display()))?;
    let mut reader = bar.wrap_read(response.into_body().into_with_config().limit(u64::MAX).reader());
    let copied = std::io::copy(&mut reader, &mut file)?;
    file.flush()?;
    bar.finish();
    println!("{copied} bytes written to {}", output.display());
    Ok(())
}
