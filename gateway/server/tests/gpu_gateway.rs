//! The gateway built with `cuda`, on the GPU machine: `gen` sends UDP over
//! loopback into GPU reorder plans and into a queue that lands in GPU
//! memory; `format: gds` captures write the aggregates and the packets
//! through cuFile; the files must equal the CPU oracle (the same plans run
//! by `daqiri::reorder::Replay` on the packets gen sent) and what was sent.
//! Run by `tests/gpu/run.sh`, which names the binary in `DAQIRI_GATEWAY`.
#![cfg(feature = "cuda")]

mod common;

use std::path::PathBuf;
use std::process::Command;

use daqiri_config::model::{BitField, Endianness, InputType, MemoryKind, OutputType, ReorderType};
use daqiri_config::testing::{TestConfig, plan, rx};
use serde_json::Value;

use common::{GATEWAY, Gateway, free_udp_port, http, scratch_dir, wait_for_capture_end};

const PACKETS_PER_BATCH: usize = 32;
const BATCHES: usize = 12;
/// Packets sent to the queue that lands in GPU memory.
const LANDED: usize = 300;
const LANDED_PAYLOAD: usize = 1400;

/// A GPU plan on its own flow: gen's packets from `source`, `payload`
/// bytes, samples from `offset` converted as `types`.
struct PlanSpec {
    name: &'static str,
    flow: u32,
    payload: usize,
    offset: usize,
    types: (InputType, OutputType, Endianness),
    /// Output bytes per input byte.
    growth: usize,
}

const PLANS: [PlanSpec; 2] = [
    // Aligned 16-byte words: the kernels' word path.
    PlanSpec {
        name: "int4_fp16",
        flow: 1,
        payload: 16 + 512,
        offset: 16,
        types: (InputType::Int4, OutputType::Fp16, Endianness::Host),
        growth: 4,
    },
    // A 4-byte offset: the per-sample path.
    PlanSpec {
        name: "int16_fp32",
        flow: 2,
        payload: 4 + 256,
        offset: 4,
        types: (InputType::Int16, OutputType::Fp32, Endianness::Network),
        growth: 2,
    },
];

impl PlanSpec {
    fn aggregate_bytes(&self) -> usize {
        PACKETS_PER_BATCH * (self.payload - self.offset) * self.growth
    }
}

/// Where a test's gateway receives (the plans' interface, the landed one)
/// and the source ports gen sends from (the two plans', the landed flow's).
#[derive(Debug, Clone, Copy)]
struct Ports {
    udp: u16,
    landed_udp: u16,
    sources: [u16; 3],
}

/// The gateway under test on the GPU config (not the oracle's).
fn start_gateway(tag: &str) -> (String, Ports, Gateway) {
    start_gateway_with(tag, false)
}

/// [`start_gateway`], with a consumer socket (`consumers.sock` in its
/// directory) where `consumers`, and `more` arguments.
fn start_gateway_with(tag: &str, consumers: bool) -> (String, Ports, Gateway) {
    start_gateway_with_args(tag, consumers, &[])
}

fn start_gateway_with_args(tag: &str, consumers: bool, args: &[&str]) -> (String, Ports, Gateway) {
    let gateway = gateway_binary();
    let ports = Ports {
        udp: free_udp_port(),
        landed_udp: free_udp_port(),
        sources: [free_udp_port(), free_udp_port(), free_udp_port()],
    };
    let dir = scratch_dir(tag);
    let socket = dir.join("consumers.sock");
    let mut more: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    if consumers {
        more.extend(["--consumer-socket".as_ref(), socket.as_os_str()]);
    }
    let gw = Gateway::run_with(&gateway, dir, &config(ports, false).yaml(), &more);
    (gateway, ports, gw)
}

/// The `len`-byte payload gen sends for `seq` with `--fill`.
fn gen_payload(seq: u32, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len).map(|j| seq.wrapping_add(j as u32) as u8).collect();
    bytes[..4].copy_from_slice(&seq.to_be_bytes());
    bytes
}

/// The config: interface `plans` (pinned landing, the GPU plans) and
/// interface `landed` (one queue in GPU memory). `oracle` turns it into
/// the same plans on the CPU with host memory, for `Replay`.
fn config(Ports { udp, landed_udp, sources }: Ports, oracle: bool) -> TestConfig {
    let (pinned, device, on) = match oracle {
        true => (MemoryKind::Host, MemoryKind::Host, ReorderType::Cpu),
        false => (MemoryKind::HostPinned, MemoryKind::Device, ReorderType::Gpu),
    };
    let queue = |region| rx(0, region).batch(64).timeout_us(20_000);
    let mut plans = TestConfig::udp_server(udp)
        .interface_named("plans")
        .region_of("landing", pinned, 4096, 2048)
        .region_of("on_gpu", device, 2048, 2048)
        .rx_queue(queue("landing"));
    for (spec, source) in PLANS.iter().zip(sources) {
        let output = format!("out_{}", spec.name);
        let sequence = BitField { bit_offset: 0, bit_width: 32 };
        let (input, output_type, order) = spec.types;
        plans = plans
            .region_of(&output, device, 8, spec.aggregate_bytes() as u64)
            .udp_src_flow(spec.flow, 0, source)
            .reorder(
                plan(spec.name, &[spec.flow], &output)
                    .on(on)
                    .payload_at(spec.offset as u32)
                    .converting(input, output_type, order)
                    .packets_per_batch(sequence, PACKETS_PER_BATCH as u32),
            );
    }
    let landed = TestConfig::udp_server(landed_udp)
        .interface_named("landed")
        .rx_queue(queue("on_gpu"))
        .udp_src_flow(9, 0, sources[2]);
    plans.and(landed)
}

/// Each plan's aggregates by (plan, batch), as the same plans on the CPU
/// (`daqiri::reorder::Replay`) make them from the packets gen sends.
fn cpu_oracle(ports: Ports) -> std::collections::BTreeMap<(&'static str, u64), Vec<u8>> {
    let oracle_config = config(ports, true).validate().expect("the oracle's config");
    let mut oracle = daqiri::reorder::Replay::new(&oracle_config, "plans").expect("the CPU plans");
    let mut expected = std::collections::BTreeMap::new();
    // Aggregates are taken as they complete: the output pools are small.
    let mut take = |oracle: &mut daqiri::reorder::Replay| {
        while let Some(batch) = oracle.next_batch() {
            let plan = &PLANS[usize::from(batch.reorder_plan().unwrap())];
            expected.insert((plan.name, batch.batch_id().unwrap()), batch.packet(0).data().to_vec());
        }
    };
    for plan in &PLANS {
        for seq in 0..(BATCHES * PACKETS_PER_BATCH) as u32 {
            assert!(oracle.push(plan.flow, &gen_payload(seq, plan.payload)));
            take(&mut oracle);
        }
    }
    oracle.finish();
    take(&mut oracle);
    assert_eq!(expected.len(), PLANS.len() * BATCHES, "the oracle emitted every batch");
    expected
}

/// SHA-256 of `chunks` in order, as `consume --digest` writes it.
fn sha256<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for chunk in chunks {
        hasher.update(chunk);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A `daqiri-gateway consume` process on `args`, once it says it subscribed.
fn consumer(gateway: &str, socket: &std::path::Path, args: &[&str]) -> std::process::Child {
    let mut child = Command::new(gateway)
        .args(["consume", "--socket"])
        .arg(socket)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let out = child.stdout.as_mut().unwrap();
    let mut byte = [0u8; 1];
    while std::io::Read::read(out, &mut byte).unwrap() == 1 && byte[0] != b'\n' {
        first.push(byte[0] as char);
    }
    assert!(first.starts_with("subscribed "), "the consumer subscribes: {first:?}");
    child
}

/// The gateway's answer to `hello` on the consumer socket at `path`.
fn hello_answer(path: &std::path::Path, hello: &[u8]) -> Value {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketType};
    let socket = rustix::net::socket(AddressFamily::UNIX, SocketType::SEQPACKET, None).unwrap();
    rustix::net::connect(&socket, &SocketAddrUnix::new(path).unwrap()).unwrap();
    daqiri_consumer::wire::send(&socket, hello, &[]).unwrap();
    let (answer, _) = daqiri_consumer::wire::receive(&socket).unwrap().expect("an answer");
    serde_json::from_slice(&answer).unwrap()
}

/// A consume process's JSON summary once it exits.
fn summary(child: std::process::Child) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "consume: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A `format: gds` capture started; its id.
fn start_capture(gw: &Gateway, body: &str) -> u64 {
    let (status, info) = gw.json("POST", "/api/v1/captures", body);
    assert_eq!(status, 201, "{body}: {info}");
    info["id"].as_u64().unwrap()
}

/// A gds capture's record once it finished with `packets`, nothing dropped.
fn finished(gw: &Gateway, id: u64, packets: usize) -> Value {
    let info = wait_for_capture_end(|| gw.json("GET", &format!("/api/v1/captures/{id}"), "").1);
    assert_eq!((info["state"].as_str(), info["packets"].as_u64()), (Some("finished"), Some(packets as u64)), "{info}");
    assert_eq!(info["capture_drops"], 0, "{info}");
    let mode = info["gds_mode"].as_str();
    assert!(matches!(mode, Some("direct" | "compatibility")), "the record says how cuFile wrote: {info}");
    info
}

/// The binary under test: `DAQIRI_GATEWAY` on the GPU machine, else this build's.
fn gateway_binary() -> String {
    std::env::var("DAQIRI_GATEWAY").unwrap_or_else(|_| GATEWAY.to_owned())
}

/// gen's `count` packets from sequence number `first` on.
fn send(gateway: &str, dest: u16, source: u16, (first, count): (usize, usize), payload: usize, shuffle: usize) {
    let sent = Command::new(gateway)
        .args(["gen", "--dest", &format!("127.0.0.1:{dest}"), "--rate", "20000", "--fill"])
        .args(["--seq-start", &first.to_string()])
        .args(["--count", &count.to_string(), "--payload-size", &payload.to_string()])
        .args(["--src-port", &source.to_string(), "--shuffle-window", &shuffle.to_string()])
        .output()
        .unwrap();
    assert!(sent.status.success(), "gen: {}", String::from_utf8_lossy(&sent.stderr));
}

/// The records of a classic microsecond pcap file, checked as a reader would.
fn pcap_records(file: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(file[..4], 0xa1b2_c3d4u32.to_le_bytes(), "pcap magic");
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= file.len() {
        let field = |k: usize| u32::from_le_bytes(file[at + k..at + k + 4].try_into().unwrap()) as usize;
        let (kept, original) = (field(8), field(12));
        assert_eq!(kept, original, "nothing was cut");
        records.push(file[at + 16..at + 16 + kept].to_vec());
        at += 16 + kept;
    }
    assert_eq!(at, file.len(), "the file ends on a whole record");
    records
}

#[test]
fn gpu_plans_and_gpu_landing_reach_disk_through_gds_equal_to_the_cpu_oracle() {
    let (gateway, ports, gw) = start_gateway("gpu-gateway");
    let Ports { udp, landed_udp, sources } = ports;

    // What lives in GPU memory cannot be captured by host copies.
    let (status, error) =
        gw.json("POST", "/api/v1/captures", r#"{"format": "pcap", "interface": "landed", "name": "no"}"#);
    assert_eq!(status, 501, "{error}");
    assert!(error.to_string().contains("use format gds"), "{error}");

    let aggregates: Vec<u64> = PLANS
        .iter()
        .map(|plan| {
            start_capture(&gw, &format!(
                r#"{{"format": "gds", "interface": "plans", "name": "{0}", "reorder": "{0}", "max_packets": {BATCHES}}}"#,
                plan.name
            ))
        })
        .collect();
    let packets = start_capture(
        &gw,
        &format!(r#"{{"format": "gds", "interface": "landed", "name": "landed", "max_packets": {LANDED}}}"#),
    );
    for (plan, source) in PLANS.iter().zip(sources) {
        send(&gateway, udp, source, (0, BATCHES * PACKETS_PER_BATCH), plan.payload, PACKETS_PER_BATCH);
    }
    send(&gateway, landed_udp, sources[2], (0, LANDED), LANDED_PAYLOAD, 1);

    // Aggregates: equal, byte for byte, to the CPU plans on the same packets.
    let expected = cpu_oracle(ports);
    for (plan, id) in PLANS.iter().zip(aggregates) {
        finished(&gw, id, BATCHES);
        for batch in 0..BATCHES as u64 {
            let file = gw.dir.join("out").join(format!("{}_{batch}", plan.name));
            let written = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(written == expected[&(plan.name, batch)], "{} differs from the CPU oracle", file.display());
        }
    }

    // Packets landed in GPU memory: the pcap holds what gen sent.
    let info = finished(&gw, packets, LANDED);
    let pcap = PathBuf::from(info["files"][0].as_str().unwrap());
    let records = pcap_records(&std::fs::read(&pcap).unwrap());
    assert_eq!(records.len(), LANDED);
    for (seq, record) in records.iter().enumerate() {
        assert_eq!(record.len(), 42 + LANDED_PAYLOAD, "record {seq}");
        assert_eq!(record[36..38], landed_udp.to_be_bytes(), "record {seq}: UDP destination port");
        assert!(
            record[42..] == gen_payload(seq as u32, LANDED_PAYLOAD),
            "record {seq}: payload differs from what gen sent"
        );
    }

    // The GPU plans' counters, and the GPU in status, stats and metrics.
    let (_, stats) = gw.json("GET", "/api/v1/stats", "");
    for (k, plan) in PLANS.iter().enumerate() {
        let counters = &stats["interfaces"][0]["reorder"][k];
        assert_eq!((counters["name"].as_str(), counters["gpu"].as_u64()), (Some(plan.name), Some(0)), "{counters}");
        assert_eq!(counters["batches_complete"], BATCHES, "{counters}");
        assert_eq!(counters["packets_placed"], BATCHES * PACKETS_PER_BATCH, "{counters}");
    }
    let on_gpu: Vec<&str> = stats["memory_regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["gpu"] == 0)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // `landing` is host_pinned: host memory on a NUMA node, mapped into every GPU.
    assert_eq!(on_gpu, ["on_gpu", "out_int4_fp16", "out_int16_fp32"], "{stats}");
    let (_, status) = gw.json("GET", "/api/v1/status", "");
    assert_eq!(status["interfaces"][0]["reorder"][0]["reorder_type"], "gpu", "{status}");
    let (_, metrics) = http(gw.admin, "GET", "/metrics", &[], "");
    let metrics = String::from_utf8_lossy(&metrics);
    for label in ["daqiri_memory_region_gpu=\"0\"", "daqiri_reorder_gpu=\"0\""] {
        assert!(metrics.contains(label), "/metrics lacks {label}");
    }
}

#[test]
fn consumer_processes_read_gpu_aggregates_and_gpu_landed_packets_in_place_equal_to_the_cpu_oracle() {
    let (gateway, ports, gw) = start_gateway_with("gpu-consumers", true);
    let socket = gw.dir.join("consumers.sock");
    let Ports { udp, landed_udp, sources } = ports;
    // A client that cannot import GPU memory (its hello does not say it
    // can) is refused by the region's name.
    let refusal =
        hello_answer(&socket, br#"{"version":1,"target":{"interface":"plans","plan":"int4_fp16"},"slots":4}"#);
    let reason = refusal["refused"]["reason"].as_str().unwrap_or_else(|| panic!("refused: {refusal}"));
    assert!(reason.contains("\"out_int4_fp16\" is GPU memory"), "{reason}");
    let batches = BATCHES.to_string();
    let landed = LANDED.to_string();
    // One consumer per plan (its aggregates lie in a `device` region), one
    // on the queue that lands in GPU memory; each in a process of its own.
    let plan_consumers: Vec<_> = PLANS
        .iter()
        .map(|plan| {
            let args = ["--interface", "plans", "--plan", plan.name, "--digest", "--packets", &batches, "--idle", "20"];
            consumer(&gateway, &socket, &args)
        })
        .collect();
    let queue_consumer = consumer(
        &gateway,
        &socket,
        &["--interface", "landed", "--queue", "0", "--digest", "--packets", &landed, "--idle", "20"],
    );
    for (plan, source) in PLANS.iter().zip(sources) {
        send(&gateway, udp, source, (0, BATCHES * PACKETS_PER_BATCH), plan.payload, PACKETS_PER_BATCH);
    }
    send(&gateway, landed_udp, sources[2], (0, LANDED), LANDED_PAYLOAD, 1);

    let expected = cpu_oracle(ports);
    for (plan, child) in PLANS.iter().zip(plan_consumers) {
        let seen = summary(child);
        assert_eq!(
            (seen["packets"].as_u64(), seen["gpu_packets"].as_u64()),
            (Some(BATCHES as u64), Some(BATCHES as u64)),
            "{} read in GPU memory: {seen}",
            plan.name
        );
        let oracle = sha256((0..BATCHES as u64).map(|batch| &expected[&(plan.name, batch)][..]));
        assert_eq!(
            seen["digest"].as_str(),
            Some(oracle.as_str()),
            "{}: the aggregates equal the CPU oracle's",
            plan.name
        );
    }
    let seen = summary(queue_consumer);
    assert_eq!(seen["gpu_packets"].as_u64(), Some(LANDED as u64), "{seen}");
    let payloads: Vec<Vec<u8>> = (0..LANDED as u32).map(|seq| gen_payload(seq, LANDED_PAYLOAD)).collect();
    assert_eq!(seen["digest"].as_str(), Some(sha256(payloads.iter().map(Vec::as_slice)).as_str()), "{seen}");

    // Every aggregate back once the consumers are gone (the landing
    // regions keep what the engine's workers cache out of their pools).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let (_, stats) = gw.json("GET", "/api/v1/stats", "");
        let out: Vec<(String, u64)> = stats["memory_regions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("out_")) && r["in_use"].as_u64() != Some(0))
            .map(|r| (r["name"].as_str().unwrap().to_owned(), r["in_use"].as_u64().unwrap_or(0)))
            .collect();
        if out.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "buffers still out after the consumers left: {out:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_gateway_sharing_host_memory_only_refuses_gpu_memory_by_the_regions_name() {
    let (_, _, gw) = start_gateway_with_args("gpu-host-only", true, &["--consumer-host-memory-only"]);
    let socket = gw.dir.join("consumers.sock");
    let plan = br#"{"version":1,"target":{"interface":"plans","plan":"int4_fp16"},"slots":4,"gpu_memory":true}"#;
    let refusal = hello_answer(&socket, plan);
    let reason = refusal["refused"]["reason"].as_str().unwrap_or_else(|| panic!("refused: {refusal}"));
    assert!(reason.contains("\"out_int4_fp16\" is GPU memory") && reason.contains("host memory only"), "{reason}");
}

#[test]
fn an_ended_gds_capture_gives_its_gpu_memory_back() {
    const MIB: usize = 1 << 20;
    let (gateway, Ports { udp, sources, .. }, gw) = start_gateway("gpu-gateway-release");
    let free_gpu_memory = || daqiri::gpu::memory_info(0).expect("GPU 0's free memory").0;
    let plan = &PLANS[0];
    // A ring of 64 KiB aggregates takes 256 MiB of device slots.
    let ring = 256 * MIB;
    let mut after_first = None;
    for round in 0..3 {
        let before = free_gpu_memory();
        let id = start_capture(
            &gw,
            &format!(
                r#"{{"format": "gds", "interface": "plans", "name": "round{round}", "reorder": "{}", "max_packets": {BATCHES}}}"#,
                plan.name
            ),
        );
        let running = free_gpu_memory();
        assert!(before - running >= ring - 16 * MIB, "round {round}: the ring took {} MiB", (before - running) / MIB);
        // Each round's batches follow the last round's: the plan has placed those.
        let packets = BATCHES * PACKETS_PER_BATCH;
        send(&gateway, udp, sources[0], (round * packets, packets), plan.payload, PACKETS_PER_BATCH);
        finished(&gw, id, BATCHES);
        // The writer frees the slots just after it reports the end.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let ended = loop {
            let free = free_gpu_memory();
            if free >= running + ring - 16 * MIB || std::time::Instant::now() >= deadline {
                break free;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        eprintln!(
            "round {round}: GPU memory free {} MiB before, {} while running, {} after",
            before / MIB,
            running / MIB,
            ended / MIB
        );
        // The first round may leave cuFile's own buffers behind; later ones add nothing.
        let baseline = *after_first.get_or_insert(ended);
        assert!(
            ended + 16 * MIB >= baseline,
            "round {round}: {} MiB of GPU memory stayed taken after the capture ended",
            (baseline - ended) / MIB
        );
    }
    let (_, list) = gw.json("GET", "/api/v1/captures", "");
    assert_eq!(list.as_array().map(Vec::len), Some(3), "ended captures stay listed: {list}");
}

#[test]
fn a_config_beyond_the_gpus_free_memory_is_refused_without_stopping_the_engine() {
    let (gateway, ports, gw) = start_gateway("gpu-gateway-preflight");
    let (free, _) = daqiri::gpu::memory_info(0).expect("GPU 0's free memory");
    let gib = 1usize << 30;
    let mut beyond = config(ports, false);
    let on_gpu = beyond.region_mut("on_gpu");
    (on_gpu.num_bufs, on_gpu.buf_size) = ((free / gib + 2) as u32, gib as u64);
    let (status, body) =
        http(gw.admin, "PUT", "/api/v1/config", &[("Content-Type", "application/yaml")], &beyond.yaml());
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 422, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("device regions on GPU 0 need"), "{message}");
    assert!(message.contains("the running config is unchanged"), "a refusal, not a rollback: {message}");
    let (_, status) = gw.json("GET", "/api/v1/status", "");
    assert_eq!(status["config"]["generation"], 1, "{status}");
    send(&gateway, ports.landed_udp, ports.sources[2], (0, 100), LANDED_PAYLOAD, 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let landed = || gw.json("GET", "/api/v1/stats", "").1["interfaces"][1]["rx_queues"][0]["packets"].clone();
    while landed() != 100 {
        assert!(std::time::Instant::now() < deadline, "the running engine still receives: {}", landed());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
