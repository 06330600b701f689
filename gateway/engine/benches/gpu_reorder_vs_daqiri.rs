//! Our GPU reorder kernels against DAQIRI's on the same batches, in one run:
//! each as a fraction of a device copy of the aggregate, and the aggregates
//! compared byte for byte, with the CPU conversion (the engine's oracle) as
//! the third opinion. A difference is printed with the slot, the byte and
//! the input sample it came from.
//!
//! Batches: 8 KiB payloads behind a 64-byte header whose first four bytes
//! are the packet's sequence number (big-endian), in a shuffled arrival
//! order, every 97th packet missing. DAQIRI's kernel runs in
//! `daqiri_reorder_check` (`tests/reference/build.sh reorder-check`), which
//! copies the packets' addresses to the GPU before each launch as DAQIRI's
//! engine does; ours reads its slot table from pinned memory as our engine
//! does. Run on the GPU machine:
//! `DAQIRI_REORDER_CHECK=path/to/daqiri_reorder_check ./gpu_reorder_vs_daqiri`
//! (`BENCH_REPS`, default 20, launches per row).
//!
//! A third kernel runs the same batches: ours behind libdaqiri's
//! `packet_reorder_copy_payload_by_sequence` (`daqiri::gpu::launch_by_sequence`),
//! which, as DAQIRI's, reads each packet's sequence number on the GPU from
//! a device table of packet addresses; its aggregate must equal the others.

mod gpu_common;

use std::io::Write;
use std::process::{Command, Stdio};

use cudarc::driver::CudaContext;
use daqiri::config::model::{DataTypes, Endianness, InputType, OutputType};
use daqiri::gpu::{DeviceBuffer, GpuReorder, SequenceLayout, Slots, launch_by_sequence};
use daqiri::reorder::convert::{convert, output_len};
use gpu_common::{arrival_order, copy_rate, launch_rate};

const PAYLOAD: usize = 8192;
const HEADER: usize = 64;
const STRIDE: usize = HEADER + PAYLOAD;
const MISSING_EVERY: usize = 97;
const SIZES_MB: [usize; 3] = [8, 64, 512];

fn main() {
    let Ok(driver) = std::env::var("DAQIRI_REORDER_CHECK") else {
        println!(
            "skipped: DAQIRI_REORDER_CHECK names no daqiri_reorder_check (tests/reference/build.sh reorder-check)"
        );
        return;
    };
    let reps: usize = std::env::var("BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let ctx = CudaContext::new(0).expect("GPU 0");
    println!("GPU 0: {}, {PAYLOAD} B payloads, {reps} launches per row\n", ctx.name().unwrap_or_default());
    println!(
        "| conversion | aggregate | ours (GB/s, of copy) | DAQIRI (GB/s, of copy) | ours / DAQIRI | libdaqiri's entry / DAQIRI | outputs |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut gpu = GpuReorder::new(0).expect("reorder kernels");
    let mut differences = 0;
    for (name, types) in cases() {
        for mb in SIZES_MB {
            let row = Row::new(types.clone(), mb << 20);
            let ours = row.ours(&mut gpu, reps);
            let entry = row.by_sequence(&mut gpu, reps);
            let daqiri = row.daqiri(&driver, reps);
            let copy = copy_rate(&ctx, row.slots * row.out_slot, reps);
            let bytes = (row.slots * (PAYLOAD + row.out_slot)) as f64;
            let (ours_rate, daqiri_rate) = (bytes * ours.launches / 1e9, bytes * daqiri.launches / 1e9);
            let verdict = row.compare(&ours.output, &daqiri.output, &entry.output);
            if verdict != "equal, and equal to the CPU's" {
                differences += 1;
            }
            println!(
                "| {name} | {mb} MB | {ours_rate:.0} ({:.0}%) | {daqiri_rate:.0} ({:.0}%) | {:.2}x | {:.2}x | {verdict} |",
                100.0 * ours_rate * 1e9 / copy,
                100.0 * daqiri_rate / daqiri.copy_gbps,
                ours.launches / daqiri.launches,
                entry.launches / daqiri.launches,
            );
        }
    }
    if differences > 0 {
        eprintln!("{differences} rows whose outputs differ");
        std::process::exit(1);
    }
}

fn cases() -> Vec<(&'static str, Option<DataTypes>)> {
    let types = |input, output, endianness| Some(DataTypes { input_type: input, output_type: output, endianness });
    vec![
        ("plain copy", None),
        ("int4 -> fp16", types(InputType::Int4, OutputType::Fp16, Endianness::Host)),
        ("int8 -> bf16", types(InputType::Int8, OutputType::Bf16, Endianness::Host)),
        ("int16 -> fp32", types(InputType::Int16, OutputType::Fp32, Endianness::Host)),
        ("int16 (network) -> fp32", types(InputType::Int16, OutputType::Fp32, Endianness::Network)),
        ("int32 (network) -> fp64", types(InputType::Int32, OutputType::Fp64, Endianness::Network)),
    ]
}

/// One batch: its packets in arrival order and the slot each fills.
struct Row {
    types: Option<DataTypes>,
    slots: usize,
    out_slot: usize,
    /// Packets as they arrived, `STRIDE` bytes each.
    packets: Vec<u8>,
    /// Per slot, the arrival index of its packet (`None`: never came).
    arrival_of: Vec<Option<usize>>,
}

/// What a kernel did with a row: launches per second, and its aggregate.
struct Outcome {
    launches: f64,
    output: Vec<u8>,
    copy_gbps: f64,
}

impl Row {
    fn new(types: Option<DataTypes>, aggregate: usize) -> Self {
        let out_slot = types.as_ref().map_or(PAYLOAD, |t| output_len(t, PAYLOAD).expect("whole samples"));
        let slots = aggregate / out_slot;
        let arrived: Vec<usize> = arrival_order(slots).into_iter().filter(|slot| slot % MISSING_EVERY != 1).collect();
        let mut packets = vec![0u8; arrived.len() * STRIDE];
        let mut state = 0x2545_f491_4f6c_dd1du64 ^ aggregate as u64;
        for word in packets.as_chunks_mut::<8>().0 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *word = state.to_ne_bytes();
        }
        let mut arrival_of = vec![None; slots];
        for (arrival, &slot) in arrived.iter().enumerate() {
            packets[arrival * STRIDE..][..4].copy_from_slice(&(slot as u32).to_be_bytes());
            arrival_of[slot] = Some(arrival);
        }
        Self { types, slots, out_slot, packets, arrival_of }
    }

    fn payload(&self, arrival: usize) -> &[u8] {
        &self.packets[arrival * STRIDE + HEADER..][..PAYLOAD]
    }

    /// Our kernel, its slot table written from the arrival order as the engine writes it.
    fn ours(&self, gpu: &mut GpuReorder, reps: usize) -> Outcome {
        let input = DeviceBuffer::from_host(0, &self.packets).expect("packets on the GPU");
        let output = DeviceBuffer::zeroed(0, self.slots * self.out_slot).expect("aggregate");
        let sources: Vec<_> =
            self.arrival_of.iter().map(|a| a.map(|a| input.slice(a * STRIDE + HEADER, PAYLOAD))).collect();
        let launches = launch_rate(gpu, self.slots, reps, |gpu| {
            let slots = Slots { sources: &sources, in_len: PAYLOAD };
            gpu.launch(self.types.as_ref(), slots, output.slice(0, output.len()), self.out_slot).expect("launch");
        });
        Outcome { launches, output: output.to_host().expect("aggregate to the host"), copy_gbps: 0.0 }
    }

    /// Ours as libdaqiri exports it: a device table of packet addresses,
    /// the sequence number read on the GPU.
    fn by_sequence(&self, gpu: &mut GpuReorder, reps: usize) -> Outcome {
        let input = DeviceBuffer::from_host(0, &self.packets).expect("packets on the GPU");
        let output = DeviceBuffer::zeroed(0, self.slots * self.out_slot).expect("aggregate");
        let count = self.packets.len() / STRIDE;
        let addresses: Vec<u8> =
            (0..count).flat_map(|a| input.slice(a * STRIDE, STRIDE).ptr().address().to_ne_bytes()).collect();
        let table = DeviceBuffer::from_host(0, &addresses).expect("packet table on the GPU");
        let layout = SequenceLayout {
            payload_offset: HEADER as u32,
            in_len: PAYLOAD as u32,
            out_len: self.out_slot as u32,
            seq_bits: (0, 32),
            batch_bits: None,
            packets_per_batch: self.slots as u32,
            max_slot: self.slots as u32 - 1,
        };
        let (table, out) = (table.slice(0, table.len()).ptr().address(), output.slice(0, output.len()).ptr().address());
        let launches = launch_rate(gpu, self.slots, reps, |gpu| {
            // SAFETY: the table holds `count` packet addresses of `input`,
            // each STRIDE bytes, and `output` has a slot per sequence number;
            // both outlive the launches (launch_rate synchronises).
            unsafe {
                launch_by_sequence(gpu.stream().cu_stream(), table, count as u32, out, &layout, self.types.as_ref(), 0)
            }
            .expect("launch");
        });
        Outcome { launches, output: output.to_host().expect("aggregate to the host"), copy_gbps: 0.0 }
    }

    /// DAQIRI's kernel, through its driver, on the same packets.
    fn daqiri(&self, driver: &str, reps: usize) -> Outcome {
        let (input, output, order) = match &self.types {
            None => ("same".to_owned(), "same".to_owned(), "host"),
            Some(t) => (
                format!("{:?}", t.input_type).to_lowercase(),
                format!("{:?}", t.output_type).to_lowercase(),
                if t.endianness == Endianness::Network { "network" } else { "host" },
            ),
        };
        let args = [
            (self.packets.len() / STRIDE).to_string(),
            self.slots.to_string(),
            STRIDE.to_string(),
            HEADER.to_string(),
            PAYLOAD.to_string(),
            self.out_slot.to_string(),
            input,
            output,
            order.to_owned(),
            reps.to_string(),
        ];
        let mut child = Command::new(driver)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {driver}: {e}"));
        let mut stdin = child.stdin.take().expect("stdin");
        let packets = &self.packets;
        let done = std::thread::scope(|scope| {
            scope.spawn(move || stdin.write_all(packets).expect("packets to DAQIRI's driver"));
            child.wait_with_output().expect("DAQIRI's driver")
        });
        let report = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{driver} {}: {report}", args.join(" "));
        let field = |name: &str| -> f64 {
            report
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or_else(|| panic!("{name} missing from {report}"))
        };
        Outcome { launches: field("launches_per_s"), output: done.stdout, copy_gbps: field("copy_gbps") }
    }

    /// "equal, and equal to the CPU's", or where the four first part.
    fn compare(&self, ours: &[u8], daqiri: &[u8], entry: &[u8]) -> String {
        let mut expected = vec![0u8; self.out_slot];
        for (slot, arrival) in self.arrival_of.iter().enumerate() {
            let at = slot * self.out_slot;
            let (ours, daqiri, entry) =
                (&ours[at..][..self.out_slot], &daqiri[at..][..self.out_slot], &entry[at..][..self.out_slot]);
            expected.fill(0);
            if let Some(arrival) = *arrival {
                match &self.types {
                    None => expected.copy_from_slice(self.payload(arrival)),
                    Some(t) => convert(t, self.payload(arrival), &mut expected),
                }
            }
            if ours == expected.as_slice() && daqiri == expected.as_slice() && entry == expected.as_slice() {
                continue;
            }
            let byte = (0..self.out_slot)
                .find(|&i| ours[i] != expected[i] || daqiri[i] != expected[i] || entry[i] != expected[i])
                .unwrap_or(0);
            let input = arrival.map(|a| {
                let start = byte * PAYLOAD / self.out_slot / 8 * 8;
                format!("{:02x?}", &self.payload(a)[start..start + 8])
            });
            return format!(
                "DIFFER at slot {slot} byte {byte}: ours {:02x?}, libdaqiri's entry {:02x?}, DAQIRI {:02x?}, CPU {:02x?} (input bytes {})",
                &ours[byte..(byte + 8).min(self.out_slot)],
                &entry[byte..(byte + 8).min(self.out_slot)],
                &daqiri[byte..(byte + 8).min(self.out_slot)],
                &expected[byte..(byte + 8).min(self.out_slot)],
                input.unwrap_or_else(|| "none: a missing packet".into())
            );
        }
        "equal, and equal to the CPU's".into()
    }
}
