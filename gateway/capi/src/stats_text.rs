//! `print_stats`: the engine's counters as text, a port per paragraph.

use std::fmt::Write;

use daqiri::{EngineStats, QueueStatsEntry};

/// Every port's queues with packets, bytes, bursts and drops by reason.
pub(crate) fn render(stats: &EngineStats) -> String {
    let mut out = String::new();
    for port in &stats.ports {
        let _ = writeln!(out, "port {} \"{}\" ({})", port.id, port.name, port.backend.as_str());
        for (direction, queues) in [("rx", &port.rx_queues), ("tx", &port.tx_queues)] {
            for queue in queues {
                queue_line(&mut out, direction, queue);
            }
        }
        let port_drops = port.rx_port_drops.total_drops();
        if port_drops > 0 {
            let _ = writeln!(out, "  rx dropped before a queue: {port_drops}{}", reasons(&port.rx_port_drops));
        }
    }
    out
}

fn queue_line(out: &mut String, direction: &str, queue: &QueueStatsEntry) {
    let s = &queue.stats;
    let _ = writeln!(
        out,
        "  {direction} queue {} \"{}\": {} packets, {} bytes, {} bursts, {} dropped{}",
        queue.id,
        queue.name,
        s.packets,
        s.bytes,
        s.bursts,
        s.total_drops(),
        reasons(s)
    );
}

fn reasons(stats: &daqiri::QueueStatsSnapshot) -> String {
    let named: Vec<String> = stats.drops_by_reason().map(|(reason, n)| format!("{}={n}", reason.as_str())).collect();
    if named.is_empty() { String::new() } else { format!(" ({})", named.join(", ")) }
}
