//! Reorder config rules: memory kinds, flow references, method constraints.

use std::collections::HashMap;

use crate::diagnostic::{Report, YamlPath};
use crate::endpoint::Transport;
use crate::model::{BitField, MemoryKind, PollMode, ReorderConfig, ReorderEngine, ReorderType};

use super::context::InterfaceCtx;
use super::lists::{duplicates, valid_list};

/// Upstream warns below this `packet_size` for the NIC's reorder.
const HW_PACKET_SIZE_ADVISED: u32 = 4000;

pub(super) fn check_reorder_configs(ctx: &InterfaceCtx<'_>, report: &mut Report) {
    let Some(rx) = &ctx.iface.rx else { return };
    let list = ctx.path.key("rx").key("reorder_configs");
    duplicates(rx.reorder_configs.iter().map(|r| &r.name), &list, "name", "reorder config name", report);
    // Plans take packets by flow id: raw interfaces and UDP sockets have flows.
    if !rx.reorder_configs.is_empty() && !ctx.is_raw() && ctx.transport() != Some(Transport::Udp) {
        report.error(
            &list,
            "reorder configs take packets by flow id, which raw interfaces and UDP sockets have; this interface has neither",
        );
    }
    check_gpu_holding(ctx, report);
    let mut claimed: HashMap<u32, usize> = HashMap::new();
    for (i, plan) in rx.reorder_configs.iter().enumerate() {
        let path = list.index(i);
        check_output_region(ctx, plan, &path, report);
        check_method(plan, &path.key("method"), report);
        check_engine(plan, &path, report);
        if plan.flow_ids.is_empty() {
            report.error(&path.key("flow_ids"), "list at least one RX flow id");
        }
        let flow_ids = || rx.flows.iter().map(|f| f.id);
        let mut plan_queue: Option<u16> = None;
        for (j, id) in plan.flow_ids.iter().enumerate() {
            let id_path = path.key("flow_ids").index(j);
            if let Some(other) = claimed.insert(*id, i)
                && other != i
            {
                report.error(
                    &id_path,
                    format!(
                        "flow {id} is already reordered by {}; flow ids cannot overlap across reorder configs",
                        list.index(other)
                    ),
                );
            }
            let Some(flow) = rx.flows.iter().find(|f| f.id == *id) else {
                report.error(&id_path, format!("flow {id} is not defined in rx.flows; {}", valid_list(flow_ids())));
                continue;
            };
            let queues = flow.queue_ids();
            if queues.len() != 1 {
                report.error(
                    &id_path,
                    format!(
                        "flow {id} steers to {} queues; a reordered flow must steer to exactly one queue (no RSS)",
                        queues.len()
                    ),
                );
                continue;
            }
            // One plan fills its batches in one place: the queue of its flows.
            match plan_queue {
                Some(first) if first != queues[0] => report.error(
                    &id_path,
                    format!("flow {id} steers to queue {}, the plan's other flows to queue {first}; a plan's flows must share one queue", queues[0]),
                ),
                _ => plan_queue = Some(queues[0]),
            }
            let Some(queue) = rx.queues.iter().find(|q| q.id == queues[0]) else { continue };
            if queue.poll_mode == PollMode::Direct {
                report.error(
                    &id_path,
                    format!(
                        "flow {id} lands in queue \"{}\", polled directly by the application; a reordered flow's queue is read by its worker (poll_mode: worker), as upstream requires",
                        queue.name
                    ),
                );
            }
            if let Some(packets) = packets_per_batch(plan)
                && packets > u64::from(queue.batch_size())
            {
                report.error(
                    &id_path,
                    format!(
                        "flow {id} lands in queue \"{}\" with batch_size {}, fewer than the plan's {packets} packets per batch; raise batch_size to at least {packets}",
                        queue.name,
                        queue.batch_size()
                    ),
                );
            }
            if queue.memory_regions.len() != 1 {
                report.error(
                    &id_path,
                    format!("flow {id} lands in queue \"{}\" with {} memory regions; reorder needs exactly one source region (no header-data split in v1)", queue.name, queue.memory_regions.len()),
                );
            }
            for name in &queue.memory_regions {
                if let Some(region) = ctx.config.memory_region(name)
                    && !kind_fits(plan.reorder_type, region.kind)
                {
                    report.error(
                        &id_path,
                        format!(
                            "flow {id} lands in region \"{name}\" of kind {}; {}",
                            region.kind.as_str(),
                            kind_rule(plan.reorder_type)
                        ),
                    );
                }
            }
        }
    }
}

/// Upstream's preconditions of the NIC's reorder (`reorder_engine: hw`),
/// judged as upstream judges them whether or not this build runs it.
fn check_engine(plan: &ReorderConfig, path: &YamlPath, report: &mut Report) {
    let packet_size = plan.packet_size.unwrap_or(0);
    match plan.reorder_engine() {
        ReorderEngine::Hardware => {
            if !plan.cyclic_sequence() {
                report.error(
                    &path.key("cyclic_sequence"),
                    "reorder_engine: hw needs cyclic_sequence: true, the acknowledgement that the sampled value cycles over the output ring",
                );
            }
            if packet_size == 0 {
                report.error(
                    &path.key("packet_size"),
                    "reorder_engine: hw needs packet_size, the bytes of each packet's slot in the output ring",
                );
            } else if packet_size < HW_PACKET_SIZE_ADVISED {
                report.warn(
                    &path.key("packet_size"),
                    format!("{packet_size} bytes: the NIC's reorder is meant for slots of {HW_PACKET_SIZE_ADVISED} bytes or more"),
                );
            }
        }
        ReorderEngine::Software => {
            if plan.packet_size.is_some() {
                report.warn(
                    &path.key("packet_size"),
                    "read by reorder_engine: hw only; a software plan sizes its slots from the packets",
                );
            }
            if plan.cyclic_sequence.is_some() {
                report.warn(
                    &path.key("cyclic_sequence"),
                    "read by reorder_engine: hw only; a software plan's batch ids wrap around their id space whatever it says",
                );
            }
        }
    }
}

fn check_output_region(ctx: &InterfaceCtx<'_>, plan: &ReorderConfig, path: &YamlPath, report: &mut Report) {
    let Some(region) = ctx.config.memory_region(&plan.memory_region) else {
        let names = ctx.config.memory_regions.iter().map(|r| format!("\"{}\"", r.name));
        report.error(
            &path.key("memory_region"),
            format!("memory region \"{}\" is not defined; {}", plan.memory_region, valid_list(names)),
        );
        return;
    };
    if !kind_fits(plan.reorder_type, region.kind) {
        report.error(
            &path.key("memory_region"),
            format!("region \"{}\" is {}; {}", region.name, region.kind.as_str(), kind_rule(plan.reorder_type)),
        );
    }
    // The aggregate of a full batch must fit one output buffer.
    if let Some(packets) = packets_per_batch(plan) {
        let rx = ctx.iface.rx.as_ref().expect("reorder configs live under rx");
        let source = rx
            .flows
            .iter()
            .filter(|f| plan.flow_ids.contains(&f.id))
            .flat_map(|f| f.queue_ids())
            .filter_map(|id| rx.queues.iter().find(|q| q.id == id))
            .filter_map(|q| q.memory_regions.first())
            .filter_map(|name| ctx.config.memory_region(name))
            .map(|r| r.buf_size)
            .max();
        if let Some(source) = source {
            let payload = source.saturating_sub(u64::from(plan.payload_byte_offset));
            // Saturating: sizes beyond their bounds are reported by the limits
            // check, and must not overflow here first.
            let (needed, converted) = match &plan.data_types {
                None => (payload.saturating_mul(packets), String::new()),
                Some(t) => (
                    (payload.saturating_mul(8) / u64::from(t.input_type.bits()))
                        .saturating_mul(u64::from(t.output_type.bytes()))
                        .saturating_mul(packets),
                    format!(
                        " converted from {}-bit input to {}-byte samples",
                        t.input_type.bits(),
                        t.output_type.bytes()
                    ),
                ),
            };
            if region.buf_size < needed {
                report.warn(
                    &ctx.config_region_path(&region.name).key("buf_size"),
                    format!("{} bytes may not hold one batch: (source buf_size {source} - payload_byte_offset {}){converted} x {packets} packets = {needed}", region.buf_size, plan.payload_byte_offset),
                );
            }
        }
    }
}

/// A GPU plan holds each packet's buffer until its batch's kernel is done,
/// so its queue's pool must hold an open batch and one in flight per plan,
/// besides the burst being received; with fewer, receive runs dry.
fn check_gpu_holding(ctx: &InterfaceCtx<'_>, report: &mut Report) {
    let Some(rx) = &ctx.iface.rx else { return };
    for queue in &rx.queues {
        let fed_by_queue = |plan: &&ReorderConfig| {
            plan.reorder_type == ReorderType::Gpu
                && rx.flows.iter().any(|f| plan.flow_ids.contains(&f.id) && f.queue_ids().contains(&queue.id))
        };
        let plans: Vec<(&str, u64)> = rx
            .reorder_configs
            .iter()
            .filter(fed_by_queue)
            .filter_map(|plan| Some((plan.name.as_str(), packets_per_batch(plan)?)))
            .collect();
        let Some(region) = queue.memory_regions.first().and_then(|name| ctx.config.memory_region(name)) else {
            continue;
        };
        if plans.is_empty() {
            continue;
        }
        let held: u64 = plans.iter().map(|(_, packets)| 2 * packets).sum();
        let needed = held + u64::from(queue.batch_size());
        if u64::from(crate::pools::num_bufs_allocated(ctx.config, &region.name).unwrap_or(region.num_bufs)) < needed {
            let names: Vec<String> = plans.iter().map(|(name, packets)| format!("\"{name}\" ({packets})")).collect();
            report.warn(
                &ctx.config_region_path(&region.name).key("num_bufs"),
                format!(
                    "{} buffers cannot hold what GPU plans {} keep until their kernels finish: 2 x packets_per_batch each (an open batch and one in flight) + batch_size {} of queue {} = {needed}; receive would run out of buffers. 4 x packets_per_batch per plan leaves room for late packets",
                    region.num_bufs,
                    names.join(", "),
                    queue.batch_size(),
                    queue.id,
                ),
            );
        }
    }
}

/// Packets per batch of a plan whose method is well formed.
fn packets_per_batch(plan: &ReorderConfig) -> Option<u64> {
    match (&plan.method.seq_batch_number, &plan.method.seq_packets_per_batch) {
        (Some(m), None) => {
            let (seq, batch) = (m.sequence_number.bit_width, m.batch_number.bit_width);
            ((1..=32).contains(&seq) && (1..=seq).contains(&batch)).then(|| 1u64 << (seq - batch))
        }
        (None, Some(m)) => (m.packets_per_batch > 0).then_some(u64::from(m.packets_per_batch)),
        _ => None,
    }
}

fn check_method(plan: &ReorderConfig, path: &YamlPath, report: &mut Report) {
    match (&plan.method.seq_batch_number, &plan.method.seq_packets_per_batch) {
        (Some(_), Some(_)) | (None, None) => {
            report.error(path, "give exactly one method: seq_batch_number or seq_packets_per_batch");
        }
        (Some(m), None) => {
            let p = path.key("seq_batch_number");
            let seq = check_field(&m.sequence_number, &p.key("sequence_number"), report);
            let batch = check_field(&m.batch_number, &p.key("batch_number"), report);
            if let (Some(seq), Some(batch)) = (seq, batch)
                && batch > seq
            {
                report.error(&p.key("batch_number").key("bit_width"), format!("2^{seq} sequence numbers are not divisible by 2^{batch} batches; batch_number.bit_width must not exceed sequence_number.bit_width"));
            }
        }
        (None, Some(m)) => {
            let p = path.key("seq_packets_per_batch");
            let seq = check_field(&m.sequence_number, &p.key("sequence_number"), report);
            if m.packets_per_batch == 0 {
                report.error(&p.key("packets_per_batch"), "must be at least 1");
            } else if let Some(bits) = seq
                && !(1u64 << bits).is_multiple_of(u64::from(m.packets_per_batch))
            {
                report.error(
                    &p.key("packets_per_batch"),
                    format!(
                        "{} does not divide 2^{bits} = {}; use a power of two up to that",
                        m.packets_per_batch,
                        1u64 << bits
                    ),
                );
            }
        }
    }
}

fn check_field(field: &BitField, path: &YamlPath, report: &mut Report) -> Option<u32> {
    if !(1..=32).contains(&field.bit_width) {
        report.error(&path.key("bit_width"), format!("{} is out of range; valid: 1..32", field.bit_width));
        return None;
    }
    Some(field.bit_width)
}

fn kind_fits(reorder: ReorderType, kind: MemoryKind) -> bool {
    match reorder {
        ReorderType::Gpu => kind.gpu_addressable(),
        ReorderType::Cpu => kind.cpu_addressable(),
    }
}

fn kind_rule(reorder: ReorderType) -> &'static str {
    match reorder {
        ReorderType::Gpu => "reorder_type gpu needs device or host_pinned memory",
        ReorderType::Cpu => "reorder_type cpu needs host, host_pinned or huge memory",
    }
}

impl InterfaceCtx<'_> {
    fn config_region_path(&self, name: &str) -> YamlPath {
        let index = self.config.memory_regions.iter().position(|r| r.name == name).unwrap_or_default();
        YamlPath::cfg().key("memory_regions").index(index)
    }
}
