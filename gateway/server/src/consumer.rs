//! The gateway's application loop: drains every RX queue, checks sequence
//! numbers per flow and, for byte streams, hashes what arrived.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use daqiri::Engine;
use sha2::{Digest, Sha256};

use crate::capture::CaptureManager;
use crate::live::LiveEngine;
use crate::sequence::{SequenceStats, read_sequence};
use crate::subscriptions::{HeldBack, Hub};

/// What the application does with each packet.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConsumerOptions {
    /// Check a `u32` sequence number at this payload offset.
    pub seq_offset: Option<usize>,
    /// Hash every port's received bytes in order (SHA-256).
    pub digest: bool,
}

/// Key of a flow in reports: port, queue and flow id (`None` = unmatched).
pub(crate) type FlowKey = (u16, u16, Option<u32>);

/// What the application saw.
#[derive(Debug, Default)]
pub(crate) struct ConsumerReport {
    pub packets: u64,
    pub bytes: u64,
    pub sequences: BTreeMap<FlowKey, SequenceStats>,
    pub digests: BTreeMap<u16, String>,
}

/// What one consumer drains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drains {
    /// Every RX queue of every port, on `master_core` (the default).
    Everything,
    /// One RX queue, on its own core (`run --consumer-cores`): the
    /// application side of a multi-queue receive is then never the limit.
    Queue { port: u16, queue: u16, core: usize },
}

impl Drains {
    /// The next burst of what it drains, but of no queue in `waiting`
    /// (queues whose last burst a consumer holds back); `turn` rotates the
    /// queue looked at first while some wait, so none is starved.
    fn next(self, engine: &Engine, waiting: &[HeldBack], turn: &mut usize) -> Option<daqiri::Burst> {
        let waits = |port, queue| waiting.iter().any(|h| h.queue() == (port, queue));
        match self {
            Drains::Everything if waiting.is_empty() => engine.get_rx_burst_any(),
            Drains::Everything => {
                let config = engine.config();
                let queues: Vec<(u16, u16)> = config
                    .interfaces()
                    .flat_map(|(port, iface)| iface.rx_queues().iter().map(move |q| (port as u16, q.id)))
                    .filter(|&(port, queue)| !waits(port, queue))
                    .collect();
                *turn = turn.wrapping_add(1);
                (0..queues.len()).find_map(|k| {
                    let (port, queue) = queues[(*turn + k) % queues.len()];
                    engine.get_rx_burst(port, queue).ok().flatten()
                })
            }
            Drains::Queue { port, queue, .. } if waits(port, queue) => None,
            Drains::Queue { port, queue, .. } => engine.get_rx_burst(port, queue).ok().flatten(),
        }
    }

    fn pin(self) {
        match self {
            // Off the workers' cores, beside the control threads (follows master_core across reloads).
            Drains::Everything => crate::control::pin_control_thread(),
            Drains::Queue { .. } => {}
        }
    }
}

/// One consumer per RX queue of `config`, pinned to `cores` in turn.
pub(crate) fn per_queue(config: &daqiri::config::ValidConfig, cores: &[usize]) -> Vec<Drains> {
    config
        .interfaces()
        .flat_map(|(port, iface)| iface.rx_queues().iter().map(move |q| (port as u16, q.id)))
        .zip(cores.iter().cycle())
        .map(|((port, queue), &core)| Drains::Queue { port, queue, core })
        .collect()
}

/// Starts a consumer thread for each of `drains`; the handles give their reports.
pub(crate) fn spawn(
    drains: Vec<Drains>,
    live: &Arc<LiveEngine>,
    options: ConsumerOptions,
    stop: &Arc<AtomicBool>,
    (captures, hub): (&Arc<CaptureManager>, &Arc<Hub>),
) -> std::io::Result<Vec<std::thread::JoinHandle<ConsumerReport>>> {
    drains
        .into_iter()
        .map(|drains| {
            let (live, stop, captures, hub) =
                (Arc::clone(live), Arc::clone(stop), Arc::clone(captures), Arc::clone(hub));
            let name = match drains {
                Drains::Everything => "consumer".to_owned(),
                Drains::Queue { port, queue, .. } => format!("consumer-{port}-{queue}"),
            };
            std::thread::Builder::new().name(name).spawn(move || {
                if let Drains::Queue { core, .. } = drains
                    && !core_affinity::set_for_current(core_affinity::CoreId { id: core })
                {
                    tracing::warn!(core, "cannot pin a consumer to core {core}; it runs unpinned");
                }
                run(&live, drains, options, &stop, (&captures, &hub))
            })
        })
        .collect()
}

impl ConsumerReport {
    /// Adds another consumer's report (consumers drain disjoint queues).
    pub(crate) fn merge(&mut self, other: ConsumerReport) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        self.sequences.extend(other.sequences);
        self.digests.extend(other.digests);
    }
}

/// Drains bursts until `stop` is set and the engine is shut down and empty,
/// offering each to the consumers outside the gateway once counted.
/// When a reload restarts the engine, drains the old one, then follows the new.
pub(crate) fn run(
    live: &LiveEngine,
    drains: Drains,
    options: ConsumerOptions,
    stop: &AtomicBool,
    (captures, hub): (&CaptureManager, &Hub),
) -> ConsumerReport {
    let mut report = ConsumerReport::default();
    let mut hashers: BTreeMap<u16, Sha256> = BTreeMap::new();
    let mut idle_rounds = 0u32;
    let mut engine: Option<Arc<Engine>> = live.get();
    // Bursts consumers that hold back had no room for, a queue each: those
    // queues wait, the others are drained meanwhile.
    let mut held_back: Vec<HeldBack> = Vec::new();
    let mut turn = 0usize;
    loop {
        held_back = held_back.into_iter().filter_map(|held| hub.retry(held)).collect();
        let Some(burst) = engine.as_ref().and_then(|e| drains.next(e, &held_back, &mut turn)) else {
            let drained = engine.as_ref().is_none_or(|e| e.has_stopped());
            if drained && stop.load(Ordering::Relaxed) && held_back.is_empty() {
                break;
            }
            if drained {
                // Let go of a stopped engine so a restart can free its memory.
                engine = live.get().filter(|e| !e.has_stopped());
            }
            idle_rounds += 1;
            drains.pin();
            if idle_rounds > 64 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::thread::yield_now();
            }
            continue;
        };
        idle_rounds = 0;
        let (port, queue) = (burst.port_id(), burst.queue_id());
        captures.tap(&burst, || engine.as_ref().and_then(|e| e.rx_backlog(port, queue).ok()));
        for packet in burst.packets() {
            report.packets += 1;
            report.bytes += packet.len() as u64;
            if let Some(offset) = options.seq_offset
                && let Some(seq) = read_sequence(packet.data(), offset)
            {
                report.sequences.entry((port, queue, packet.flow_id())).or_default().observe(seq);
            }
            if options.digest {
                let hasher = hashers.entry(port).or_default();
                for segment in (0..daqiri::MAX_SEGMENTS).filter_map(|s| packet.segment(s)) {
                    hasher.update(segment);
                }
            }
        }
        held_back.extend(hub.offer(burst));
    }
    report.digests = hashers.into_iter().map(|(port, h)| (port, hex(&h.finalize()))).collect();
    report
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
