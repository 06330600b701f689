//! The CRDs' schemas and CEL rules as the API server enforces them: every
//! sample admitted, every documented mistake refused with its rule's message,
//! and an integer out of its type's range refused by the schema.

use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use super::cases::{PORT_SAMPLES, flow_mistakes, port_mistakes, samples};
use super::harness::{Stage, output};

fn dry_run() -> PostParams {
    PostParams { dry_run: true, ..PostParams::default() }
}

fn object(value: &Value) -> DynamicObject {
    serde_json::from_value(value.clone()).unwrap()
}

async fn refusal(stage: &Stage, value: &Value) -> Option<String> {
    let kind = value["kind"].as_str().unwrap();
    match stage.api(kind).create(&dry_run(), &object(value)).await {
        Ok(_) => None,
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "refused as invalid, not for another reason: {e:?}");
            Some(e.message)
        }
        Err(e) => panic!("the server did not answer: {e}"),
    }
}

pub async fn scenario(stage: Stage) {
    // The server warns of nothing in the CRDs (an unknown integer `format` was
    // warned of on every apply, and bounded nothing).
    let crds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let crds = crds.to_str().unwrap();
    let applied = output(
        &mut stage.kubectl(&["apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", crds]),
        "",
    );
    let said = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success() && !said.contains("Warning"), "{said}");
    for file in PORT_SAMPLES.into_iter().chain(["flows.yaml"]) {
        for sample in samples(file) {
            assert_eq!(refusal(&stage, &sample).await, None, "{file}: {sample}");
        }
    }
    for (case, value, message) in port_mistakes().into_iter().chain(flow_mistakes()) {
        let refused = refusal(&stage, &value).await;
        let refused = refused.unwrap_or_else(|| panic!("{case}: admitted"));
        assert!(refused.contains(message), "{case}: expected \"{message}\" in {refused}");
    }
    // The case issue 34 found: a u32 one past its range, which `format: uint32`
    // never bounded.
    let mut flow = samples("flows.yaml").remove(0);
    flow["spec"]["id"] = json!(4_294_967_296_u64);
    let refused = refusal(&stage, &flow).await.expect("an id past u32 is refused");
    assert!(refused.contains("spec.id"), "{refused}");
}
