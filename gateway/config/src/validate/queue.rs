//! Queue rules: ids, memory region references, poll modes, TX-only keys.

use crate::diagnostic::{Report, YamlPath};
use crate::model::{PollMode, Queue, QueueCore};
use crate::valid::InterfaceBackend;

use super::context::InterfaceCtx;
use super::lists::{duplicates, valid_list};

pub(super) fn check_queues(ctx: &InterfaceCtx<'_>, report: &mut Report) {
    if let Some(rx) = &ctx.iface.rx {
        check_direction(ctx, &rx.queues, &ctx.path.key("rx").key("queues"), false, report);
        let uses_reorder = |q: &Queue| {
            rx.reorder_configs
                .iter()
                .any(|r| rx.flows.iter().any(|f| r.flow_ids.contains(&f.id) && f.queue_ids().contains(&q.id)))
        };
        for (i, q) in rx.queues.iter().enumerate() {
            if q.poll_mode == PollMode::Direct && uses_reorder(q) {
                report.error(
                    &ctx.path.key("rx").key("queues").index(i).key("poll_mode"),
                    "direct poll mode cannot feed a reorder config; use indirect",
                );
            }
        }
    }
    if let Some(tx) = &ctx.iface.tx {
        check_direction(ctx, &tx.queues, &ctx.path.key("tx").key("queues"), true, report);
    }
}

fn check_direction(ctx: &InterfaceCtx<'_>, queues: &[Queue], list: &YamlPath, is_tx: bool, report: &mut Report) {
    duplicates(queues.iter().map(|q| &q.id), list, "id", "queue id", report);
    duplicates(queues.iter().map(|q| &q.name), list, "name", "queue name", report);
    let region_names = || ctx.config.memory_regions.iter().map(|r| format!("\"{}\"", r.name));
    for (i, q) in queues.iter().enumerate() {
        let path = list.index(i);
        for (j, name) in q.memory_regions.iter().enumerate() {
            if ctx.config.memory_region(name).is_none() {
                report.error(
                    &path.key("memory_regions").index(j),
                    format!("memory region \"{name}\" is not defined; {}", valid_list(region_names())),
                );
            }
        }
        if q.memory_regions.is_empty() && ctx.backend != InterfaceBackend::Roce {
            report.error(
                &path.key("memory_regions"),
                format!("queue \"{}\" needs at least one memory region; {}", q.name, valid_list(region_names())),
            );
        }
        match q.poll_mode {
            PollMode::Indirect => {
                if q.cpu_core.is_none() {
                    report
                        .error(&path.key("cpu_core"), "indirect queues need cpu_core, the core of their worker thread");
                }
                match q.batch_size {
                    None => report.error(
                        &path.key("batch_size"),
                        "indirect queues need batch_size (packets per burst, at least 1)",
                    ),
                    Some(0) => report.error(&path.key("batch_size"), "must be at least 1"),
                    Some(_) => {}
                }
            }
            PollMode::Direct => {
                // DAQIRI has it on raw ibverbs; we add UDP sockets (received on the caller's thread).
                if !matches!(ctx.backend, InterfaceBackend::IbverbsRaw | InterfaceBackend::Socket) {
                    report.error(&path.key("poll_mode"), "direct poll mode exists on the raw ibverbs engine (stream_type: raw, engine: ibverbs) and on UDP socket RX queues; use indirect");
                }
                for (key, present) in [
                    ("cpu_core", q.cpu_core.is_some()),
                    ("batch_size", q.batch_size.is_some()),
                    ("timeout_us", q.timeout_us.is_some()),
                ] {
                    if present {
                        report.error(
                            &path.key(key),
                            format!("{key} is not allowed in direct poll mode: the application polls the queue itself"),
                        );
                    }
                }
            }
        }
        if !is_tx {
            if !q.offloads.is_empty() {
                report.error(&path.key("offloads"), "offloads are a TX queue setting");
            }
            if q.pacing_mbps.is_some() {
                report.error(&path.key("pacing_mbps"), "pacing_mbps is a TX queue setting");
            }
            if q.busy_poll_us == Some(0) {
                report.error(
                    &path.key("busy_poll_us"),
                    "0 polls nothing: leave busy_poll_us out to turn busy polling off",
                );
            }
        } else if q.busy_poll_us.is_some() {
            report.error(&path.key("busy_poll_us"), "busy_poll_us is an RX queue setting");
        } else if !ctx.is_raw() && !q.offloads.is_empty() {
            report.error(&path.key("offloads"), "offloads program the NIC and exist only for raw streams");
        }
        if q.cpu_core == Some(QueueCore::Unpinned) && ctx.backend != InterfaceBackend::Socket {
            report.error(
                &path.key("cpu_core"),
                "-1 (an unpinned worker) is for socket queues, as upstream has it; raw and RoCE workers run on the core they name",
            );
        }
        if let (Some(core), Some(master)) = (q.pinned_core(), ctx.config.master_core)
            && core == master
        {
            report.warn(
                &path.key("cpu_core"),
                format!("core {core} is also master_core; queue workers should run on their own cores"),
            );
        }
    }
}
