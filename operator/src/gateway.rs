//! The operator's side of the gateway's admin API: push a node's config,
//! read back what runs, read flow rates, keep standing captures running.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::crd::CapturePolicy;

/// How to reach the gateway pods' admin API.
#[derive(Debug, Clone)]
pub struct GatewayClient {
    http: reqwest::Client,
    port: u16,
    token: Option<String>,
}

/// What `PUT /api/v1/config` answered.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Applied {
    /// The gateway's config generation now.
    pub generation: u64,
    /// SHA-256 of the YAML it runs.
    pub sha256: String,
    /// `unchanged`, `flows` or `restart`.
    pub change: String,
}

/// Why a gateway did not take a config.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No answer (pod starting, network).
    #[error("gateway at {0} did not answer: {1}")]
    Unreachable(String, String),
    /// It answered with an error status.
    #[error("gateway at {address} answered {status}: {message}")]
    Refused {
        /// The gateway's admin address.
        address: String,
        /// The HTTP status it answered.
        status: u16,
        /// The message of its JSON error body.
        message: String,
    },
}

/// Receive rates of one gateway, packets per second.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    /// By interface name (all RX queues).
    pub interfaces: BTreeMap<String, f64>,
    /// By (interface name, flow id).
    pub flows: BTreeMap<(String, u32), f64>,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    message: String,
}

impl GatewayClient {
    /// `token`: the gateways' bearer token, if any; sent with every call, since
    /// a gateway may protect reads with the same token (`adminTokenProtectsReads`).
    pub fn new(port: u16, token: Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a plain HTTP client always builds");
        Self { http, port, token }
    }

    fn url(&self, ip: &str, path: &str) -> String {
        format!("http://{ip}:{}{path}", self.port)
    }

    fn authorised(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends a node's config; the gateway validates and applies it.
    pub async fn apply(&self, ip: &str, yaml: &str) -> Result<Applied, GatewayError> {
        self.call(ip, self.authorised(self.http.put(self.url(ip, "/api/v1/config"))).body(yaml.to_owned())).await
    }

    /// Packets per second per interface and per flow, from `GET /api/v1/stats`.
    pub async fn rates(&self, ip: &str) -> Result<Rates, GatewayError> {
        let stats: serde_json::Value =
            self.call(ip, self.authorised(self.http.get(self.url(ip, "/api/v1/stats")))).await?;
        let mut rates = Rates::default();
        for iface in stats["interfaces"].as_array().into_iter().flatten() {
            let name = iface["name"].as_str().unwrap_or_default().to_owned();
            let queues = iface["rx_queues"].as_array().into_iter().flatten();
            rates.interfaces.insert(name.clone(), queues.filter_map(|q| q["packets_per_s"].as_f64()).sum());
            for flow in iface["flows"].as_array().into_iter().flatten() {
                if let (Some(id), Some(pps)) = (flow["id"].as_u64(), flow["packets_per_s"].as_f64()) {
                    rates.flows.insert((name.clone(), id as u32), pps);
                }
            }
        }
        Ok(rates)
    }

    /// The engine's state from `GET /api/v1/status`: `running`, `restarting`,
    /// `waiting`, `stopped` or `down`.
    pub async fn engine_state(&self, ip: &str) -> Result<String, GatewayError> {
        let status: serde_json::Value =
            self.call(ip, self.authorised(self.http.get(self.url(ip, "/api/v1/status")))).await?;
        Ok(status["engine"].as_str().unwrap_or("unknown").to_owned())
    }

    /// The running captures of the gateway at `ip`: (id, name).
    pub async fn running_captures(&self, ip: &str) -> Result<Vec<(u64, String)>, GatewayError> {
        let list: Vec<serde_json::Value> =
            self.call(ip, self.authorised(self.http.get(self.url(ip, "/api/v1/captures")))).await?;
        Ok(list
            .iter()
            .filter(|c| c["state"] == "running")
            .filter_map(|c| Some((c["id"].as_u64()?, c["name"].as_str()?.to_owned())))
            .collect())
    }

    /// Stops capture `id` (its files stay).
    pub async fn stop_capture(&self, ip: &str, id: u64) -> Result<(), GatewayError> {
        let request = self.authorised(self.http.delete(self.url(ip, &format!("/api/v1/captures/{id}"))));
        let _stopped: serde_json::Value = self.call(ip, request).await?;
        Ok(())
    }

    /// Starts a capture named `name` of flow `flow_id` on `interface`.
    pub async fn start_capture(
        &self,
        ip: &str,
        interface: &str,
        flow_id: u32,
        name: &str,
        policy: &CapturePolicy,
    ) -> Result<(), GatewayError> {
        let body = json!({
            "format": policy.format, "interface": interface, "flow": flow_id, "name": name,
            "snaplen": policy.snaplen, "rotate_bytes": policy.rotate_bytes, "rotate_files": policy.rotate_files,
            "destination": policy.destination,
        });
        let request = self.authorised(self.http.post(self.url(ip, "/api/v1/captures"))).json(&body);
        let _started: serde_json::Value = self.call(ip, request).await?;
        Ok(())
    }

    /// Sends a request and reads the JSON answer; an error status becomes
    /// [`GatewayError::Refused`] with the gateway's own message.
    async fn call<T: DeserializeOwned>(&self, ip: &str, request: reqwest::RequestBuilder) -> Result<T, GatewayError> {
        let unreachable = |e: reqwest::Error| GatewayError::Unreachable(ip.to_owned(), e.to_string());
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            let message = match response.json::<ErrorBody>().await {
                Ok(body) => body.message,
                Err(e) => format!("unreadable error body: {e}"),
            };
            return Err(GatewayError::Refused { address: ip.to_owned(), status: status.as_u16(), message });
        }
        response.json().await.map_err(unreachable)
    }
}
