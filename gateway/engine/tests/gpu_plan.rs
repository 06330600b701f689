//! GPU reorder plans (`reorder_type: gpu`) in a running engine, on the GPU
//! machine: the same frames go through an engine with GPU plans and one
//! with the same plans on the CPU (the oracle), and every aggregate must be
//! the same, byte for byte, counter for counter: every input and output
//! type, both byte orders, both methods, shuffled, lossy and duplicated
//! traffic. Run by `tests/gpu/run.sh`.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use daqiri::{Engine, PlanStats, SegmentMemory, flags};
use daqiri_config::model::{BitField, Endianness, InputType, MemoryKind, MissingAction, OutputType, ReorderType};
use daqiri_config::testing::{TestConfig, plan, rx, tx};

mod common;
use common::{Random, send_payloads};

/// Ethernet, IPv4 and UDP headers: the sequence number starts here.
const HEADERS: usize = 42;
const PACKETS_PER_BATCH: u16 = 16;
const BATCHES: u16 = 6;

/// One plan on flow `10 + k` (UDP destination port `5000 + k`).
struct PlanSpec {
    output_region: &'static str,
    data_types: Option<(InputType, OutputType, Endianness)>,
    /// `seq_batch_number` (batch id in the sequence's high 12 bits) instead of `seq_packets_per_batch`.
    batch_field: bool,
    /// `missing_action: drop` instead of the default `passthrough`.
    discard_incomplete: bool,
}

/// A sw-loopback engine whose one RX queue lands frames in pinned memory
/// and feeds `plans`, run `on` the GPU or the CPU; `pad` bytes follow the
/// 16-bit sequence number.
fn config(plans: &[PlanSpec], on: ReorderType, pad: usize) -> TestConfig {
    // The oracle's outputs are host memory: CPU plans cannot write a device region.
    let out_device = if on == ReorderType::Gpu { MemoryKind::Device } else { MemoryKind::Host };
    let sequence = BitField { bit_offset: HEADERS as u32 * 8, bit_width: 16 };
    let mut config = TestConfig::loopback()
        .region("tx", 1024, 256)
        .region_of("rx", MemoryKind::HostPinned, 4096, 256)
        .region_of("out_device", out_device, 128, 32768)
        .region_of("out_pinned", MemoryKind::HostPinned, 64, 32768)
        .tx_queue(tx(0, "tx").batch(64))
        .rx_queue(rx(0, "rx").named("r").batch(64))
        .isolated();
    for (k, spec) in plans.iter().enumerate() {
        let flow = 10 + k as u32;
        let mut plan =
            plan(&format!("p{k}"), &[flow], spec.output_region).on(on).payload_at((HEADERS + 2 + pad) as u32);
        plan = match spec.batch_field {
            true => plan.batch_number(sequence, BitField { bit_width: 12, ..sequence }),
            false => plan.packets_per_batch(sequence, u32::from(PACKETS_PER_BATCH)),
        };
        if spec.discard_incomplete {
            plan = plan.when_missing(MissingAction::Drop);
        }
        if let Some((input, output, order)) = spec.data_types {
            plan = plan.converting(input, output, order);
        }
        config = config.udp_flow(flow, 0, 5000 + k as u16).reorder(plan);
    }
    config
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
    missing: Vec<u32>,
    bytes: Vec<u8>,
}

/// Runs `frames` (per plan) through an engine of `config`, stops, and returns every
/// aggregate and each plan's counters.
fn run(
    config: &TestConfig,
    frames: &[Vec<Vec<u8>>],
    before_traffic: impl Fn(&Engine),
) -> (Vec<Aggregate>, Vec<PlanStats>) {
    let engine = Engine::from_yaml(&config.yaml()).expect("engine");
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
            missing: burst.reorder_missing().expect("an aggregate tells its empty slots").iter().collect(),
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
    let (gpu, gpu_plans) = run(&config(plans, ReorderType::Gpu, pad), &frames, before_traffic);
    let (cpu, cpu_plans) = run(&config(plans, ReorderType::Cpu, pad), &frames, |_| {});
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
    use {InputType::*, OutputType::*};
    for input in [Int4, Int8, Int16, InputType::Int32] {
        for order in [Endianness::Host, Endianness::Network] {
            let plans: Vec<_> = [Fp16, Bf16, Fp32, Fp64, OutputType::Int32]
                .iter()
                .enumerate()
                .map(|(k, &output)| PlanSpec {
                    output_region: "out_device",
                    data_types: Some((input, output, order)),
                    batch_field: k % 2 == 1,
                    discard_incomplete: false,
                })
                .collect();
            // Samples start 16-byte aligned: the kernels' word path.
            compare(&plans, 4, 64, |_| {});
        }
    }
}

#[test]
fn gpu_plain_plans_into_pinned_and_device_memory_on_the_applications_stream_and_discarding_incomplete_ones() {
    let plans = [
        PlanSpec { output_region: "out_pinned", data_types: None, batch_field: false, discard_incomplete: false },
        PlanSpec { output_region: "out_device", data_types: None, batch_field: true, discard_incomplete: false },
        PlanSpec {
            output_region: "out_pinned",
            data_types: Some((InputType::Int16, OutputType::Fp32, Endianness::Network)),
            batch_field: false,
            discard_incomplete: true,
        },
    ];
    // Unaligned samples (after the 2-byte sequence number): the per-byte path.
    compare(&plans, 0, 58, |engine| {
        let stream = daqiri::gpu::new_stream(0).expect("a stream on GPU 0");
        engine.set_reorder_cuda_stream(0, "p1", Arc::clone(&stream)).expect("the application's stream");
    });
}

#[test]
fn gpu_set_reorder_cuda_stream_names_what_is_wrong() {
    let plans =
        [PlanSpec { output_region: "out_device", data_types: None, batch_field: false, discard_incomplete: false }];
    let engine = Engine::from_yaml(&config(&plans, ReorderType::Gpu, 0).yaml()).expect("engine");
    let stream = daqiri::gpu::new_stream(0).expect("a stream on GPU 0");
    let err = engine.set_reorder_cuda_stream(0, "nope", Arc::clone(&stream)).unwrap_err();
    assert!(err.to_string().contains("no reorder plan \"nope\"; its plans: [\"p0\"]"), "{err}");
    let err = engine.set_reorder_cuda_stream(3, "p0", stream).unwrap_err();
    assert!(err.to_string().contains('3'), "{err}");
    engine.shutdown();
    let cpu = Engine::from_yaml(&config(&plans, ReorderType::Cpu, 0).yaml()).expect("engine");
    let err = cpu.set_reorder_cuda_stream(0, "p0", daqiri::gpu::new_stream(0).unwrap()).unwrap_err();
    assert!(err.to_string().contains("reorder_type cpu"), "{err}");
}

#[test]
fn gpu_a_plan_refuses_packets_landing_in_device_memory_through_a_cpu_backend() {
    let plans =
        [PlanSpec { output_region: "out_device", data_types: None, batch_field: false, discard_incomplete: false }];
    let mut config = config(&plans, ReorderType::Gpu, 0);
    config.region_mut("rx").kind = MemoryKind::Device;
    let err = Engine::from_yaml(&config.yaml()).unwrap_err();
    assert!(err.to_string().contains("reorder plan \"p0\" reads packets where they land"), "{err}");
    assert!(err.to_string().contains("give queue \"r\" a host_pinned region"), "{err}");
}
