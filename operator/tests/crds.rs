//! The committed CRDs match the types, and their CEL rules accept the samples
//! and refuse each documented mistake (evaluated by kube's CEL implementation).

use daqiri_operator::crd::{DaqiriFlow, DaqiriPort};
use serde_json::{Value, json};

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples");

#[test]
fn committed_crds_match_the_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    for (file, generated) in daqiri_operator::crdgen::manifests() {
        let committed = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
        assert!(
            committed == generated,
            "crds/{file} differs from the types; run `cargo run -p daqiri-operator -- crdgen --out crds`"
        );
    }
}

/// Every integer schema under `value`, with its path.
fn integers<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v Value)>) {
    match value {
        Value::Object(map) => {
            if map.get("type") == Some(&json!("integer")) {
                out.push((path.clone(), value));
            }
            for (key, child) in map {
                integers(child, format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                integers(child, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The API server knows int32 and int64 only: an unsigned format bounds
/// nothing there, so each narrower than int64 carries its range instead.
#[test]
fn every_integer_has_a_format_the_server_knows_and_its_range() {
    for crd in daqiri_operator::crd::all() {
        let value = serde_json::to_value(&crd).unwrap();
        let schema = &value["spec"]["versions"][0]["schema"];
        let mut found = Vec::new();
        integers(schema, crd.metadata.name.clone().unwrap_or_default(), &mut found);
        assert!(!found.is_empty());
        for (path, schema) in found {
            let format = schema["format"].as_str();
            assert!(matches!(format, Some("int32" | "int64")), "{path}: format {format:?}");
            if format == Some("int32") {
                assert!(schema.get("maximum").is_some(), "{path} is narrower than int32: {schema}");
            }
        }
    }
    // A flow id beyond u32 is outside the schema, as the server checks it.
    let flow = daqiri_operator::crd::all().into_iter().find(|c| c.spec.names.kind == "DaqiriFlow").unwrap();
    let spec =
        &serde_json::to_value(&flow).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["id"]["maximum"], json!(4294967295.0), "{}", spec["properties"]["id"]);
}

fn samples(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{SAMPLES}/{file}")).unwrap();
    serde_yaml::Deserializer::from_str(&text).map(|doc| serde::Deserialize::deserialize(doc).unwrap()).collect()
}

/// One line per CEL rule that failed.
fn messages(result: Result<(), impl std::fmt::Display>) -> Vec<String> {
    result.map_or_else(|e| e.to_string().lines().map(str::to_owned).collect(), |()| Vec::new())
}

fn port_errors(value: &Value) -> Vec<String> {
    messages(serde_json::from_value::<DaqiriPort>(value.clone()).unwrap().validate_cel())
}

fn flow_errors(value: &Value) -> Vec<String> {
    messages(serde_json::from_value::<DaqiriFlow>(value.clone()).unwrap().validate_cel())
}

#[test]
fn the_samples_pass_every_rule() {
    for file in ["port-socket.yaml", "port-sriov-dpdk.yaml", "port-roce-ingest.yaml"] {
        for port in samples(file) {
            assert_eq!(port_errors(&port), Vec::<String>::new(), "{file}");
        }
    }
    for flow in samples("flows.yaml") {
        assert_eq!(flow_errors(&flow), Vec::<String>::new());
    }
}

#[test]
fn port_rules_refuse_each_mistake_with_its_message() {
    let socket = samples("port-socket.yaml").remove(0);
    let dpdk = samples("port-sriov-dpdk.yaml").remove(0);
    let ingest = samples("port-roce-ingest.yaml").remove(0);
    let with = |base: &Value, pointer: &str, value: Value| {
        let mut v = base.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        match v.pointer_mut(parent).unwrap() {
            Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
            object => object[key] = value,
        }
        v
    };
    let without = |base: &Value, key: &str| {
        let mut v = base.clone();
        v["spec"].as_object_mut().unwrap().remove(key);
        v
    };
    for (case, port, message) in [
        ("dpdk without device", without(&dpdk, "device"), "dpdk ports need spec.device"),
        ("socket without endpoints", without(&socket, "socket"), "socket and rdma ports need spec.socket"),
        (
            "two device fields",
            with(&dpdk, "/spec/device", json!({"pciAddress": "0000:3b:00.0", "netdev": "ens1"})),
            "exactly one of pciAddress, netdev, resourceName",
        ),
        (
            "index without resource",
            with(&dpdk, "/spec/device", json!({"pciAddress": "0000:3b:00.0", "resourceIndex": 1})),
            "resourceIndex applies to resourceName",
        ),
        ("duplicate queue id", with(&socket, "/spec/rxQueues/1/id", json!(0)), "rxQueues ids must be unique"),
        (
            "queue names a missing region",
            with(&socket, "/spec/rxQueues/0/memoryRegions", json!(["nope"])),
            "must name one of spec.memoryRegions",
        ),
        (
            "client without remote",
            with(&socket, "/spec/socket", json!({"mode": "client", "localAddr": "udp://0.0.0.0:1"})),
            "client mode needs remoteAddr",
        ),
        ("roce settings on dpdk", with(&dpdk, "/spec/roce", json!({"transportMode": "RC"})), "rdma ports only"),
        (
            "access on a socket port",
            with(&socket, "/spec/memoryRegions/0/access", json!(["rdma_write"])),
            "memoryRegions[].access is a region's registration with an RDMA device",
        ),
        (
            "ingest with a TX queue",
            with(&ingest, "/spec/txQueues", json!([{"name": "t", "id": 0, "memoryRegions": ["ring"]}])),
            "an ingest port (roce.ingest) is a server with one rxQueue",
        ),
        (
            "ingest as a client",
            with(
                &ingest,
                "/spec/socket",
                json!({"mode": "client", "localAddr": "roce://192.168.50.2", "remoteAddr": "roce://192.168.50.10:4791"}),
            ),
            "an ingest port (roce.ingest) is a server with one rxQueue",
        ),
        (
            "a ring closed to the sender's writes",
            with(&ingest, "/spec/memoryRegions/0/access", json!(["local"])),
            "needs rdma_write in its access list",
        ),
        (
            "an mtu no RoCE path has",
            with(&ingest, "/spec/roce/ingest/mtu", json!(1500)),
            "mtu is 256, 512, 1024, 2048 or 4096",
        ),
    ] {
        let errors = port_errors(&port);
        assert!(errors.iter().any(|e| e.contains(message)), "{case}: expected \"{message}\" in {errors:?}");
    }
}

#[test]
fn flow_rules_refuse_each_mistake_with_its_message() {
    let flow = samples("flows.yaml").remove(1);
    let mut both = flow.clone();
    both["spec"]["queues"] = json!([0, 1]);
    let mut neither = flow.clone();
    neither["spec"].as_object_mut().unwrap().remove("queue");
    let mut empty_match = flow.clone();
    empty_match["spec"]["match"] = json!({});
    let mut files_only = flow.clone();
    files_only["spec"]["capture"] = json!({"format": "pcap", "rotateFiles": 3});
    let mut reorder_both = flow.clone();
    reorder_both["spec"]["reorder"] = json!({
        "type": "cpu", "memoryRegion": "rx", "sequenceNumber": {"bitOffset": 0, "bitWidth": 32},
        "packetsPerBatch": 8, "batchNumber": {"bitOffset": 32, "bitWidth": 16}
    });
    let mut empty_ethernet = flow.clone();
    empty_ethernet["spec"]["match"] = json!({"ethernet": {}});
    for (case, flow, message) in [
        ("ethernet without an address", empty_ethernet, "give src, dst or both"),
        ("queue and queues", both, "give queue (one queue) or queues"),
        ("no target", neither, "give queue (one queue) or queues"),
        ("empty match", empty_match, "match at least one of"),
        ("rotation count without size", files_only, "rotateFiles needs rotateBytes"),
        ("two batch definitions", reorder_both, "packetsPerBatch or batchNumber"),
    ] {
        let errors = flow_errors(&flow);
        assert!(errors.iter().any(|e| e.contains(message)), "{case}: expected \"{message}\" in {errors:?}");
    }
}
