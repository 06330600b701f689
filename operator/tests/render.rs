//! Rendering: every CRD field lands on its DAQIRI YAML key, the gateway's
//! validator checks each node's config, and a resource that breaks it is
//! reported (path and message) while the rest keep running.

use std::collections::BTreeMap;

use daqiri_operator::crd::{DaqiriFlow, DaqiriPort};
use daqiri_operator::render::{Finding, NodeInfo, Verdict, plan, render_node};
use serde_yaml::Value;

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples");

fn load<T: serde::de::DeserializeOwned>(file: &str) -> Vec<T> {
    let text = std::fs::read_to_string(format!("{SAMPLES}/{file}")).unwrap();
    serde_yaml::Deserializer::from_str(&text).map(|doc| T::deserialize(doc).unwrap()).collect()
}

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }
}

fn flow(yaml: &str) -> DaqiriFlow {
    serde_yaml::from_str(yaml).unwrap()
}

/// The rendered config as a YAML tree, read back with the DAQIRI key names.
fn tree(yaml: &str) -> Value {
    daqiri_config::Document::parse(yaml).unwrap().validate().expect("the rendered config is valid");
    serde_yaml::from_str::<Value>(yaml).unwrap()["daqiri"]["cfg"].clone()
}

fn invalid(verdict: Option<&Verdict>) -> &Finding {
    match verdict {
        Some(Verdict::Invalid(finding)) => finding,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn a_socket_port_and_its_flows_land_on_daqiri_keys() {
    let ports: Vec<DaqiriPort> = load("port-socket.yaml");
    let flows: Vec<DaqiriFlow> = load("flows.yaml");
    let config = render_node(&node("n1", &[]), &ports, &flows).unwrap();
    assert_eq!(config.ports["udp-rx"], Verdict::Included);
    assert_eq!((&config.flows["adc-a"], &config.flows["adc-b"]), (&Verdict::Included, &Verdict::Included));
    let cfg = tree(&config.yaml);
    assert_eq!(cfg["version"], 1);
    assert_eq!(cfg["stream_type"], "socket");
    let region = &cfg["memory_regions"][0];
    assert_eq!(
        (&region["name"], &region["kind"], &region["num_bufs"], &region["buf_size"]),
        (&"udp-rx-rx".into(), &"host".into(), &16384.into(), &9000.into())
    );
    let iface = &cfg["interfaces"][0];
    assert_eq!(iface["name"], "udp-rx");
    assert_eq!(iface["socket_config"]["mode"], "server");
    assert_eq!(iface["socket_config"]["local_addr"], "udp://0.0.0.0:4096");
    let q1 = &iface["rx"]["queues"][1];
    assert_eq!((&q1["name"], &q1["id"], &q1["cpu_core"]), (&"q1".into(), &1.into(), &3.into()));
    assert_eq!((&q1["batch_size"], &q1["timeout_us"]), (&64.into(), &500.into()));
    assert_eq!(q1["memory_regions"][0], "udp-rx-rx");
    let f = &iface["rx"]["flows"][1];
    assert_eq!((&f["name"], &f["id"]), (&"adc-b".into(), &11.into()));
    assert_eq!(f["action"]["type"], "queue");
    assert_eq!(f["action"]["id"], 1);
    assert_eq!(f["match"]["udp_src"], "10050-10099");
    assert_eq!(iface["rx"]["flow_isolation"], false);
    assert_eq!(config.sha256.len(), 64);
}

#[test]
fn a_roce_ingest_port_renders_its_ring_access_and_sender() {
    let ports: Vec<DaqiriPort> = load("port-roce-ingest.yaml");
    let config = render_node(&node("n1", &[]), &ports, &[]).unwrap();
    assert_eq!(config.ports["sensor-ingest"], Verdict::Included);
    let cfg = tree(&config.yaml);
    assert_eq!(cfg["stream_type"], "socket");
    let region = &cfg["memory_regions"][0];
    assert_eq!(region["name"], "sensor-ingest-ring");
    assert_eq!(region["access"], serde_yaml::from_str::<Value>("[local, rdma_write]").unwrap());
    let roce = &cfg["interfaces"][0]["roce_config"];
    assert_eq!(roce["transport_mode"], "UC");
    let ingest = &roce["ingest"];
    assert_eq!((&ingest["peer_ip"], &ingest["peer_qpn"]), (&"192.168.50.10".into(), &2.into()));
    assert_eq!((&ingest["peer_psn"], &ingest["mtu"]), (&0.into(), &4096.into()));
    assert_eq!(cfg["interfaces"][0]["socket_config"]["local_addr"], "roce://192.168.50.2");
}

#[test]
fn an_sriov_dpdk_port_renders_a_resource_address_and_raw_stream() {
    let mut ports: Vec<DaqiriPort> = load("port-sriov-dpdk.yaml");
    let labelled = node("gpu-1", &[("daqiri.nvidia.com/instrument", "true")]);
    assert!(render_node(&node("plain", &[]), &ports, &[]).is_none(), "the selector keeps it off other nodes");
    let cfg = tree(&render_node(&labelled, &ports, &[]).unwrap().yaml);
    assert_eq!((&cfg["stream_type"], &cfg["engine"]), (&"raw".into(), &"dpdk".into()));
    let iface = &cfg["interfaces"][0];
    assert_eq!(iface["address"], "k8s-resource:nvidia.com/cx7_vf");
    assert_eq!(iface["rx"]["flow_isolation"], true);
    assert_eq!(
        iface["rx"]["queues"][0]["memory_regions"],
        serde_yaml::from_str::<Value>("[cx7-vf-headers, cx7-vf-payload]").unwrap()
    );
    let payload = &cfg["memory_regions"][1];
    assert_eq!((&payload["kind"], &payload["affinity"]), (&"device".into(), &0.into()));

    ports[0].spec.device.as_mut().unwrap().resource_index = Some(1);
    let cfg = tree(&render_node(&labelled, &ports, &[]).unwrap().yaml);
    assert_eq!(cfg["interfaces"][0]["address"], "k8s-resource:nvidia.com/cx7_vf#1");
}

#[test]
fn an_af_xdp_port_renders_the_af_xdp_engine_and_does_not_share_a_gateway_with_dpdk() {
    let mut ports: Vec<DaqiriPort> = load("port-af-xdp.yaml");
    let labelled = node("gpu-1", &[("daqiri.nvidia.com/instrument", "true")]);
    let config = render_node(&labelled, &ports, &[]).unwrap();
    assert_eq!(config.ports["vf-xdp"], Verdict::Included);
    let cfg = tree(&config.yaml);
    assert_eq!((&cfg["stream_type"], &cfg["engine"]), (&"raw".into(), &"af_xdp".into()));
    assert_eq!(cfg["interfaces"][0]["address"], "k8s-resource:nvidia.com/cx7_vf");
    assert_eq!(cfg["memory_regions"][0]["name"], "vf-xdp-rx");

    ports.extend(load::<DaqiriPort>("port-sriov-dpdk.yaml"));
    let config = render_node(&labelled, &ports, &[]).unwrap();
    // Name order: cx7-vf (dpdk) decides the node's engine.
    assert_eq!(config.ports["cx7-vf"], Verdict::Included);
    let mixed = invalid(config.ports.get("vf-xdp"));
    assert_eq!(mixed.path, "spec.backend");
    assert!(mixed.message.contains("afxdp cannot share node gpu-1 with port cx7-vf (dpdk)"), "{mixed}");
}

#[test]
fn rss_and_tx_queues_land_on_their_keys() {
    let mut ports: Vec<DaqiriPort> = load("port-socket.yaml");
    ports[0].spec.tx_queues = ports[0].spec.rx_queues[..1].to_vec();
    let rss = flow(
        "metadata: { name: rss }\nspec: { port: udp-rx, id: 7, match: { udpDst: \"4096\", ipv4Len: 1028 }, queues: [0, 1] }",
    );
    let config = render_node(&node("n1", &[]), &ports, &[rss]).unwrap();
    assert_eq!(config.flows["rss"], Verdict::Included);
    let cfg = tree(&config.yaml);
    let f = &cfg["interfaces"][0]["rx"]["flows"][0];
    assert_eq!(f["action"]["ids"], serde_yaml::from_str::<Value>("[0, 1]").unwrap());
    assert_eq!((&f["match"]["udp_dst"], &f["match"]["ipv4_len"]), (&4096.into(), &1028.into()));
    assert_eq!(cfg["interfaces"][0]["tx"]["queues"][0]["name"], "q0");
}

#[test]
fn ethernet_addresses_land_on_the_match() {
    let mut ports: Vec<DaqiriPort> = load("port-sriov-dpdk.yaml");
    ports[0].spec.node_selector.clear();
    let by_mac = flow(
        "metadata: { name: by-mac }\nspec: { port: cx7-vf, id: 9, match: { ethernet: { dst: \"aa:bb:cc:dd:ee:ff\" }, udpDst: \"4096\" }, queue: 0 }",
    );
    let config = render_node(&node("n1", &[]), &ports, &[by_mac]).unwrap();
    assert_eq!(config.flows["by-mac"], Verdict::Included);
    let m = &tree(&config.yaml)["interfaces"][0]["rx"]["flows"][0]["match"];
    assert_eq!((&m["ethernet"]["dst"], &m["udp_dst"]), (&"aa:bb:cc:dd:ee:ff".into(), &4096.into()));
    assert!(m["ethernet"].get("src").is_none());
}

const REORDER_FLOW: &str = r#"
metadata: { name: adc-reorder }
spec:
  port: cx7-vf
  id: 7
  match: { udpDst: "4096" }
  queue: 0
  reorder:
    type: gpu
    memoryRegion: batches
    payloadByteOffset: 8
    sequenceNumber: { bitOffset: 0, bitWidth: 32 }
    packetsPerBatch: 64
    dataTypes: { inputType: int16, outputType: fp32, endianness: network }
    missingAction: drop
"#;

#[test]
fn a_reorder_plan_lands_on_reorder_configs() {
    let mut ports: Vec<DaqiriPort> = load("port-sriov-dpdk.yaml");
    ports[0].spec.node_selector.clear();
    ports[0].spec.rx_queues[0].memory_regions = vec!["payload".into()]; // reorder reads one region (no split)
    ports[0]
        .spec
        .memory_regions
        .push(serde_yaml::from_str("{ name: batches, kind: device, numBufs: 8, bufSize: 1048576 }").unwrap());
    let config = render_node(&node("n1", &[]), &ports, &[flow(REORDER_FLOW)]).unwrap();
    assert_eq!(config.flows["adc-reorder"], Verdict::Included);
    let reorder = &tree(&config.yaml)["interfaces"][0]["rx"]["reorder_configs"][0];
    assert_eq!((&reorder["name"], &reorder["reorder_type"]), (&"adc-reorder".into(), &"gpu".into()));
    assert_eq!((&reorder["memory_region"], &reorder["payload_byte_offset"]), (&"cx7-vf-batches".into(), &8.into()));
    assert_eq!(reorder["flow_ids"][0], 7);
    let method = &reorder["method"]["seq_packets_per_batch"];
    assert_eq!((&method["packets_per_batch"], &method["sequence_number"]["bit_width"]), (&64.into(), &32.into()));
    assert_eq!(reorder["missing_action"], "drop");
    let types = &reorder["data_types"];
    assert_eq!(
        (&types["input_type"], &types["output_type"], &types["endianness"]),
        (&"int16".into(), &"fp32".into(), &"network".into())
    );
}

#[test]
fn a_reorder_plan_the_validator_refuses_is_reported_on_its_flow_and_the_port_runs() {
    let mut ports: Vec<DaqiriPort> = load("port-socket.yaml");
    ports[0]
        .spec
        .memory_regions
        .push(serde_yaml::from_str("{ name: batches, kind: host, numBufs: 8, bufSize: 1048576 }").unwrap());
    // A GPU plan writing into host memory.
    let socket_reorder = REORDER_FLOW.replace("cx7-vf", "udp-rx");
    let config = render_node(&node("n1", &[]), &ports, &[flow(&socket_reorder)]).unwrap();
    let finding = invalid(config.flows.get("adc-reorder"));
    assert_eq!(finding.path, "daqiri.cfg.interfaces[0].rx.reorder_configs[0].memory_region");
    assert!(finding.message.contains("gpu needs device or host_pinned memory"), "{finding}");
    assert_eq!(config.ports["udp-rx"], Verdict::Included, "the port keeps running");
}

#[test]
fn a_flow_that_breaks_the_config_is_reported_and_the_others_still_run() {
    let ports: Vec<DaqiriPort> = load("port-socket.yaml");
    let mut flows: Vec<DaqiriFlow> = load("flows.yaml");
    flows.push(flow(
        "metadata: { name: bad-queue }\nspec: { port: udp-rx, id: 12, match: { udpSrc: \"20000\" }, queue: 5 }",
    ));
    flows.push(flow(
        "metadata: { name: same-id }\nspec: { port: udp-rx, id: 10, match: { udpSrc: \"30000\" }, queue: 0 }",
    ));
    let config = render_node(&node("n1", &[]), &ports, &flows).unwrap();
    let bad = invalid(config.flows.get("bad-queue"));
    assert!(bad.path.ends_with(".action.id"), "{bad}");
    assert!(bad.message.contains("valid: 0, 1"), "{bad}");
    let clash = invalid(config.flows.get("same-id"));
    assert!(clash.message.contains("10"), "the duplicate id is named: {clash}");
    assert_eq!((&config.flows["adc-a"], &config.flows["adc-b"]), (&Verdict::Included, &Verdict::Included));
    let cfg = tree(&config.yaml);
    let ids: Vec<&Value> =
        cfg["interfaces"][0]["rx"]["flows"].as_sequence().unwrap().iter().map(|f| &f["id"]).collect();
    assert_eq!(ids, [&Value::from(10), &Value::from(11)], "only the good flows are in the config");
}

#[test]
fn conflicting_ports_on_one_node_leave_out_the_later_one() {
    let mut ports: Vec<DaqiriPort> = load("port-socket.yaml");
    let mut second = ports[0].clone();
    second.metadata.name = Some("udp-rx-2".into());
    second.spec.interface_name = Some("udp-rx".into()); // same interface name: the validator refuses
    ports.push(second);
    let mut dpdk: Vec<DaqiriPort> = load("port-sriov-dpdk.yaml");
    dpdk[0].spec.node_selector.clear();
    ports.extend(dpdk);
    let config = render_node(&node("n1", &[]), &ports, &[]).unwrap();
    // Name order: cx7-vf (dpdk) decides the node's stream type, the socket ports conflict with it.
    assert_eq!(config.ports["cx7-vf"], Verdict::Included);
    let mixed = invalid(config.ports.get("udp-rx"));
    assert_eq!(mixed.path, "spec.backend");
    assert!(mixed.message.contains("cx7-vf"), "{mixed}");

    ports.pop();
    let config = render_node(&node("n1", &[]), &ports, &[]).unwrap();
    assert_eq!(config.ports["udp-rx"], Verdict::Included);
    let duplicate = invalid(config.ports.get("udp-rx-2"));
    assert!(duplicate.message.contains("duplicate"), "{duplicate}");
}

#[test]
fn the_plan_places_resources_and_says_why_others_run_nowhere() {
    let mut ports: Vec<DaqiriPort> = load("port-socket.yaml");
    ports.extend(load::<DaqiriPort>("port-sriov-dpdk.yaml"));
    let mut flows: Vec<DaqiriFlow> = load("flows.yaml");
    flows.push(flow("metadata: { name: orphan }\nspec: { port: nope, id: 1, match: { udpSrc: \"1\" }, queue: 0 }"));
    let nodes = [node("a", &[]), node("b", &[])];
    let plan = plan(&nodes, &ports, &flows);
    assert_eq!(plan.configs.iter().map(|c| c.node.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(plan.ports["udp-rx"].nodes, ["a", "b"]);
    assert_eq!(plan.flows["adc-a"].nodes, ["a", "b"]);
    assert_eq!(plan.ports["cx7-vf"].unplaced.as_ref().unwrap().path, "spec.nodeSelector");
    let orphan = plan.flows["orphan"].unplaced.as_ref().unwrap();
    assert!(orphan.message.contains("\"nope\" does not exist"), "{orphan}");
}

#[test]
fn resources_being_deleted_are_left_out() {
    let ports: Vec<DaqiriPort> = load("port-socket.yaml");
    let mut flows: Vec<DaqiriFlow> = load("flows.yaml");
    flows[1].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let config = render_node(&node("n1", &[]), &ports, &flows).unwrap();
    assert!(!config.flows.contains_key("adc-b"));
    assert!(!config.yaml.contains("adc-b"), "{}", config.yaml);
}
