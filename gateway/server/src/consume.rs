//! `daqiri-gateway consume`: a consumer in its own process (the
//! daqiri-consumer client), subscribed to one RX queue of a running
//! gateway through its consumer socket. It counts what arrives, checks
//! sequence numbers where asked, and prints a JSON summary; a tool for
//! trying a gateway's hand-off and for the tests of it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use daqiri_consumer::{Options, Subscription, Target, WhenFull};
use sha2::{Digest, Sha256};

use crate::sequence::{SequenceStats, read_sequence};

#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// The gateway's consumer socket (its `run --consumer-socket`).
    #[arg(long)]
    pub socket: PathBuf,
    /// The interface to receive from, by its name in the config.
    #[arg(long)]
    pub interface: String,
    /// Its RX queue, by id (queue 0 unless a flow or a plan is named).
    #[arg(long, conflicts_with_all = ["flow", "plan"])]
    pub queue: Option<u16>,
    /// One of its flows, by id: that flow's packets, from whichever queue.
    #[arg(long, conflicts_with = "plan")]
    pub flow: Option<u32>,
    /// One of its reorder plans, by name: the plan's aggregates.
    #[arg(long)]
    pub plan: Option<String>,
    /// Join this group of consumers: each burst goes to one member.
    #[arg(long)]
    pub group: Option<String>,
    /// Hold the gateway back while this consumer's ring is full, rather
    /// than lose bursts for it alone.
    #[arg(long)]
    pub hold_back: bool,
    /// Bursts this consumer may hold or leave unread before the gateway
    /// drops bursts for it (1 to 4096).
    #[arg(long, default_value_t = 256)]
    pub slots: u32,
    /// File holding the gateway's consumer token (an empty one is refused).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Check a network-order u32 sequence number at this payload offset.
    #[arg(long)]
    pub seq_offset: Option<usize>,
    /// Hash every packet's bytes in order (SHA-256), to compare with what was sent.
    #[arg(long)]
    pub digest: bool,
    /// Stop once this many packets arrived.
    #[arg(long)]
    pub packets: Option<u64>,
    /// Stop once no burst came for this many seconds (after the first).
    #[arg(long, default_value_t = 5.0, value_parser = crate::seconds::positive)]
    pub idle: f64,
    /// Keep the first N bursts without releasing them until exit.
    #[arg(long, default_value_t = 0)]
    pub hold: usize,
}

/// What a consumer saw.
#[derive(Debug, Default, serde::Serialize)]
struct Seen {
    subscription: u64,
    bursts: u64,
    packets: u64,
    /// Of them, packets that lay in the gateway's GPU memory (mapped here
    /// through CUDA; copied to the host only for `--digest` or `--seq-offset`).
    gpu_packets: u64,
    bytes: u64,
    /// Bursts the gateway dropped for this consumer, its ring full.
    lost_bursts: u64,
    sequence: Option<SequenceSeen>,
    /// SHA-256 of every packet's bytes in order (`--digest`).
    digest: Option<String>,
    /// From the first burst to the last, and the packets a second over it.
    seconds: f64,
    packets_per_s: f64,
    /// How long bursts took from the gateway's delivery to this process
    /// taking them, in microseconds: median, 99th percentile, most.
    handoff_us: Option<Percentiles>,
    /// Why the gateway ended the subscription, if it did.
    ended: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Percentiles {
    fn of(mut nanos: Vec<u64>) -> Option<Self> {
        nanos.sort_unstable();
        let at = |q: f64| nanos[((nanos.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
        (!nanos.is_empty()).then(|| Self { p50: at(0.5), p99: at(0.99), max: at(1.0) })
    }
}

#[derive(Debug, serde::Serialize)]
struct SequenceSeen {
    received: u64,
    first: Option<u32>,
    last: Option<u32>,
    gaps: u64,
    late: u64,
}

pub(crate) fn main(args: ConsumeArgs) -> anyhow::Result<ExitCode> {
    let token = crate::run::read_token_file(args.token_file.as_deref(), "--token-file")?;
    let target = match (&args.flow, &args.plan) {
        (Some(flow), _) => Target::flow(&args.interface, *flow),
        (_, Some(plan)) => Target::plan(&args.interface, plan),
        _ => Target::queue(&args.interface, args.queue.unwrap_or(0)),
    };
    let when_full = if args.hold_back { WhenFull::HoldBack } else { WhenFull::Drop };
    let options = Options { slots: args.slots, group: args.group.clone(), when_full, token };
    let subscription = Subscription::connect(&args.socket, target, options)?;
    // The first line says it is subscribed (a test or a script waits for it).
    println!("subscribed {}", subscription.id());
    let mut seen = Seen { subscription: subscription.id(), ..Seen::default() };
    let mut sequence = args.seq_offset.map(|_| SequenceStats::default());
    let mut held = Vec::new();
    let mut hasher = args.digest.then(Sha256::new);
    let (mut handoffs, mut first_at, mut last_at) = (Vec::new(), None, 0u64);
    let idle = Duration::from_secs_f64(args.idle);
    while args.packets.is_none_or(|n| seen.packets < n) {
        let burst = match subscription.next(Some(idle)) {
            Ok(Some(burst)) => burst,
            Ok(None) if seen.bursts > 0 => break,
            Ok(None) => continue,
            Err(daqiri_consumer::Error::Ended(reason)) => {
                seen.ended = Some(reason);
                break;
            }
            Err(e) => return Err(e.into()),
        };
        let now = daqiri_consumer::ring::monotonic_ns();
        handoffs.push(now.saturating_sub(burst.delivered_ns()));
        first_at.get_or_insert(now);
        last_at = now;
        seen.bursts += 1;
        seen.lost_bursts += burst.lost_before();
        for packet in burst.packets() {
            let Some(memory) = packet.memory(0) else { continue };
            seen.packets += 1;
            seen.gpu_packets += u64::from(memory.is_gpu());
            if hasher.is_none() && sequence.is_none() {
                seen.bytes += memory.len() as u64;
                continue;
            }
            // A check's copy where the packet lies in GPU memory.
            let bytes = memory.to_host()?;
            seen.bytes += bytes.len() as u64;
            if let Some(hasher) = hasher.as_mut() {
                hasher.update(&bytes);
            }
            if let (Some(stats), Some(offset)) = (sequence.as_mut(), args.seq_offset)
                && let Some(seq) = read_sequence(&bytes, offset)
            {
                stats.observe(seq);
            }
        }
        if held.len() < args.hold {
            held.push(burst);
        }
    }
    seen.sequence = sequence.map(|s| SequenceSeen {
        received: s.received,
        first: s.first,
        last: s.last,
        gaps: s.gaps,
        late: s.late,
    });
    seen.digest = hasher.map(|h| crate::consumer::hex(&h.finalize()));
    seen.seconds = first_at.map_or(0.0, |first| (last_at - first) as f64 / 1e9);
    seen.packets_per_s = if seen.seconds > 0.0 { seen.packets as f64 / seen.seconds } else { 0.0 };
    seen.handoff_us = Percentiles::of(handoffs);
    drop(held);
    println!("{}", serde_json::to_string(&seen)?);
    Ok(ExitCode::SUCCESS)
}
