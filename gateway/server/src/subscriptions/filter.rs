//! What a subscription takes of an interface's bursts.

use daqiri::{Burst, Packet};

/// A subscription's source, resolved against the engine's config.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Filter {
    /// Every burst of RX queue `queue` of `port`.
    Queue { port: u16, queue: u16 },
    /// The packets of flow `flow` of `port`, from whichever of its queues
    /// (a flow reload may move the flow to another).
    Flow { port: u16, flow: u32 },
    /// The aggregates of reorder plan `plan` (its position in the
    /// interface's `rx.reorder_configs`) of `port`.
    Plan { port: u16, plan: u16 },
}

impl Filter {
    /// (port, `queue`/`flow`/`plan`, which), for the status.
    pub(crate) fn describe(&self) -> (u16, &'static str, u32) {
        match *self {
            Filter::Queue { port, queue } => (port, "queue", u32::from(queue)),
            Filter::Flow { port, flow } => (port, "flow", flow),
            Filter::Plan { port, plan } => (port, "plan", u32::from(plan)),
        }
    }

    /// Whether `burst` may hold something this filter takes.
    pub(crate) fn takes(&self, burst: &Burst) -> bool {
        match *self {
            Filter::Queue { port, queue } => burst.port_id() == port && burst.queue_id() == queue,
            Filter::Flow { port, .. } => burst.port_id() == port && burst.reorder_plan().is_none(),
            Filter::Plan { port, plan } => burst.port_id() == port && burst.reorder_plan() == Some(plan),
        }
    }

    /// Whether `packet` (of a burst it [`takes`](Self::takes)) is one it takes.
    pub(crate) fn takes_packet(&self, packet: &Packet<'_>) -> bool {
        match *self {
            Filter::Flow { flow, .. } => packet.flow_id() == Some(flow),
            Filter::Queue { .. } | Filter::Plan { .. } => true,
        }
    }
}
