//! GPU memory regions on the GPU machine: `host_pinned` buffers carry
//! packets through an engine, `device` regions are allocated on the GPU
//! their affinity names and reported so, a backend that writes with the CPU
//! lands packets (or, under header-data split, their payloads) in a device
//! region through pinned staging, and refuses to send from one. Run by
//! `tests/gpu/run.sh`.
#![cfg(feature = "cuda")]

use daqiri::{Engine, SegmentMemory, Status};

fn config(rx_region: &str) -> String {
    format!(
        r#"
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - {{ name: tx, kind: host, num_bufs: 64, buf_size: 2048 }}
    - {{ name: pinned, kind: host_pinned, affinity: 0, num_bufs: 64, buf_size: 2048 }}
    - {{ name: gpu, kind: device, affinity: 0, num_bufs: 64, buf_size: 65536 }}
    - {{ name: headers, kind: host, num_bufs: 64, buf_size: 42 }}
    interfaces:
    - name: lo
      address: loopback
      tx: {{ queues: [{{ name: t, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [tx] }}] }}
      rx: {{ queues: [{{ name: r, id: 0, cpu_core: 0, batch_size: 1, memory_regions: [{rx_region}] }}] }}
"#
    )
}

#[test]
fn gpu_pinned_buffers_carry_packets_and_device_regions_name_their_gpu() {
    let engine = Engine::from_yaml(&config("pinned")).expect("engine with GPU regions");
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
    assert!(rx.cuda_event().is_some(), "a burst with device segments carries its copy's event");
    let packet = rx.packet(0);
    (0..packet.num_segments())
        .map(|s| match packet.segment_memory(s).unwrap() {
            SegmentMemory::Host(bytes) => (false, bytes.to_vec()),
            SegmentMemory::Device(slice) => {
                rx.wait_ready();
                (true, daqiri::gpu::copy_to_host(0, slice).unwrap())
            }
        })
        .collect()
}

#[test]
fn gpu_a_cpu_backend_lands_device_regions_through_pinned_staging() {
    let engine = Engine::from_yaml(&config("gpu")).expect("engine landing in device memory");
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
    let engine = Engine::from_yaml(&config("headers, gpu")).expect("engine splitting headers from payload");
    let frame: Vec<u8> = (0..1400u32).map(|b| (b * 7) as u8).collect();
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    burst.packet_mut(0).write(&frame).unwrap();
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    assert_eq!(next_packet_segments(&engine), vec![(false, frame[..42].to_vec()), (true, frame[42..].to_vec())]);
}

#[test]
fn gpu_a_cpu_backend_refuses_to_send_from_device_memory_by_name() {
    let err =
        Engine::from_yaml(&config("pinned").replace("memory_regions: [tx]", "memory_regions: [gpu]")).unwrap_err();
    assert_eq!(err.status, Status::NotSupported, "{err}");
    assert!(err.to_string().contains("tx queue \"t\" of \"lo\" uses region \"gpu\" of kind device"), "{err}");
}

#[test]
fn gpu_an_absent_gpu_is_named() {
    let yaml = config("pinned").replace("kind: device, affinity: 0", "kind: device, affinity: 99");
    let err = Engine::from_yaml(&yaml).unwrap_err();
    assert!(err.to_string().contains("GPU 99 does not exist"), "{err}");
    assert!(err.to_string().contains("memory region \"gpu\""), "{err}");
}

#[test]
fn gpu_a_pinned_regions_affinity_is_a_numa_node_as_in_daqiri() {
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .unwrap_or(1);
    let yaml =
        config("pinned").replace("kind: host_pinned, affinity: 0", &format!("kind: host_pinned, affinity: {nodes}"));
    let err = Engine::from_yaml(&yaml).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&format!("NUMA node {nodes} does not exist")), "{message}");
    assert!(message.contains("memory region \"pinned\""), "{message}");
}

#[test]
fn gpu_device_regions_beyond_the_gpus_free_memory_are_refused_before_allocating() {
    let (free, _) = daqiri::gpu::memory_info(0).expect("GPU 0's free memory");
    let gib = 1usize << 30;
    let yaml = config("pinned").replace(
        "kind: device, affinity: 0, num_bufs: 64, buf_size: 65536",
        &format!("kind: device, affinity: 0, num_bufs: {}, buf_size: {gib}", free / gib + 2),
    );
    let err = Engine::from_yaml(&yaml).unwrap_err();
    assert_eq!(err.status, Status::NoFreePacketBuffers, "{err}");
    let message = err.to_string();
    assert!(message.contains("memory_regions") && message.contains("device regions on GPU 0 need"), "{message}");
}

#[test]
fn gpu_the_raw_and_pcap_writers_refuse_a_burst_in_device_memory_whole() {
    let engine = Engine::from_yaml(&config("headers, gpu")).expect("engine splitting headers from payload");
    let mut burst = engine.get_tx_packet_burst(0, 0, 1).unwrap();
    burst.packet_mut(0).write(&[7u8; 600]).unwrap();
    engine.send_tx_burst(burst).map_err(|e| e.error).unwrap();
    let rx = loop {
        if let Some(b) = engine.get_rx_burst(0, 0).unwrap() {
            break b;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let raw = daqiri::writer::RawWriter::new(dir.path(), "pkt", 0).unwrap();
    let err = raw.write(&rx).expect_err("the raw writer cannot read GPU memory");
    assert_eq!(err.status, Status::NotSupported, "{err}");
    assert!(err.message.contains("packet 0 segment 1 lies in GPU memory"), "{err}");
    assert!(!raw.path(0).exists(), "nothing is written, not even the host segment");
    let pcap_path = dir.path().join("c.pcap");
    let mut pcap =
        daqiri::writer::PcapWriter::create(&pcap_path, daqiri::writer::PcapResolution::Micros, None).unwrap();
    let err = pcap.write_burst(&rx).expect_err("the pcap writer cannot read GPU memory");
    assert_eq!(err.status, Status::NotSupported, "{err}");
    drop(pcap);
    assert_eq!(std::fs::metadata(&pcap_path).unwrap().len(), 24, "the file holds its header and no record");
}
