//! GPU reorder plans (`reorder_type: gpu`) in a running engine, on the GPU
//! machine: the same frames go through an engine with GPU plans and one
//! with the same plans on the CPU (the oracle), and every aggregate must be
//! the same, byte for byte, counter for counter: every input and output
//! type, both byte orders, both methods, shuffled, lossy and duplicated
//! traffic. Run by `tests/gpu/run.sh`.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use daqiri::{Engine, PlanStats, SegmentMemory, flags};

mod common;
use common::{Random, send_payloads};

/// Ethernet, IPv4 and UDP headers: the sequence number starts here.
const HEADERS: usize = 42;
const PACKETS_PER_BATCH: u16 = 16;
const BATCHES: u16 = 6;

/// One plan on flow `10 + k` (UDP destination port `5000 + k`).
struct PlanSpec {
    output_region: &'static str,
    data_types: Option<(&'static str, &'static str, &'static str)>,
    /// `seq_batch_number` (batch id in the sequence's high 12 bits) instead of `seq_packets_per_batch`.
    batch_field: bool,
}

/// A sw-loopback engine whose one RX queue lands frames in pinned memory
/// and feeds `plans`; `pad` bytes follow the 16-bit sequence number.
fn config(plans: &[PlanSpec], reorder_type: &str, pad: usize) -> String {
    let mut flows = String::new();
    let mut reorder = String::new();
    let seq_bit = HEADERS * 8;
    for (k, plan) in plans.iter().enumerate() {
        flows += &format!(
            "        - {{ name: f{k}, id: {}, action: {{ type: queue, id: 0 }}, match: {{ udp_dst: {} }} }}\n",
            10 + k,
            5000 + k
        );
        let types = plan.data_types.map_or(String::new(), |(input, output, order)| {
            format!("data_types: {{ input_type: {input}, output_type: {output}, endianness: {order} }}")
        });
        let method = if plan.batch_field {
            format!(
                "seq_batch_number: {{ sequence_number: {{ bit_offset: {seq_bit}, bit_width: 16 }}, batch_number: {{ bit_offset: {seq_bit}, bit_width: 12 }} }}"
            )
        } else {
            format!(
                "seq_packets_per_batch: {{ sequence_number: {{ bit_offset: {seq_bit}, bit_width: 16 }}, packets_per_batch: {PACKETS_PER_BATCH} }}"
            )
        };
        reorder += &format!(
            "        - {{ name: p{k}, reorder_type: {reorder_type}, memory_region: {}, payload_byte_offset: {}, flow_ids: [{}], {types} {}method: {{ {method} }} }}\n",
            plan.output_region,
            HEADERS + 2 + pad,
            10 + k,
            if types.is_empty() { "" } else { ", " },
        );
    }
    // The oracle's outputs are host memory: CPU plans cannot write a device region.
    let device = if reorder_type == "gpu" { "device" } else { "host" };
    format!(
        r#"
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - {{ name: tx, kind: host, num_bufs: 1024, buf_size: 256 }}
    - {{ name: rx, kind: host_pinned, affinity: 0, num_bufs: 4096, buf_size: 256 }}
    - {{ name: out_device, kind: {device}, affinity: 0, num_bufs: 128, buf_size: 32768 }}
    - {{ name: out_pinned, kind: host_pinned, affinity: 0, num_bufs: 64, buf_size: 32768 }}
    interfaces:
    - name: lo
      address: loopback
      tx: {{ queues: [{{ name: t, id: 0, cpu_core: 0, batch_size: 64, memory_regions: [tx] }}] }}
      rx:
        flow_isolation: true
        queues: [{{ name: r, id: 0, cpu_core: 0, batch_size: 64, memory_regions: [rx] }}]
        flows:
{flows}        reorder_configs:
{reorder}"#
    )
}

/// `BATCHES` batches of packets with `sample_bytes` of samples each,
/// shuffled within a window, about one in 12 lost and one in 16 sent twice.
fn traffic(seed: u64, pad: usize, sample_bytes: usize) -> Vec<Vec<u8>> {
    let mut random = Random(seed);
    let mut order: Vec<u16> = (0..PACKETS_PER_BATCH * BATCHES).collect();
    for i in (1..order.len()).rev() {
        let j = i.saturating_sub((random.next() % 24) as usize);
        order.swap(i, j);
    }
    let mut frames = Vec::new();
    for seq in order {
        let roll = random.next() % 48;
        if roll < 4 {
            continue;
        }
        let mut payload = seq.to_be_bytes().to_vec();
        payload.resize(2 + pad, 0xee);
        payload.extend((0..sample_bytes).map(|_| random.next() as u8));
        if roll < 7 {
            frames.push(payload.clone());
        }
        frames.push(payload);
    }
    frames
}

/// One aggregate as the application saw it, bytes read back from the GPU where needed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Aggregate {
    plan: u16,
    batch_id: u64,
    timed_out: bool,
    source_packets: u32,
    bytes: Vec<u8>,
}

/// Runs `frames` (per plan) through `yaml`, stops, and returns every
/// aggregate and each plan's counters.
fn run(yaml: &str, frames: &[Vec<Vec<u8>>], before_traffic: impl Fn(&Engine)) -> (Vec<Aggregate>, Vec<PlanStats>) {
    let engine = Engine::from_yaml(yaml).expect("engine");
    before_traffic(&engine);
    for (k, plan_frames) in frames.iter().enumerate() {
        send_payloads(&engine, 5000 + k as u16, plan_frames);
    }
    engine.shutdown();
    let mut found = Vec::new();
    while let Ok(Some(burst)) = engine.get_rx_burst(0, 0) {
        assert_ne!(burst.flags() & flags::REORDERED, 0, "only aggregates were expected");
        burst.wait_ready();
        let bytes = match burst.packet(0).segment_memory(0).expect("the aggregate's buffer") {
            SegmentMemory::Host(bytes) => bytes.to_vec(),
            SegmentMemory::Device(slice) => daqiri::gpu::copy_to_host(0, slice).expect("aggregate read back"),
        };
        found.push(Aggregate {
            plan: burst.reorder_plan().expect("plan"),
            batch_id: burst.batch_id().expect("batch id"),
            timed_out: burst.flags() & flags::REORDER_TIMEOUT != 0,
            source_packets: burst.source_packets(),
            bytes,
        });
    }
    found.sort();
    let mut plans = engine.stats().ports[0].reorder.clone();
    for plan in &mut plans {
        assert_eq!(plan.batches_in_flight, 0, "plan {}: every kernel finished at stop", plan.name);
    }
    let rx = engine.stats().regions.into_iter().find(|r| r.name == "rx").expect("rx region");
    assert_eq!(rx.in_use, 0, "every packet buffer a kernel read went back to its pool");
    (found, plans)
}

/// The GPU engine's aggregates and counters equal the CPU engine's.
fn compare(plans: &[PlanSpec], pad: usize, sample_bytes: usize, before_traffic: impl Fn(&Engine)) {
    let frames: Vec<_> = (0..plans.len()).map(|k| traffic(0x9e37_79b9 ^ k as u64, pad, sample_bytes)).collect();
    let (gpu, gpu_plans) = run(&config(plans, "gpu", pad), &frames, before_traffic);
    let (cpu, cpu_plans) = run(&config(plans, "cpu", pad), &frames, |_| {});
    assert!(!gpu.is_empty());
    assert_eq!(gpu.len(), cpu.len(), "aggregate count");
    for (g, c) in gpu.iter().zip(&cpu) {
        assert_eq!(g, c, "plan {} batch {}: GPU and CPU aggregates differ", c.plan, c.batch_id);
    }
    for (g, c) in gpu_plans.iter().zip(&cpu_plans) {
        assert_eq!((g.gpu, c.gpu), (Some(0), None), "plan {}", g.name);
        assert_eq!(PlanStats { gpu: None, ..g.clone() }, c.clone(), "plan {}: counters", g.name);
    }
}

#[test]
fn gpu_plans_match_cpu_plans_for_every_type_pair_and_both_methods() {
    for input in ["int4", "int8", "int16", "int32"] {
        for order in ["host", "network"] {
            let plans: Vec<_> = ["fp16", "bf16", "fp32", "fp64", "int32"]
                .iter()
                .enumerate()
                .map(|(k, &output)| PlanSpec {
                    output_region: "out_device",
                    data_types: Some((input, output, order)),
                    batch_field: k % 2 == 1,
                })
                .collect();
            // Samples start 16-byte aligned: the kernels' word path.
            compare(&plans, 4, 64, |_| {});
        }
    }
}

#[test]
fn gpu_plain_plans_into_pinned_and_device_memory_on_the_applications_stream() {
    let plans = [
        PlanSpec { output_region: "out_pinned", data_types: None, batch_field: false },
        PlanSpec { output_region: "out_device", data_types: None, batch_field: true },
        PlanSpec { output_region: "out_pinned", data_types: Some(("int16", "fp32", "network")), batch_field: false },
    ];
    // Unaligned samples (after the 2-byte sequence number): the per-byte path.
    compare(&plans, 0, 58, |engine| {
        let stream = daqiri::gpu::new_stream(0).expect("a stream on GPU 0");
        engine.set_reorder_cuda_stream(0, "p1", Arc::clone(&stream)).expect("the application's stream");
    });
}

#[test]
fn gpu_set_reorder_cuda_stream_names_what_is_wrong() {
    let plans = [PlanSpec { output_region: "out_device", data_types: None, batch_field: false }];
    let engine = Engine::from_yaml(&config(&plans, "gpu", 0)).expect("engine");
    let stream = daqiri::gpu::new_stream(0).expect("a stream on GPU 0");
    let err = engine.set_reorder_cuda_stream(0, "nope", Arc::clone(&stream)).unwrap_err();
    assert!(err.to_string().contains("no reorder plan \"nope\"; its plans: [\"p0\"]"), "{err}");
    let err = engine.set_reorder_cuda_stream(3, "p0", stream).unwrap_err();
    assert!(err.to_string().contains('3'), "{err}");
    engine.shutdown();
    let cpu = Engine::from_yaml(&config(&plans, "cpu", 0)).expect("engine");
    let err = cpu.set_reorder_cuda_stream(0, "p0", daqiri::gpu::new_stream(0).unwrap()).unwrap_err();
    assert!(err.to_string().contains("reorder_type cpu"), "{err}");
}

#[test]
fn gpu_a_plan_refuses_packets_landing_in_device_memory_through_a_cpu_backend() {
    let plans = [PlanSpec { output_region: "out_device", data_types: None, batch_field: false }];
    let yaml = config(&plans, "gpu", 0).replace("name: rx, kind: host_pinned", "name: rx, kind: device");
    let err = Engine::from_yaml(&yaml).unwrap_err();
    assert!(err.to_string().contains("reorder plan \"p0\" reads packets where they land"), "{err}");
    assert!(err.to_string().contains("give queue \"r\" a host_pinned region"), "{err}");
}
