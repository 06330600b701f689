//! The messages a consumer and the gateway exchange over the consumer
//! socket (a Unix `SOCK_SEQPACKET` socket: one message per packet, JSON).
//!
//! The consumer says [`Hello`]; the gateway answers [`Answer::Welcome`]
//! with the descriptors the welcome lists (the ring, its doorbell, then
//! each region's memory: host pages that map only for reading, or GPU
//! memory the consumer imports through CUDA and maps read-only), or
//! [`Answer::Refused`] and closes.
//! After that the socket only says [`Answer::Ended`] when the gateway ends
//! the subscription; either side closing it ends it too.

use serde::{Deserialize, Serialize};

/// This protocol's version; a hello of another is refused.
pub const VERSION: u32 = 1;

/// The largest message either side sends.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The most bursts a subscription's ring holds.
pub const MAX_SLOTS: u32 = 4096;

/// What the consumer asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// [`VERSION`].
    pub version: u32,
    /// What to receive.
    pub target: Target,
    /// Bursts the ring holds at once (1 to [`MAX_SLOTS`]): how far the
    /// consumer may fall behind before [`WhenFull`] applies. The gateway
    /// grants fewer where the bursts could hold over half a region's
    /// buffers (the welcome's ring says how many).
    pub slots: u32,
    /// A group to join: each burst goes to one member of the group (of
    /// consumers with the same target and group name), for a pool of
    /// workers. Without one, each consumer gets every burst (fan-out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What happens to a burst while the consumer's ring is full.
    #[serde(default)]
    pub when_full: WhenFull,
    /// The gateway's consumer token, where it asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Whether the consumer can import GPU memory (a client built with
    /// CUDA): a target whose packets lie in a `device` region is refused
    /// to one that cannot.
    #[serde(default)]
    pub gpu_memory: bool,
}

/// What the gateway does with a burst for a consumer whose ring is full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Drops it for this consumer alone, counted as its lag: receive never
    /// waits for a consumer.
    #[default]
    Drop,
    /// Waits for the consumer, as a slow application in the gateway's own
    /// process would make it wait: the queue's ring fills, and the queue
    /// drops what does not fit, counted as the queue's drops.
    HoldBack,
}

/// A subscription's source: one of an interface's RX queues, one of its
/// flows (its packets, from whichever queue), or one of its reorder plans
/// (the plan's aggregates). A hello naming two sources, or none, is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TargetFields")]
pub struct Target {
    /// The interface's name in the gateway's config.
    pub interface: String,
    /// Which of its queues, flows or plans.
    #[serde(flatten)]
    pub source: Source,
}

/// A target as written: each source a field of its own, so that two can
/// be told apart from one (a flattened enum would take the first).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFields {
    interface: String,
    queue: Option<u16>,
    flow: Option<u32>,
    plan: Option<String>,
}

impl TryFrom<TargetFields> for Target {
    type Error = String;

    fn try_from(t: TargetFields) -> Result<Self, String> {
        let source = match (t.queue, t.flow, t.plan) {
            (Some(queue), None, None) => Source::Queue(queue),
            (None, Some(flow), None) => Source::Flow(flow),
            (None, None, Some(plan)) => Source::Plan(plan),
            (None, None, None) => return Err("the target names no source: one of queue, flow or plan".into()),
            _ => return Err("the target names more than one source: one of queue, flow or plan".into()),
        };
        Ok(Self { interface: t.interface, source })
    }
}

/// Which part of the interface a subscription receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// An RX queue, by id: every burst it delivers.
    Queue(u16),
    /// A flow, by id: its packets, in bursts of them alone.
    Flow(u32),
    /// A reorder plan, by name: its aggregates.
    Plan(String),
}

impl Target {
    /// RX queue `queue` of `interface`.
    pub fn queue(interface: &str, queue: u16) -> Self {
        Self { interface: interface.to_owned(), source: Source::Queue(queue) }
    }

    /// Flow `flow` of `interface`.
    pub fn flow(interface: &str, flow: u32) -> Self {
        Self { interface: interface.to_owned(), source: Source::Flow(flow) }
    }

    /// Reorder plan `plan` of `interface`.
    pub fn plan(interface: &str, plan: &str) -> Self {
        Self { interface: interface.to_owned(), source: Source::Plan(plan.to_owned()) }
    }
}

/// The gateway's answer to a hello, and what it says later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// Subscribed: descriptors follow the message, in the order
    /// [`Welcome::descriptors`] gives.
    Welcome(Welcome),
    /// Not subscribed, and why; the gateway closes the socket.
    Refused {
        /// Why, for a person to read.
        reason: String,
    },
    /// The subscription ended, and why (the engine restarted, the gateway
    /// stops); the gateway closes the socket.
    Ended {
        /// Why, for a person to read.
        reason: String,
    },
}

/// A subscription's shared memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Welcome {
    /// The subscription's id, as the gateway's status lists it.
    pub subscription: u64,
    /// The descriptor ring (see [`crate::ring`]).
    pub ring: RingShape,
    /// The regions the bursts' packets lie in, each mapped from its own
    /// descriptor.
    pub regions: Vec<RegionShape>,
}

impl Welcome {
    /// Descriptors that come with the welcome: the ring, its doorbell (an
    /// eventfd the gateway signals per burst), then one per region.
    pub fn descriptors(&self) -> usize {
        2 + self.regions.len()
    }
}

/// The size of a subscription's ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingShape {
    /// Bursts it holds.
    pub slots: u32,
    /// Segment descriptors per burst.
    pub descriptors_per_slot: u32,
    /// u64 words per burst telling a reorder aggregate's empty slots.
    pub missing_words: u32,
    /// Bytes to map.
    pub len: u64,
}

/// One region, as the consumer maps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionShape {
    /// The index descriptors name it by.
    pub index: u16,
    /// Its name in the gateway's config.
    pub name: String,
    /// Bytes to map.
    pub len: u64,
    /// The GPU whose memory it is, by UUID (`GPU-...`, as `nvidia-smi -L`
    /// writes it): the descriptor is then a CUDA shareable handle (a POSIX
    /// file descriptor) to import on that GPU. Absent for host memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(json: &str) -> Result<Target, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn a_target_names_exactly_one_source() {
        assert_eq!(target(r#"{"interface":"i","queue":2}"#).unwrap(), Target::queue("i", 2));
        assert_eq!(target(r#"{"interface":"i","plan":"p"}"#).unwrap(), Target::plan("i", "p"));
        let two = target(r#"{"interface":"i","queue":0,"plan":"p"}"#).unwrap_err();
        assert!(two.contains("more than one source"), "{two}");
        assert!(target(r#"{"interface":"i"}"#).unwrap_err().contains("no source"));
        assert!(target(r#"{"interface":"i","queue":0,"queues":1}"#).is_err(), "an unknown key");
        // What a client sends is what the gateway reads.
        let sent = serde_json::to_string(&Target::flow("i", 9)).unwrap();
        assert_eq!(target(&sent).unwrap(), Target::flow("i", 9));
    }
}
