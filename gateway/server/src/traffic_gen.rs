//! `daqiri-gateway gen`: paced UDP or TCP traffic, sent through the engine's
//! own TX path (socket client interfaces built for the run).
//!
//! Each packet carries a network-order `u32` sequence number at
//! `--seq-offset` of its payload, per flow, as DAQIRI's `bench_tx` writes it.
//! `--flows K` sends K flows from source ports `--src-port` .. +K-1.
//! TCP sends a deterministic byte stream (a little-endian u64 counter) and
//! prints its SHA-256 so the receiver can prove it got every byte in order.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use daqiri::{Burst, Engine};
use daqiri_config::Document;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::consumer::hex;
use crate::shutdown::ShutdownFlag;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Proto {
    Udp,
    Tcp,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct GenArgs {
    /// Destination address.
    #[arg(long, default_value = "127.0.0.1:4096")]
    pub dest: SocketAddr,
    /// Transport.
    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,
    /// Packets (TCP: chunks) per second; 0 sends as fast as possible.
    #[arg(long, default_value_t = 100_000.0)]
    pub rate: f64,
    /// UDP payload bytes per packet (TCP: bytes per chunk).
    #[arg(long)]
    pub payload_size: Option<usize>,
    /// Stop after this many packets (over all flows).
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = crate::seconds::positive)]
    pub duration: Option<f64>,
    /// Payload offset of the u32 sequence number.
    #[arg(long)]
    pub seq_offset: Option<usize>,
    /// First sequence number.
    #[arg(long)]
    pub seq_start: Option<u32>,
    /// First source port (default: one the kernel picks).
    #[arg(long)]
    pub src_port: Option<u16>,
    /// Number of flows, one source port each (needs --src-port when above 1).
    #[arg(long, default_value_t = 1)]
    pub flows: u16,
    /// Packets per TX burst.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Send each flow's sequence numbers shuffled within windows of this
    /// many (every number still sent once), as a reorder plan would meet them.
    #[arg(long, default_value_t = 1)]
    pub shuffle_window: u32,
    /// Fill the bytes after the sequence number with a pattern of it
    /// (byte `j` of the payload = low byte of `seq + j`), so a receiver can
    /// check values, not only order.
    #[arg(long)]
    pub fill: bool,
    /// Take payload_size, sequence_number_offset/start, udp_src_port and
    /// udp_dst_port from this DAQIRI config's `bench_tx` section.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Write what was sent as JSON to this file.
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
}

/// The resolved plan of a run.
#[derive(Debug, Clone)]
struct Plan {
    payload: usize,
    seq_offset: usize,
    seq_start: u32,
}

pub(crate) fn main(mut args: GenArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = args.config.clone() {
        apply_bench_tx(&mut args, &path)?;
    }
    let shutdown = ShutdownFlag::install()?;
    let summary = generate(&args, &shutdown)?;
    if let Some(path) = &args.summary_json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn apply_bench_tx(args: &mut GenArgs, path: &Path) -> anyhow::Result<()> {
    let doc = Document::read(path).map_err(|r| anyhow::anyhow!("{}:\n{r}", path.display()))?;
    let Some(section) = doc.sections.get("bench_tx") else { bail!("{} has no bench_tx section", path.display()) };
    // bench_tx is a map, or a list of maps (one per TX queue): use the first.
    let bench = section.as_sequence().and_then(|s| s.first()).unwrap_or(section);
    let number = |key: &str| bench.get(key).and_then(serde_yaml::Value::as_u64);
    args.payload_size = args.payload_size.or(number("payload_size").map(|n| n as usize));
    args.seq_offset = args.seq_offset.or(number("sequence_number_offset").map(|n| n as usize));
    args.seq_start = args.seq_start.or(number("sequence_number_start").map(|n| n as u32));
    args.src_port = args.src_port.or(number("udp_src_port").map(|n| n as u16));
    if let Some(port) = number("udp_dst_port") {
        args.dest.set_port(port as u16);
    }
    Ok(())
}

pub(crate) fn generate(args: &GenArgs, shutdown: &ShutdownFlag) -> anyhow::Result<serde_json::Value> {
    let plan = Plan {
        payload: args.payload_size.unwrap_or(1000),
        seq_offset: args.seq_offset.unwrap_or(0),
        seq_start: args.seq_start.unwrap_or(0),
    };
    if args.proto == Proto::Udp && plan.payload > 65507 {
        bail!("--payload-size {} exceeds the largest UDP payload (65507)", plan.payload);
    }
    if plan.payload < plan.seq_offset + 4 && args.proto == Proto::Udp {
        bail!(
            "--payload-size {} has no room for the 4-byte sequence number at offset {}",
            plan.payload,
            plan.seq_offset
        );
    }
    if args.flows > 1 && args.src_port.is_none() {
        bail!("--flows {} needs --src-port (flows are told apart by source port)", args.flows);
    }
    if args.batch == 0 || args.rate.is_nan() || args.rate < 0.0 {
        bail!("--batch must be at least 1 and --rate at least 0");
    }
    let engine = Engine::from_yaml(&engine_yaml(args, &plan)).context("cannot start the generator's engine")?;
    let flows = args.flows.max(1) as usize;
    if args.shuffle_window == 0 {
        bail!("--shuffle-window must be at least 1 (1 sends in order)");
    }
    let mut seqs: Vec<Sequence> = (0..flows).map(|_| Sequence::new(plan.seq_start, args.shuffle_window)).collect();
    let mut stream = StreamPattern::default();
    let started = Instant::now();
    let deadline = args.duration.map(|s| started + Duration::from_secs_f64(s));
    let limit = args.count.unwrap_or(u64::MAX);
    // Each flow gets an equal share of --count, so per-flow totals are exact.
    let mut quota: Vec<u64> =
        (0..flows as u64).map(|f| limit / flows as u64 + u64::from(f < limit % flows as u64)).collect();
    let (mut sent, mut stalls) = (0u64, 0u64);
    while sent < limit && !shutdown.requested() && deadline.is_none_or(|d| Instant::now() < d) {
        let due = if args.rate == 0.0 {
            args.batch as u64
        } else {
            let owed = (started.elapsed().as_secs_f64() * args.rate) as u64;
            owed.saturating_sub(sent).min(args.batch as u64)
        };
        let flow = (0..flows).max_by_key(|&f| (quota[f], std::cmp::Reverse(f))).expect("at least one flow");
        let due = due.min(quota[flow]) as usize;
        if due == 0 {
            wait_for_next(started, sent, args.rate);
            continue;
        }
        let Ok(mut burst) = engine.get_tx_packet_burst(flow as u16, 0, due) else {
            stalls += 1;
            std::thread::yield_now();
            continue;
        };
        match args.proto {
            Proto::Udp => fill_udp(&mut burst, &plan, &mut seqs[flow], args.fill)?,
            Proto::Tcp => stream.fill(&mut burst, plan.payload)?,
        }
        let mut pending = burst;
        while let Err(refused) = engine.send_tx_burst(pending) {
            pending = refused.burst;
            std::thread::yield_now();
        }
        sent += due as u64;
        quota[flow] -= due as u64;
    }
    let elapsed = started.elapsed();
    let (tx_packets, tx_drops) = wait_until_sent(&engine, sent);
    engine.shutdown();
    let bytes = tx_packets * plan.payload as u64;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mut summary = json!({
        "proto": format!("{:?}", args.proto).to_lowercase(),
        "dest": args.dest.to_string(),
        "flows": flows,
        "queued": sent,
        "sent": tx_packets,
        "send_failures": tx_drops,
        "payload_bytes": bytes,
        "elapsed_s": secs,
        "rate_pps": tx_packets as f64 / secs,
        "payload_gbps": bytes as f64 * 8.0 / secs / 1e9,
        "buffer_stalls": stalls,
    });
    if args.proto == Proto::Tcp {
        summary["sha256"] = json!(stream.digest());
    }
    println!(
        "sent {tx_packets} packets ({bytes} payload bytes) to {} in {secs:.2} s: {:.0} pps, {:.3} Gb/s payload; {tx_drops} send failures",
        args.dest,
        tx_packets as f64 / secs,
        bytes as f64 * 8.0 / secs / 1e9
    );
    if args.proto == Proto::Tcp {
        println!("stream sha256 {}", stream.digest());
    }
    Ok(summary)
}

/// Sleeps until the next packet is due, spinning for the last stretch so the
/// pacing stays accurate at microsecond scale.
fn wait_for_next(started: Instant, sent: u64, rate: f64) {
    let next = started + Duration::from_secs_f64((sent + 1) as f64 / rate);
    let now = Instant::now();
    if next > now + Duration::from_micros(200) {
        std::thread::sleep(next - now - Duration::from_micros(100));
    } else {
        std::thread::yield_now();
    }
}

fn fill_udp(burst: &mut Burst, plan: &Plan, sequence: &mut Sequence, fill: bool) -> anyhow::Result<()> {
    for i in 0..burst.num_packets() {
        let mut packet = burst.packet_mut(i);
        let buf = packet.segment_buffer(0).context("TX packet without a buffer")?;
        let seq = sequence.next();
        buf[plan.seq_offset..plan.seq_offset + 4].copy_from_slice(&seq.to_be_bytes());
        if fill {
            for (j, byte) in buf[..plan.payload].iter_mut().enumerate().skip(plan.seq_offset + 4) {
                *byte = seq.wrapping_add(j as u32) as u8;
            }
        }
        packet.set_lengths(&[plan.payload])?;
    }
    Ok(())
}

/// One flow's sequence numbers: consecutive, or shuffled within windows.
#[derive(Debug)]
struct Sequence {
    /// First number of the current window.
    window_start: u32,
    /// The current window's offsets, in sending order.
    order: Vec<u32>,
    at: usize,
    /// xorshift state: the shuffle is the same on every run.
    state: u64,
}

impl Sequence {
    fn new(start: u32, window: u32) -> Self {
        let order = (0..window).collect();
        let mut sequence = Self { window_start: start, order, at: 0, state: 0x9e37_79b9_7f4a_7c15 };
        sequence.shuffle();
        sequence
    }

    fn next(&mut self) -> u32 {
        if self.at == self.order.len() {
            self.window_start = self.window_start.wrapping_add(self.order.len() as u32);
            self.at = 0;
            self.shuffle();
        }
        self.at += 1;
        self.window_start.wrapping_add(self.order[self.at - 1])
    }

    /// Fisher-Yates over the window with a small inline generator: one
    /// permutation per window, no dependency for it.
    fn shuffle(&mut self) {
        for i in (1..self.order.len()).rev() {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            self.order.swap(i, (self.state % (i as u64 + 1)) as usize);
        }
    }
}

/// The TCP byte stream: a little-endian u64 counter, hashed as it is written.
#[derive(Debug, Default)]
struct StreamPattern {
    word: u64,
    carry: Vec<u8>,
    hash: Sha256,
}

impl StreamPattern {
    fn fill(&mut self, burst: &mut Burst, chunk: usize) -> anyhow::Result<()> {
        for i in 0..burst.num_packets() {
            let mut packet = burst.packet_mut(i);
            let buf = &mut packet.segment_buffer(0).context("TX packet without a buffer")?[..chunk];
            for byte in buf.iter_mut() {
                if self.carry.is_empty() {
                    self.carry.extend(self.word.to_le_bytes().iter().rev());
                    self.word += 1;
                }
                *byte = self.carry.pop().expect("refilled above");
            }
            self.hash.update(&*buf);
            packet.set_lengths(&[chunk])?;
        }
        Ok(())
    }

    fn digest(&self) -> String {
        hex(&self.hash.clone().finalize())
    }
}

/// Waits (up to 10 s) until the TX workers have sent everything queued.
fn wait_until_sent(engine: &Engine, queued: u64) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = engine.stats();
        let (packets, drops) = stats
            .ports
            .iter()
            .flat_map(|p| &p.tx_queues)
            .fold((0, 0), |(p, d), q| (p + q.stats.packets, d + q.stats.total_drops()));
        if packets + drops >= queued || Instant::now() >= deadline {
            return (packets, drops);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn engine_yaml(args: &GenArgs, plan: &Plan) -> String {
    let scheme = match args.proto {
        Proto::Udp => "udp",
        Proto::Tcp => "tcp",
    };
    let any_ip = if args.dest.is_ipv4() { "0.0.0.0" } else { "[::]" };
    let batch = args.batch;
    // The first core this process may run on: core 0 is not in every cpuset.
    let core = daqiri::preflight::allowed_cores().first().copied().unwrap_or(0);
    let num_bufs = (batch * 256).max(4096);
    let mut yaml = format!(
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: socket\n    tx_meta_buffers: 512\n    memory_regions:\n    - {{ name: tx, kind: host, num_bufs: {num_bufs}, buf_size: {} }}\n    interfaces:\n",
        plan.payload.max(64)
    );
    for flow in 0..args.flows.max(1) {
        let local =
            args.src_port.map(|p| format!(", local_addr: \"{scheme}://{any_ip}:{}\"", p + flow)).unwrap_or_default();
        yaml += &format!(
            "    - name: flow{flow}\n      socket_config: {{ mode: client, remote_addr: \"{scheme}://{}\"{local} }}\n      tx: {{ queues: [{{ name: tx, id: 0, cpu_core: {core}, batch_size: {batch}, memory_regions: [tx] }}] }}\n",
            args.dest
        );
    }
    yaml
}
