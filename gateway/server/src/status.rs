//! The live status line (one per second) and the summary at exit.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use daqiri::{EngineStats, QueueStatsEntry, QueueStatsSnapshot};
use serde_json::{Value, json};

use crate::admin::ReorderStats;
use crate::consumer::ConsumerReport;

/// Turns successive snapshots into rates.
#[derive(Debug)]
pub(crate) struct StatusMeter {
    started: Instant,
    last_at: Instant,
    last: EngineStats,
}

impl StatusMeter {
    pub(crate) fn new(first: EngineStats) -> Self {
        let now = Instant::now();
        Self { started: now, last_at: now, last: first }
    }

    /// One line: per RX queue packets/s, Gb/s and drops, then port drops and
    /// pool use. Queues are matched to the last snapshot by port and queue
    /// name; after an engine restart the counters start again from zero, and
    /// a counter below its last value is counted from zero.
    pub(crate) fn line(&mut self, now_stats: EngineStats) -> String {
        let now = Instant::now();
        let secs = now.duration_since(self.last_at).as_secs_f64().max(1e-6);
        let mut line = format!("[{:>5.0}s]", now.duration_since(self.started).as_secs_f64());
        for port in &now_stats.ports {
            let before = self.last.ports.iter().find(|b| b.name == port.name);
            let queue_before = |queues: fn(&daqiri::PortStats) -> &[QueueStatsEntry], q: &QueueStatsEntry| {
                before
                    .and_then(|b| queues(b).iter().find(|b| b.id == q.id && b.name == q.name))
                    .map(|b| b.stats)
                    .unwrap_or_default()
            };
            for q in &port.rx_queues {
                let b = queue_before(|p| &p.rx_queues, q);
                let pps = since(q.stats.packets, b.packets) as f64 / secs;
                let gbps = since(q.stats.bytes, b.bytes) as f64 * 8.0 / secs / 1e9;
                let drops = since(q.stats.total_drops(), b.total_drops());
                let _ = write!(line, " {}/{}: {} {:.2} Gb/s drops {drops} |", port.name, q.name, rate(pps), gbps);
            }
            let port_before = before.map_or(0, |b| b.rx_port_drops.total_drops());
            let port_drops = since(port.rx_port_drops.total_drops(), port_before);
            let _ = write!(line, " {} port drops {port_drops} |", port.name);
            for q in &port.tx_queues {
                let b = queue_before(|p| &p.tx_queues, q);
                let _ = write!(
                    line,
                    " {}/{} tx {} |",
                    port.name,
                    q.name,
                    rate(since(q.stats.packets, b.packets) as f64 / secs)
                );
            }
        }
        for r in &now_stats.regions {
            let _ = write!(line, " pool {} {:.0}%", r.name, 100.0 * f64::from(r.in_use) / f64::from(r.num_bufs.max(1)));
        }
        self.last_at = now;
        self.last = now_stats;
        line
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// How much a counter grew since `before`; all of it when it went back
/// (a new engine counts from zero).
fn since(now: u64, before: u64) -> u64 {
    now.checked_sub(before).unwrap_or(now)
}

fn rate(pps: f64) -> String {
    if pps >= 1e6 { format!("{:.2} Mpps", pps / 1e6) } else { format!("{:.1} kpps", pps / 1e3) }
}

fn drops_json(s: &QueueStatsSnapshot) -> Value {
    s.drops_by_reason().map(|(r, n)| (r.as_str().to_owned(), json!(n))).collect::<serde_json::Map<_, _>>().into()
}

/// The summary as JSON (for scripts and tests).
pub(crate) fn summary_json(stats: &EngineStats, report: &ConsumerReport, elapsed: Duration) -> Value {
    let ports: Vec<Value> = stats
        .ports
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "name": p.name,
                "backend": p.backend.as_str(),
                "rx_queues": p.rx_queues.iter().map(|q| json!({
                    "id": q.id, "name": q.name, "packets": q.stats.packets, "bytes": q.stats.bytes,
                    "bursts": q.stats.bursts, "drops": drops_json(&q.stats),
                })).collect::<Vec<_>>(),
                "tx_queues": p.tx_queues.iter().map(|q| json!({
                    "id": q.id, "name": q.name, "packets": q.stats.packets, "bytes": q.stats.bytes, "drops": drops_json(&q.stats),
                })).collect::<Vec<_>>(),
                "port_drops": drops_json(&p.rx_port_drops),
                "flows": p.flows.iter().map(|f| json!({
                    "id": f.id, "name": f.name, "queue_ids": f.queue_ids, "packets": f.packets, "bytes": f.bytes,
                })).collect::<Vec<_>>(),
                "reorder": p.reorder.iter().map(ReorderStats::from).collect::<Vec<_>>(),
            })
        })
        .collect();
    let sequences: Vec<Value> = report
        .sequences
        .iter()
        .map(|((port, queue, flow), s)| json!({ "port": port, "queue_id": queue, "flow_id": flow, "in_order_without_loss": s.in_order_without_loss(), "stats": s }))
        .collect();
    json!({
        "elapsed_s": elapsed.as_secs_f64(),
        "consumed": { "packets": report.packets, "bytes": report.bytes },
        "ports": ports,
        "sequences": sequences,
        "digests": report.digests.iter().map(|(p, d)| json!({ "port": p, "sha256": d })).collect::<Vec<_>>(),
    })
}

/// The summary as text.
pub(crate) fn summary_text(stats: &EngineStats, report: &ConsumerReport, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-6);
    let mut out = format!("summary after {secs:.1} s: consumed {} packets, {} bytes\n", report.packets, report.bytes);
    for p in &stats.ports {
        for q in &p.rx_queues {
            let _ = writeln!(
                out,
                "  {}/{} rx: {} packets, {} bytes, avg {} {:.2} Gb/s, drops {}",
                p.name,
                q.name,
                q.stats.packets,
                q.stats.bytes,
                rate(q.stats.packets as f64 / secs),
                q.stats.bytes as f64 * 8.0 / secs / 1e9,
                drops_text(&q.stats)
            );
        }
        for q in &p.tx_queues {
            let _ = writeln!(
                out,
                "  {}/{} tx: {} packets, {} bytes, drops {}",
                p.name,
                q.name,
                q.stats.packets,
                q.stats.bytes,
                drops_text(&q.stats)
            );
        }
        let _ = writeln!(out, "  {} drops before a queue: {}", p.name, drops_text(&p.rx_port_drops));
        for f in &p.flows {
            let _ = writeln!(
                out,
                "  {} flow {} ({}): {} packets -> queue {:?}",
                p.name, f.id, f.name, f.packets, f.queue_ids
            );
        }
        for r in &p.reorder {
            let _ = writeln!(
                out,
                "  {} reorder {}: {} batches ({} timed out, {} evicted, {} dropped, {} discarded incomplete), {} packets placed, {} missing, {} late, {} duplicate, {} out of window, {} rejected",
                p.name,
                r.name,
                r.batches_complete + r.batches_timed_out + r.batches_evicted + r.batches_discarded,
                r.batches_timed_out,
                r.batches_evicted,
                r.batches_dropped,
                r.batches_discarded,
                r.packets_placed,
                r.packets_missing,
                r.packets_late,
                r.packets_duplicate,
                r.packets_out_of_window,
                r.packets_rejected
            );
        }
    }
    for ((port, queue, flow), s) in &report.sequences {
        let flow = flow.map_or("unmatched".to_owned(), |f| format!("flow {f}"));
        let verdict = if s.in_order_without_loss() { "in order, no loss" } else { "LOSS OR REORDER" };
        let _ = writeln!(
            out,
            "  sequence port {port} queue {queue} {flow}: {} received, {} gaps, {} late: {verdict}",
            s.received, s.gaps, s.late
        );
    }
    for (port, digest) in &report.digests {
        let _ = writeln!(out, "  port {port} stream sha256 {digest}");
    }
    out
}

fn drops_text(s: &QueueStatsSnapshot) -> String {
    if s.total_drops() == 0 {
        return "0".into();
    }
    s.drops_by_reason().map(|(r, n)| format!("{n} {}", r.as_str())).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(port: &str, packets: u64) -> EngineStats {
        let queue = QueueStatsEntry {
            id: 0,
            name: "q0".into(),
            stats: QueueStatsSnapshot { packets, bytes: packets * 100, ..Default::default() },
            ring_len: 0,
            meta_in_use: 0,
            worker: None,
        };
        EngineStats {
            ports: vec![daqiri::PortStats {
                id: 0,
                name: port.into(),
                backend: daqiri::config::InterfaceBackend::Socket,
                rx_queues: vec![queue.clone()],
                tx_queues: vec![queue],
                rx_port_drops: QueueStatsSnapshot::default(),
                flows: Vec::new(),
                link: daqiri::LinkStats::default(),
                reorder: Vec::new(),
            }],
            regions: Vec::new(),
        }
    }

    /// A restart's new engine counts from zero: the line counts from there,
    /// where it once subtracted the old engine's larger counters.
    #[test]
    fn a_new_engines_counters_are_counted_from_zero() {
        let mut meter = StatusMeter::new(stats("p", 1_000_000));
        let line = meter.line(stats("p", 500));
        assert!(line.contains("p/q0: ") && !line.contains("drops 18446744073709"), "{line}");
        // A port of another name has nothing before it either.
        let line = meter.line(stats("renamed", 7));
        assert!(line.contains("renamed/q0: "), "{line}");
    }
}
