//! `daqiri-gateway run`: the main job.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use daqiri::Engine;
use daqiri_config::{Strictness, ValidConfig};

use crate::capture::{CaptureLimits, CaptureManager, S3Settings};
use crate::consumer::{self, ConsumerOptions};
use crate::control::ControlSettings;
use crate::live::LiveEngine;
use crate::shutdown::ShutdownFlag;
use crate::status::{StatusMeter, summary_json, summary_text};
use crate::subscriptions::{Hub, Listener};

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// DAQIRI YAML config; without it the embedded default runs (UDP server on 127.0.0.1:4096).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Check a network-order u32 sequence number at this payload offset, per flow.
    #[arg(long)]
    pub seq_offset: Option<usize>,
    /// Hash each port's received bytes (SHA-256), e.g. to verify a TCP stream.
    #[arg(long, conflicts_with = "consumer_cores")]
    pub digest: bool,
    /// Drain each RX queue on its own consumer thread, pinned to these cores
    /// in turn (e.g. `8-11` or `8,9`); by default one consumer drains every
    /// queue on master_core. For benchmarks whose receive spans several cores.
    #[arg(long, value_parser = parse_cores)]
    pub consumer_cores: Option<CoreList>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = crate::seconds::positive)]
    pub duration: Option<f64>,
    /// Stop once traffic has been seen and then nothing arrived for this many seconds.
    #[arg(long, value_parser = crate::seconds::positive)]
    pub exit_when_idle: Option<f64>,
    /// Seconds between status lines (at least 0.1).
    #[arg(long, default_value_t = 1.0, value_parser = crate::seconds::status_interval)]
    pub status_interval: f64,
    /// Write the summary as JSON to this file at exit.
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
    /// Address of the admin API (health, status, stats, config, OpenAPI).
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub admin_addr: std::net::SocketAddr,
    /// Do not serve the admin API.
    #[arg(long)]
    pub no_admin: bool,
    /// File holding the bearer token that mutating admin endpoints require
    /// (it also grants reads).
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// File holding the bearer token that reads need beyond health and
    /// metrics: the config, stats, captures and their packets. Give the same
    /// file as --admin-token-file for one token for all.
    #[arg(long)]
    pub admin_read_token_file: Option<PathBuf>,
    /// Directory captures are written to (names cannot leave it).
    #[arg(long, default_value = "captures")]
    pub capture_dir: PathBuf,
    /// Captures refuse to start, and stop, below this much free space (MiB).
    #[arg(long, default_value_t = 1024)]
    pub capture_free_space_floor_mb: u64,
    /// Most captures running at once; one more is refused with 429. Each
    /// holds up to 8,192 packet copies in memory.
    #[arg(long, default_value_t = crate::capture::DEFAULT_MAX_CAPTURES, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_captures: u16,
    /// MiB the running captures' packet copies may hold together; a copy
    /// past it is dropped and counted as a capture drop.
    #[arg(long, default_value_t = crate::capture::DEFAULT_CAPTURE_MEMORY_MB, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub capture_memory_mb: u64,
    /// Where captures with an `s3://` destination go.
    #[command(flatten)]
    pub capture_s3: S3Settings,
    /// Unix socket where consumers in other processes subscribe to RX queues
    /// and read their bursts in place (the daqiri-consumer crate); none by default.
    #[arg(long)]
    pub consumer_socket: Option<PathBuf>,
    /// File holding the token consumers must give to subscribe (beside the
    /// socket's permissions, owner and group).
    #[arg(long, requires = "consumer_socket")]
    pub consumer_token_file: Option<PathBuf>,
    /// Connections the consumer socket serves at once (each a thread);
    /// past them a new one is refused before its hello, counted.
    #[arg(long, default_value_t = 256, requires = "consumer_socket", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub consumer_max_connections: u32,
    /// Percent of each RX queue's burst metadata entries and of each
    /// region's buffers that all consumers together may pin; each consumer
    /// an equal part of it. Past it a burst is dropped for the consumer,
    /// counted as over budget; receive keeps the rest.
    #[arg(long, default_value_t = crate::subscriptions::DEFAULT_BUDGET_PERCENT, requires = "consumer_socket", value_parser = clap::value_parser!(u8).range(1..=90))]
    pub consumer_budget_percent: u8,
    /// Share host memory only: refuse subscriptions whose packets lie in
    /// GPU memory (`device` regions), which a consumer that imports it could
    /// map writable (CUDA lets no exporter forbid that).
    #[arg(long, requires = "consumer_socket")]
    pub consumer_host_memory_only: bool,
    /// When --config does not exist yet, serve the admin API without an engine
    /// and start once the file appears (a ConfigMap key the operator has not
    /// written for this node yet) or a config is PUT.
    #[arg(long, requires = "config", conflicts_with = "no_admin")]
    pub wait_for_config: bool,
    /// Run a thread whose `cpu_core` or `master_core` (or --consumer-cores
    /// entry) this process may not run on unpinned, with a warning, instead
    /// of refusing the config: for a config written for another host.
    /// `DAQIRI_ALLOW_UNPINNED_CORES=1` does the same.
    #[arg(long)]
    pub allow_unpinned_cores: bool,
    /// Take configs written for older, lenient parsers (started and PUT):
    /// an unknown key is a warning, not an error, except in a flow's match
    /// or action, a queue or a reorder config, where ignoring it would
    /// change what lands where.
    #[arg(long)]
    pub lenient: bool,
}

pub(crate) fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    daqiri::preflight::allow_unpinned_cores(args.allow_unpinned_cores);
    crate::config_text::set_strictness(if args.lenient { Strictness::Lenient } else { Strictness::Strict });
    if let Some(cores) = &args.consumer_cores {
        require_present(cores)?;
    }
    let loaded = match &args.config {
        Some(path) if args.wait_for_config && !path.exists() => {
            tracing::warn!("{} does not exist yet: no engine runs until it appears", path.display());
            None
        }
        _ => Some(load(args.config.as_ref())?),
    };
    let shutdown = ShutdownFlag::install()?;
    run_gateway(loaded, &args, &shutdown)?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses --consumer-cores entries this process may not run on, unless
/// unpinned threads are allowed.
fn require_present(cores: &CoreList) -> anyhow::Result<()> {
    let allowed = daqiri::preflight::allowed_cores();
    let absent: Vec<String> = cores.0.iter().filter(|c| !allowed.contains(c)).map(ToString::to_string).collect();
    if absent.is_empty() || daqiri::preflight::unpinned_cores_allowed() {
        return Ok(());
    }
    anyhow::bail!(
        "--consumer-cores: core(s) {} are not ones this process may run on ({allowed:?}); name cores from that set, or give --allow-unpinned-cores",
        absent.join(", ")
    )
}

/// A validated config and the YAML it came from.
#[derive(Debug)]
pub(crate) struct LoadedConfig {
    pub valid: ValidConfig,
    pub yaml: String,
}

/// Loads and validates a config file, or the embedded default.
pub(crate) fn load(path: Option<&PathBuf>) -> anyhow::Result<LoadedConfig> {
    let (yaml, origin) = match path {
        Some(path) => (
            daqiri::config::read_text(path).with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (crate::DEFAULT_CONFIG.to_owned(), "the embedded default config".to_owned()),
    };
    let valid =
        crate::config_text::validate(&yaml).map_err(|report| anyhow::anyhow!("{origin} is invalid:\n{report}"))?;
    for warning in valid.warnings().iter().chain(&daqiri::preflight::host_warnings(&valid)) {
        tracing::warn!("{warning}");
    }
    tracing::info!("running {origin}");
    Ok(LoadedConfig { valid, yaml })
}

/// Runs the engine until a stop condition, printing status lines and a summary.
pub(crate) fn run_gateway(
    config: Option<LoadedConfig>,
    args: &RunArgs,
    shutdown: &ShutdownFlag,
) -> anyhow::Result<serde_json::Value> {
    let started_from = config.as_ref().map(|c| c.yaml.clone().into_bytes());
    let (live, yaml) = match config {
        Some(config) => (LiveEngine::new(Engine::new(config.valid).context("cannot start the engine")?), config.yaml),
        None => (LiveEngine::empty(), String::new()),
    };
    let captures = CaptureManager::new(
        live.get().as_deref(),
        args.capture_dir.clone(),
        args.capture_free_space_floor_mb << 20,
        CaptureLimits { max_running: usize::from(args.max_captures), ring_memory: args.capture_memory_mb << 20 },
        args.capture_s3.clone(),
    )?;
    let hub = Hub::new(
        read_token_file(args.consumer_token_file.as_deref(), "--consumer-token-file")?,
        args.consumer_budget_percent,
        args.consumer_host_memory_only,
    );
    let listener = args
        .consumer_socket
        .as_deref()
        .map(|path| Listener::start(path, args.consumer_max_connections as usize, &hub, &live))
        .transpose()?;
    let admin = match args.no_admin {
        true => None,
        false => {
            let tokens = crate::admin::Tokens::from_files(
                args.admin_token_file.as_deref(),
                args.admin_read_token_file.as_deref(),
            )?;
            tokens.warn_if_exposed(args.admin_addr);
            let state = crate::admin::AdminState::new(
                Arc::clone(&live),
                yaml,
                args.config.clone(),
                (Arc::clone(&captures), Arc::clone(&hub)),
                tokens,
            )?;
            Some((crate::admin::serve(args.admin_addr, Arc::clone(&state))?, state))
        }
    };
    let hangup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hangup)).context("cannot watch SIGHUP")?;
    let options = ConsumerOptions { seq_offset: args.seq_offset, digest: args.digest };
    let consumer_stop = Arc::new(AtomicBool::new(false));
    let drains = match (&args.consumer_cores, live.get()) {
        (Some(cores), Some(engine)) => consumer::per_queue(&engine.config(), &cores.0),
        _ => vec![consumer::Drains::Everything],
    };
    let consumers = consumer::spawn(drains, &live, options, &consumer_stop, (&captures, &hub))?;
    let mut meter = StatusMeter::new(live.get().map(|e| e.stats()).unwrap_or_default());
    let interval = Duration::from_secs_f64(args.status_interval);
    let deadline = args.duration.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut last_packets = 0;
    let mut last_change = Instant::now();
    let mut next_status = Instant::now() + interval;
    let mut watch = args.config.as_ref().map(|path| FileWatch::new(path.clone(), started_from));
    let mut control = ControlSettings::default();
    while !shutdown.requested() && deadline.is_none_or(|d| Instant::now() < d) {
        let change = watch.as_mut().map_or(FileChange::Same, FileWatch::look);
        if change == FileChange::Removed && args.wait_for_config {
            if let Some((_, state)) = &admin {
                crate::admin::unload(
                    state,
                    &format!("{} was removed", args.config.as_ref().expect("watched").display()),
                );
            }
        } else if hangup.swap(false, std::sync::atomic::Ordering::Relaxed) {
            match &admin {
                // The outcome is logged and counted by the reload itself.
                Some((_, state)) => drop(crate::admin::reload_from_file(state)),
                None => tracing::warn!("SIGHUP ignored: reloading needs the admin API (drop --no-admin)"),
            }
        } else if change == FileChange::Changed {
            match &admin {
                Some((_, state)) => drop(crate::admin::reload_if_changed(state)),
                None => tracing::warn!("the config file changed; reloading it needs the admin API (drop --no-admin)"),
            }
        }
        std::thread::sleep(Duration::from_millis(20).min(interval));
        hub.tend(&live);
        let Some(engine) = live.get() else {
            continue; // restarting
        };
        control.follow(engine.config().config());
        let packets = received(&engine);
        if packets != last_packets {
            last_packets = packets;
            last_change = Instant::now();
        }
        if let Some(idle) = args.exit_when_idle
            && last_packets > 0
            && last_change.elapsed() >= Duration::from_secs_f64(idle)
        {
            break;
        }
        if Instant::now() >= next_status {
            println!("{}", meter.line(engine.stats()));
            next_status += interval;
        }
    }
    // Stop receiving, then let the application drain what was already delivered.
    drop(admin);
    live.shutdown();
    hub.stop_waiting();
    consumer_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut report = consumer::ConsumerReport::default();
    for consumer in consumers {
        report.merge(consumer.join().map_err(|_| anyhow::anyhow!("a consumer thread panicked"))?);
    }
    hub.end_all("the gateway stops");
    drop(listener);
    captures.stop_all();
    let stats = live.get().map(|e| e.stats()).unwrap_or_default();
    print!("{}", summary_text(&stats, &report, meter.elapsed()));
    let summary = summary_json(&stats, &report, meter.elapsed());
    if let Some(path) = &args.summary_json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(summary)
}

/// A token from the file `path` that flag `flag` names (trimmed; an empty
/// one is refused): the consumer socket's, on both of its ends.
pub(crate) fn read_token_file(path: Option<&std::path::Path>, flag: &str) -> anyhow::Result<Option<String>> {
    let Some(path) = path else { return Ok(None) };
    let token = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {flag} {}", path.display()))?
        .trim()
        .to_owned();
    anyhow::ensure!(!token.is_empty(), "{flag} {} is empty", path.display());
    Ok(Some(token))
}

fn received(engine: &Engine) -> u64 {
    engine
        .stats()
        .ports
        .iter()
        .map(|p| {
            let total = p.rx_total();
            total.packets + total.total_drops()
        })
        .sum()
}

/// Notices when the config file's content changes. Polls once a second: a
/// mounted ConfigMap is replaced by swapping a `..data` symlink, which an
/// inotify watch on the file itself never sees, while re-reading always does.
#[derive(Debug)]
struct FileWatch {
    path: PathBuf,
    content: Option<Vec<u8>>,
    next_look: Instant,
    /// The read error last logged, so a lasting one is logged once.
    failing: Option<std::io::ErrorKind>,
}

impl FileWatch {
    /// Watches `path` for content other than `started_from`, what the
    /// engine runs (None: nothing yet). Not what the file holds when the
    /// watch starts: a change between loading the file and watching it
    /// (the admin API and the consumer socket start in between) would be
    /// taken for the running config and never applied.
    fn new(path: PathBuf, started_from: Option<Vec<u8>>) -> Self {
        Self { path, content: started_from, next_look: Instant::now() + Duration::from_secs(1), failing: None }
    }

    /// Only a file that is not there is "removed". Any other read error (no
    /// descriptors left, I/O) changes nothing: unloading the engine or
    /// re-applying the file over a config that was PUT would act on a
    /// failure to look, not on the file.
    fn look(&mut self) -> FileChange {
        if Instant::now() < self.next_look {
            return FileChange::Same;
        }
        self.next_look = Instant::now() + Duration::from_secs(1);
        let now = match std::fs::read(&self.path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                if self.failing != Some(e.kind()) {
                    tracing::warn!("cannot read {} ({e}); keeping the running config", self.path.display());
                    self.failing = Some(e.kind());
                }
                return FileChange::Same;
            }
        };
        self.failing = None;
        if now == self.content {
            return FileChange::Same;
        }
        let change = if now.is_some() { FileChange::Changed } else { FileChange::Removed };
        self.content = now;
        change
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileChange {
    Same,
    Changed,
    /// Gone: the operator left no port on this node.
    Removed,
}

/// CPU cores, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CoreList(pub Vec<usize>);

/// A core list: `8`, `8,9`, `8-11`, or a mix (`0,4-6`).
fn parse_cores(text: &str) -> Result<CoreList, String> {
    let mut cores = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("\"{part}\" is not a core or a range of cores (such as 8 or 8-11)");
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last): (usize, usize) =
                    (first.trim().parse().map_err(|_| bad())?, last.trim().parse().map_err(|_| bad())?);
                if first > last {
                    return Err(format!("range {part} runs backwards"));
                }
                cores.extend(first..=last);
            }
            None => cores.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(CoreList(cores))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_that_cannot_be_read_for_a_while_is_neither_removed_nor_changed() {
        let dir = std::env::temp_dir().join(format!("file-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        std::fs::write(&path, "a: 1\n").unwrap();
        let mut watch = FileWatch::new(path.clone(), Some(b"a: 1\n".to_vec()));
        let look = |watch: &mut FileWatch| {
            watch.next_look = Instant::now();
            watch.look()
        };
        // A directory in its place: reading fails with an error other than "not found".
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(look(&mut watch), FileChange::Same, "a read error is not a removal");
        std::fs::remove_dir(&path).unwrap();
        std::fs::write(&path, "a: 1\n").unwrap();
        assert_eq!(look(&mut watch), FileChange::Same, "the same file back is no change to re-apply");
        std::fs::write(&path, "a: 2\n").unwrap();
        assert_eq!(look(&mut watch), FileChange::Changed);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(look(&mut watch), FileChange::Removed);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_changed_before_the_watch_began_is_a_change_to_what_the_engine_runs() {
        let dir = std::env::temp_dir().join(format!("file-watch-early-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        // Loaded "a: 1"; the file changed before the watch was made.
        std::fs::write(&path, "a: 2\n").unwrap();
        let mut watch = FileWatch::new(path.clone(), Some(b"a: 1\n".to_vec()));
        watch.next_look = Instant::now();
        assert_eq!(watch.look(), FileChange::Changed);
        // Waiting for a file that appeared before the watch began.
        let mut waiting = FileWatch::new(path.clone(), None);
        waiting.next_look = Instant::now();
        assert_eq!(waiting.look(), FileChange::Changed);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn consumer_cores_read_lists_and_ranges_and_refuse_the_rest() {
        assert_eq!(parse_cores("8").unwrap().0, vec![8]);
        assert_eq!(parse_cores("0,4-6").unwrap().0, vec![0, 4, 5, 6]);
        assert!(parse_cores("6-4").unwrap_err().contains("backwards"));
        assert!(parse_cores("a").unwrap_err().contains("\"a\" is not a core"));
        assert!(parse_cores("").is_err(), "an empty list names no core");
    }
}
