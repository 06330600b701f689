//! The samples and the documented mistakes, each with the message its CEL rule
//! gives: checked by kube's CEL implementation (`crds.rs`) and by a real API
//! server (`cluster.rs`).

use serde_json::{Value, json};

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples");

/// The port samples' files.
pub const PORT_SAMPLES: [&str; 4] =
    ["port-socket.yaml", "port-sriov-dpdk.yaml", "port-af-xdp.yaml", "port-roce-ingest.yaml"];

/// The objects of a sample file.
pub fn samples(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{SAMPLES}/{file}")).unwrap();
    serde_yaml::Deserializer::from_str(&text).map(|doc| serde::Deserialize::deserialize(doc).unwrap()).collect()
}

/// A mistake: what it is, the object, the message it must be refused with.
pub type Mistake = (&'static str, Value, &'static str);

fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut v = base.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match v.pointer_mut(parent).unwrap() {
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
        object => object[key] = value,
    }
    v
}

fn without(base: &Value, key: &str) -> Value {
    let mut v = base.clone();
    v["spec"].as_object_mut().unwrap().remove(key);
    v
}

/// DaqiriPort mistakes, each made on a sample.
pub fn port_mistakes() -> Vec<Mistake> {
    let socket = samples("port-socket.yaml").remove(0);
    let dpdk = samples("port-sriov-dpdk.yaml").remove(0);
    let af_xdp = samples("port-af-xdp.yaml").remove(0);
    let ingest = samples("port-roce-ingest.yaml").remove(0);
    vec![
        ("dpdk without device", without(&dpdk, "device"), "dpdk and af_xdp ports need spec.device"),
        ("af_xdp without device", without(&af_xdp, "device"), "dpdk and af_xdp ports need spec.device"),
        (
            "af_xdp on a PCIe address",
            with(&af_xdp, "/spec/device", json!({"pciAddress": "0000:3b:00.0"})),
            "af_xdp ports open a netdev",
        ),
        (
            "af_xdp with socket endpoints",
            with(&af_xdp, "/spec/socket", json!({"mode": "server", "localAddr": "udp://0.0.0.0:1"})),
            "not dpdk or af_xdp",
        ),
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
    ]
}

/// DaqiriFlow mistakes, each made on the second flow sample.
pub fn flow_mistakes() -> Vec<Mistake> {
    let flow = samples("flows.yaml").remove(1);
    let mut both = flow.clone();
    both["spec"]["queues"] = json!([0, 1]);
    let mut empty_match = flow.clone();
    empty_match["spec"]["match"] = json!({});
    let mut files_only = flow.clone();
    files_only["spec"]["capture"] = json!({"format": "pcap", "rotateFiles": 3});
    let mut s3_files = flow.clone();
    s3_files["spec"]["capture"] =
        json!({"format": "pcap", "rotateBytes": 1000000, "rotateFiles": 3, "destination": "s3://captures/lab"});
    let mut not_s3 = flow.clone();
    not_s3["spec"]["capture"] = json!({"format": "pcap", "destination": "/var/lib/captures"});
    let mut reorder_both = flow.clone();
    reorder_both["spec"]["reorder"] = json!({
        "type": "cpu", "memoryRegion": "rx", "sequenceNumber": {"bitOffset": 0, "bitWidth": 32},
        "packetsPerBatch": 8, "batchNumber": {"bitOffset": 32, "bitWidth": 16}
    });
    let mut empty_ethernet = flow.clone();
    empty_ethernet["spec"]["match"] = json!({"ethernet": {}});
    vec![
        ("ethernet without an address", empty_ethernet, "give src, dst or both"),
        ("queue and queues", both, "give queue (one queue) or queues"),
        ("no target", without(&flow, "queue"), "give queue (one queue) or queues"),
        ("empty match", empty_match, "match at least one of"),
        ("rotation count without size", files_only, "rotateFiles needs rotateBytes"),
        ("files kept in a bucket", s3_files, "rotateFiles applies to files only"),
        ("a destination that is no bucket", not_s3, "destination is s3://<bucket>[/<prefix>]"),
        ("two batch definitions", reorder_both, "packetsPerBatch or batchNumber"),
    ]
}
