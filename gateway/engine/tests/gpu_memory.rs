//! GPU memory regions on the GPU machine: `host_pinned` buffers carry
//! packets through an engine, `device` regions are allocated on the GPU
//! their affinity names and reported so, a backend that writes with the CPU
//! lands packets (or, under header-data split, their payloads) in a device
//! region through pinned staging, and sends from one the same way; a
//! loopback whose queues are all in device memory copies GPU to GPU. Run by
//! `tests/gpu/run.sh`.
#![cfg(feature = "cuda")]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use daqiri::headers::UdpFrame;
use daqiri::{Engine, SegmentMemory, Status};
use daqiri_config::model::{MemoryKind, TxOffload};
use daqiri_config::testing::{QueueBuilder, TestConfig, rx, tx};

/// A loopback engine's config with regions `tx` (host), `pinned`
/// (host_pinned), `gpu` (device, GPU 0) and `headers` (host, 42 bytes), TX
/// from `tx` and RX through `rx_queue`.
fn config(rx_queue: QueueBuilder) -> TestConfig {
    TestConfig::loopback()
        .region("tx", 64, 2048)
        .region_of("pinned", MemoryKind::HostPinned, 64, 2048)
        .region_of("gpu", MemoryKind::Device, 64, 65536)
        .region("headers", 64, 42)
        .tx_queue(tx(0, "tx").batch(8))
        .rx_queue(rx_queue)
}

fn engine(config: &TestConfig) -> Result<Engine, daqiri::Error> {
    Engine::from_yaml(&config.yaml())
}

#[test]
fn gpu_pinned_buffers_carry_packets_and_device_regions_name_their_gpu() {
    let engine = engine(&config(rx(0, "pinned"))).expect("engine with GPU regions");
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    burst.packet_mut(0).write(b"through pinned memory").unwrap();
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let rx = loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            break b;
        }
    };
    assert_eq!(rx.packet(0).data(), b"through pinned memory");
    drop(rx);
    let regions = engine.stats().regions;
    let gpu_of = |name: &str| regions.iter().find(|r| r.name == name).map(|r| (r.kind, r.gpu));
    assert_eq!(gpu_of("tx"), Some(("host", None)));
    // Pinned memory is host memory on a NUMA node, mapped into every GPU.
    assert_eq!(gpu_of("pinned"), Some(("host_pinned", None)));
    assert_eq!(gpu_of("gpu"), Some(("device", Some(0))));
}

/// The first packet of the next RX burst: each segment where it lives,
/// device segments copied back once the burst's copy is done.
fn next_packet_segments(engine: &Engine) -> Vec<(bool, Vec<u8>)> {
    let rx = loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            break b;
        }
    };
    assert!(rx.cuda_event().is_some(), "a burst the CPU landed in device memory carries its copy's event");
    packet_segments(&rx, 0)
}

/// Packet `index` of `burst`: each segment where it lives, device segments
/// copied back once the burst is ready.
fn packet_segments(burst: &daqiri::Burst, index: usize) -> Vec<(bool, Vec<u8>)> {
    let packet = burst.packet(index);
    (0..packet.num_segments())
        .map(|s| match packet.segment_memory(s).unwrap() {
            SegmentMemory::Host(bytes) => (false, bytes.to_vec()),
            SegmentMemory::Device(slice) => {
                burst.wait_ready();
                (true, daqiri::gpu::copy_to_host(0, slice).unwrap())
            }
        })
        .collect()
}

/// Sizes packet `index` of a TX burst to `bytes` and copies them into its
/// device buffer, as an application's `cudaMemcpy` does.
fn write_to_device(burst: &mut daqiri::Burst, index: usize, bytes: &[u8]) {
    burst.packet_mut(index).set_lengths(&[bytes.len()]).unwrap();
    let Some(SegmentMemory::Device(slice)) = burst.packet(index).segment_memory(0) else { panic!("a device segment") };
    daqiri::gpu::bind_thread(0).unwrap();
    // SAFETY: the packet's own device buffer, `bytes.len()` long; a synchronous copy.
    unsafe { daqiri::gpu::cudarc::driver::result::memcpy_htod_sync(slice.ptr().address(), bytes) }.unwrap();
}

#[test]
fn gpu_a_cpu_backend_lands_device_regions_through_pinned_staging() {
    let engine = engine(&config(rx(0, "gpu"))).expect("engine landing in device memory");
    let frames: Vec<Vec<u8>> = (0..40u8).map(|i| (0..(100 + i as usize * 37)).map(|b| b as u8 ^ i).collect()).collect();
    for frame in &frames {
        let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
        burst.packet_mut(0).write(frame).unwrap();
        engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
        assert_eq!(next_packet_segments(&engine), vec![(true, frame.clone())]);
    }
    let gpu = engine.stats().regions.into_iter().find(|r| r.name == "gpu").unwrap();
    assert_eq!(gpu.in_use, 0, "each burst gave its device buffer back once its copy was done");
}

#[test]
fn gpu_header_data_split_puts_only_the_payload_in_device_memory() {
    let engine = engine(&config(rx(0, "headers").split_into("gpu"))).expect("engine splitting headers from payload");
    let frame: Vec<u8> = (0..1400u32).map(|b| (b * 7) as u8).collect();
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    burst.packet_mut(0).write(&frame).unwrap();
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    assert_eq!(next_packet_segments(&engine), vec![(false, frame[..42].to_vec()), (true, frame[42..].to_vec())]);
}

#[test]
fn gpu_a_cpu_backend_sends_from_device_memory_and_its_helpers_leave_it_to_cuda() {
    let device_tx = config(rx(0, "pinned"));
    let mut device_tx = device_tx;
    device_tx.region_mut("tx").kind = MemoryKind::Device;
    let engine = engine(&device_tx).expect("a loopback sending from device memory");
    let frame: Vec<u8> = (0..1400u32).map(|b| (b * 13) as u8).collect();
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    // The twin the loopback reads is the engine's: the CPU helpers write no device segment.
    let mut packet = burst.packet_mut(0);
    assert!(packet.segment_buffer(0).is_none());
    let err = packet.write(&frame).unwrap_err();
    assert_eq!(err.status, Status::InvalidParameter, "{err}");
    assert!(err.message.contains("no host segment 0"), "{err}");
    write_to_device(&mut burst, 0, &frame);
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let rx = loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            break b;
        }
    };
    assert_eq!(packet_segments(&rx, 0), vec![(false, frame)]);
}

/// A loopback whose queues are all in device memory: frames go GPU to GPU,
/// steered by their headers (copied to the host for it) to two RX queues,
/// one splitting header from payload into two device regions, with
/// `tx_eth_src`'s MAC in each; one burst larger than the host copy's chunk.
#[test]
fn gpu_a_loopback_in_device_memory_copies_gpu_to_gpu_and_steers_by_headers() {
    const FRAMES: usize = 700;
    let config = TestConfig::loopback()
        .region_of("tx", MemoryKind::Device, 1024, 9000)
        .region_of("whole", MemoryKind::Device, 1024, 9000)
        .region_of("headers", MemoryKind::Device, 1024, 42)
        .region_of("payloads", MemoryKind::Device, 1024, 9000)
        .tx_queue(tx(0, "tx").batch(FRAMES as u32).offloads(&[TxOffload::TxEthSrc]))
        .rx_queue(rx(0, "whole").batch(64).timeout_us(1000))
        .rx_queue(rx(1, "headers").split_into("payloads").batch(64).timeout_us(1000))
        .udp_flow(7, 1, 5001);
    let engine = engine(&config).expect("a loopback in device memory");
    let frames: Vec<Vec<u8>> = (0..FRAMES)
        .map(|i| {
            let addresses = UdpFrame {
                src_mac: [0xaa; 6],
                dst_mac: [0xbb; 6],
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: Ipv4Addr::new(10, 0, 0, 2),
                src_port: 4096,
                dst_port: 5000 + (i % 2) as u16,
            };
            let payload: Vec<u8> = (0..5000 + (i * 97) % 3900).map(|b| (b ^ i) as u8).collect();
            let mut frame = vec![0u8; 9000];
            let len = addresses.write(&mut frame, &payload).unwrap();
            frame.truncate(len);
            frame
        })
        .collect();
    assert!(frames.iter().map(Vec::len).sum::<usize>() > 4 << 20, "one burst is more than a chunk");
    let mut burst = engine.get_tx_packet_burst(0, 0, FRAMES).unwrap();
    for (i, frame) in frames.iter().enumerate() {
        write_to_device(&mut burst, i, frame);
    }
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let mut got: [Vec<Vec<u8>>; 2] = Default::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got[0].len() + got[1].len() < FRAMES {
        assert!(Instant::now() < deadline, "only {} and {} frames came back", got[0].len(), got[1].len());
        for queue in 0..2u16 {
            let Some(rx) = engine.get_rx_burst(0, queue).unwrap() else { continue };
            assert!(rx.cuda_event().is_none(), "copied on the GPU before delivery: no event to wait for");
            for i in 0..rx.num_packets() {
                let segments = packet_segments(&rx, i);
                assert!(segments.iter().all(|(device, _)| *device), "every segment in device memory");
                assert_eq!(segments.len(), 1 + queue as usize, "queue {queue}'s segments");
                assert_eq!(rx.packet(i).flow_id(), (queue == 1).then_some(7), "queue {queue}'s flow");
                got[queue as usize].push(segments.into_iter().flat_map(|(_, bytes)| bytes).collect());
            }
        }
    }
    let port_mac = engine.mac_address(0).unwrap();
    for (queue, got) in got.iter().enumerate() {
        let want: Vec<Vec<u8>> = frames
            .iter()
            .skip(queue)
            .step_by(2)
            .map(|frame| [&frame[..6], &port_mac[..], &frame[12..]].concat())
            .collect();
        assert_eq!(got.len(), want.len(), "queue {queue}'s frames");
        assert!(got == &want, "queue {queue}'s frames arrive as sent, the port's MAC their source");
    }
    engine.shutdown();
    for region in engine.stats().regions {
        assert_eq!(region.in_use, 0, "region {} has every buffer back", region.name);
    }
}

#[test]
fn gpu_an_absent_gpu_is_named() {
    let mut config = config(rx(0, "pinned"));
    config.region_mut("gpu").affinity = 99;
    let err = engine(&config).unwrap_err();
    assert!(err.to_string().contains("GPU 99 does not exist"), "{err}");
    assert!(err.to_string().contains("memory region \"gpu\""), "{err}");
}

#[test]
fn gpu_a_pinned_regions_affinity_is_a_numa_node_as_in_daqiri() {
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .unwrap_or(1);
    let mut config = config(rx(0, "pinned"));
    config.region_mut("pinned").affinity = nodes as u32;
    let err = engine(&config).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&format!("NUMA node {nodes} does not exist")), "{message}");
    assert!(message.contains("memory region \"pinned\""), "{message}");
}

#[test]
fn gpu_device_regions_beyond_the_gpus_free_memory_are_refused_before_allocating() {
    let (free, _) = daqiri::gpu::memory_info(0).expect("GPU 0's free memory");
    let gib = 1usize << 30;
    let mut config = config(rx(0, "pinned"));
    let gpu = config.region_mut("gpu");
    (gpu.num_bufs, gpu.buf_size) = ((free / gib + 2) as u32, gib as u64);
    let err = engine(&config).unwrap_err();
    assert_eq!(err.status, Status::NoFreePacketBuffers, "{err}");
    let message = err.to_string();
    assert!(message.contains("memory_regions") && message.contains("device regions on GPU 0 need"), "{message}");
}

#[test]
fn gpu_the_raw_and_pcap_writers_write_a_split_packet_whole_through_the_host() {
    let engine = engine(&config(rx(0, "headers").split_into("gpu"))).expect("engine splitting headers from payload");
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    burst.packet_mut(0).write(&[7u8; 600]).unwrap();
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let rx = loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            break b;
        }
    };
    rx.wait_ready();
    let dir = tempfile::tempdir().unwrap();
    // Headers from host memory, the payload copied from the GPU: one file, the frame whole.
    let raw = daqiri::writer::RawWriter::new(dir.path(), "pkt", 0).unwrap();
    assert_eq!(raw.write(&rx).unwrap().packets, 1);
    assert_eq!(std::fs::read(raw.path(0)).unwrap(), [7u8; 600]);
    let pcap_path = dir.path().join("c.pcap");
    let mut pcap =
        daqiri::writer::PcapWriter::create(&pcap_path, daqiri::writer::PcapResolution::Micros, None).unwrap();
    assert_eq!(pcap.write_burst(&rx).unwrap().packets, 1);
    drop(pcap);
    let file = std::fs::read(&pcap_path).unwrap();
    assert_eq!(file.len(), 24 + 16 + 600, "a header and one record");
    assert_eq!(&file[40..], [7u8; 600]);
}

/// What an RDMA device registers GPU memory through (`ibv_reg_dmabuf_mr`,
/// as a RoCE queue on a `device` region does): the memory exported by the
/// GPU's driver as a dma-buf of whole pages. No RDMA device sits beside
/// this GPU, so the registration itself is not run here.
#[test]
fn gpu_device_memory_exports_as_a_dma_buf_of_whole_pages() {
    let buffer = daqiri::gpu::DeviceBuffer::zeroed(0, 3 * 4096 + 100).unwrap();
    assert_eq!(dma_buf_size(&buffer), 4 * 4096, "whole pages");
}

/// A `device` region's memory (made with `cuMemCreate`, so that consumers
/// in other processes can import it) exports as a dma-buf too, for a RoCE
/// queue on it: the whole allocation, in granules of at least 64 KiB.
#[test]
fn gpu_region_memory_exports_as_a_dma_buf_of_its_whole_allocation() {
    let buffer = daqiri::gpu::DeviceBuffer::zeroed_as_region(0, 3 * 4096 + 100).unwrap();
    let size = dma_buf_size(&buffer);
    assert!(size >= 64 * 1024 && size.is_multiple_of(4096), "the whole allocation, {size} bytes");
    // And it holds what the GPU wrote there: zeroes.
    assert!(buffer.to_host().unwrap().iter().all(|&b| b == 0));
}

/// The size of the dma-buf `buffer` exports, as the kernel lists it.
fn dma_buf_size(buffer: &daqiri::gpu::DeviceBuffer) -> usize {
    let fd = buffer.dma_buf().unwrap_or_else(|e| panic!("exported: {e}"));
    let fd = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).map(str::to_owned);
    assert!(field("exp_name:").is_some(), "a dma-buf, as the kernel lists it: {info}");
    field("size:").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("its size: {info}"))
}
