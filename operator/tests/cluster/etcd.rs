//! The store of the control plane `tests/k8s/control-plane.sh` starts,
//! through etcd's JSON gateway: for tests that write as an older API server
//! would have, or compact the store under the API server.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::harness::Stage;

pub struct Etcd {
    http: reqwest::Client,
    url: String,
}

impl Etcd {
    /// The etcd of the stage's cluster, named beside the kubeconfig the script wrote.
    pub fn of(stage: &Stage) -> Self {
        let file = stage.admin.with_file_name("etcd.url");
        let url = std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!("{}: {e}; this test writes into the store of tests/k8s/control-plane.sh's cluster", file.display())
        });
        Self { http: reqwest::Client::new(), url: url.trim().to_owned() }
    }

    async fn call(&self, method: &str, body: Value) -> Value {
        let answer = self.http.post(format!("{}/v3/{method}", self.url)).json(&body).send().await.unwrap();
        assert!(answer.status().is_success(), "etcd {method}: {}", answer.status());
        answer.json().await.unwrap()
    }

    /// Changes the spec of the object stored at `key` as an API server
    /// writes a spec change: with the next generation.
    pub async fn change_spec(&self, key: &str, change: impl FnOnce(&mut Value)) {
        let range = self.call("kv/range", json!({"key": STANDARD.encode(key)})).await;
        let stored = STANDARD.decode(range["kvs"][0]["value"].as_str().expect("the object is stored")).unwrap();
        let mut object: Value = serde_json::from_slice(&stored).unwrap();
        change(&mut object["spec"]);
        object["metadata"]["generation"] = json!(object["metadata"]["generation"].as_i64().unwrap() + 1);
        let value = STANDARD.encode(serde_json::to_vec(&object).unwrap());
        self.call("kv/put", json!({"key": STANDARD.encode(key), "value": value})).await;
    }

    /// Compacts the store at its current revision.
    pub async fn compact(&self) {
        // Any read answers with the store's revision in its header.
        let range = self.call("kv/range", json!({"key": "AA=="})).await;
        let revision = range["header"]["revision"].as_str().unwrap().to_owned();
        self.call("kv/compaction", json!({"revision": revision})).await;
    }
}
