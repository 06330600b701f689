//! Status shared by both resources: conditions in the shape of
//! `metav1.Condition`, and what each gateway reports.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Status of a `DaqiriPort` or `DaqiriFlow`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// `Ready`, `Progressing` and `Degraded`, keyed by type.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// One entry per node whose gateway runs this resource.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["node"]))]
    pub gateways: Vec<GatewayStatus>,
    /// Packets per second received, summed over the gateways (flows: matched by this flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_packets_per_second: Option<f64>,
    /// When the rates were read (RFC 3339); refreshed at most once a minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub rates_sampled_at: Option<String>,
}

impl ResourceStatus {
    /// The condition of this type, if set.
    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == kind)
    }
}

/// One condition (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `Progressing` or `Degraded`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// CamelCase reason, e.g. `ConfigApplied`, `ValidationFailed`, `GatewayNotFound`.
    pub reason: String,
    /// Human-readable detail; for `ValidationFailed`, the validator's message with its YAML path.
    pub message: String,
    /// When `status` last changed (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `True`, `False` or `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known yet.
    Unknown,
}

/// What one node's gateway reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// Node name.
    pub node: String,
    /// The gateway's config generation after the operator's update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_generation: Option<u64>,
    /// SHA-256 of the config the gateway runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// Whether the gateway runs the config the operator rendered.
    pub applied: bool,
    /// Packets per second on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_packets_per_second: Option<f64>,
}

impl Condition {
    /// Whether the condition holds.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// The most a condition's message carries. A gateway's refusal can hold a
/// whole BPF verifier log (tens of KiB, once per node in a port's message),
/// which `kubectl describe` would scroll past and every status write and
/// watch event would carry.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// `message` within [`MAX_MESSAGE_BYTES`]: its beginning (what failed, and
/// where) and its end (a verifier's or validator's last word), the middle
/// elided with its size said.
pub fn bounded_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    // Cut points moved onto character boundaries: the head's back, the tail's forward.
    let mut head = MAX_MESSAGE_BYTES * 2 / 3;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - MAX_MESSAGE_BYTES / 4;
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} [... {} bytes elided ...] {}", &message[..head], tail - head, &message[tail..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_keep_their_beginning_and_end_within_the_bound() {
        let short = "gateway at 10.0.0.1 answered 422".to_owned();
        assert_eq!(bounded_message(short.clone()), short);
        let log =
            format!("the kernel refused the XDP program: {}R3 pointer arithmetic prohibited", "é; ".repeat(20_000));
        let bounded = bounded_message(log.clone());
        assert!(bounded.len() <= MAX_MESSAGE_BYTES + 64, "{}", bounded.len());
        assert!(bounded.starts_with("the kernel refused the XDP program: "));
        assert!(bounded.ends_with("R3 pointer arithmetic prohibited"));
        let elided: usize = bounded.split("[... ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        let marker = format!(" [... {elided} bytes elided ...] ");
        assert_eq!(bounded.len() - marker.len() + elided, log.len(), "the count is what went");
    }
}
