//! GPU memory regions on the GPU machine: `host_pinned` buffers carry
//! packets through an engine, `device` regions are allocated on the GPU
//! their affinity names and reported so, and a backend that reads with the
//! CPU refuses a device region by name. Run by `tests/gpu/run.sh`.
#![cfg(feature = "cuda")]

use daqiri::{Engine, Status};

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
    interfaces:
    - name: lo
      address: loopback
      tx: {{ queues: [{{ name: t, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [tx] }}] }}
      rx: {{ queues: [{{ name: r, id: 0, cpu_core: 0, batch_size: 1, memory_regions: [{rx_region}] }}] }}
"#
    )
}

#[test]
fn gpu_pinned_buffers_carry_packets_and_regions_name_their_gpu() {
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
    assert_eq!(gpu_of("pinned"), Some(("host_pinned", Some(0))));
    assert_eq!(gpu_of("gpu"), Some(("device", Some(0))));
}

#[test]
fn gpu_a_cpu_backend_refuses_a_device_region_by_name() {
    let err = Engine::from_yaml(&config("gpu")).unwrap_err();
    assert_eq!(err.status, Status::NotSupported, "{err}");
    assert!(err.to_string().contains("region \"gpu\" of kind device"), "{err}");
}

#[test]
fn gpu_an_absent_gpu_is_named() {
    let yaml = config("pinned").replace("kind: device, affinity: 0", "kind: device, affinity: 99");
    let err = Engine::from_yaml(&yaml).unwrap_err();
    assert!(err.to_string().contains("GPU 99 does not exist"), "{err}");
    assert!(err.to_string().contains("memory region \"gpu\""), "{err}");
}
