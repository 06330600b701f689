//! The committed CRDs match the types, and their CEL rules accept the samples
//! and refuse each documented mistake (evaluated by kube's CEL implementation).

use daqiri_operator::crd::{DaqiriFlow, DaqiriPort};
use serde_json::{Value, json};

#[path = "support/cases.rs"]
mod cases;

use cases::{PORT_SAMPLES, flow_mistakes, port_mistakes, samples};

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
    for file in PORT_SAMPLES {
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
    for (case, port, message) in port_mistakes() {
        let errors = port_errors(&port);
        assert!(errors.iter().any(|e| e.contains(message)), "{case}: expected \"{message}\" in {errors:?}");
    }
}

#[test]
fn flow_rules_refuse_each_mistake_with_its_message() {
    for (case, flow, message) in flow_mistakes() {
        let errors = flow_errors(&flow);
        assert!(errors.iter().any(|e| e.contains(message)), "{case}: expected \"{message}\" in {errors:?}");
    }
}
