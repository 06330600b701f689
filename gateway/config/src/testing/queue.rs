//! One queue of a [`TestConfig`](super::TestConfig), with DAQIRI's
//! defaults until a method says otherwise.

use crate::model::{CpuCore, PollMode, Queue, QueueCore, TxOffload};

/// An RX queue `id` landing in `region`, indirect, with DAQIRI's defaults
/// until the builder methods say otherwise.
pub fn rx(id: u16, region: &str) -> QueueBuilder {
    QueueBuilder(Queue {
        name: format!("q{id}"),
        id,
        poll_mode: PollMode::Indirect,
        cpu_core: Some(QueueCore::Pinned(CpuCore(0))),
        batch_size: Some(1),
        memory_regions: vec![region.to_owned()],
        timeout_us: None,
        offloads: Vec::new(),
        pacing_mbps: None,
        busy_poll_us: None,
    })
}

/// A TX queue `id` sending from `region`.
pub fn tx(id: u16, region: &str) -> QueueBuilder {
    let mut queue = rx(id, region);
    queue.0.name = format!("t{id}");
    queue
}

/// One queue's settings.
#[derive(Debug, Clone)]
pub struct QueueBuilder(pub(super) Queue);

impl QueueBuilder {
    /// `cpu_core`.
    pub fn core(mut self, core: u32) -> Self {
        self.0.cpu_core = Some(QueueCore::Pinned(CpuCore(core)));
        self
    }

    /// `cpu_core: -1`: an unpinned worker (socket queues).
    pub fn unpinned(mut self) -> Self {
        self.0.cpu_core = Some(QueueCore::Unpinned);
        self
    }

    /// `batch_size`.
    pub fn batch(mut self, packets: u32) -> Self {
        self.0.batch_size = Some(packets);
        self
    }

    /// `timeout_us`.
    pub fn timeout_us(mut self, us: u64) -> Self {
        self.0.timeout_us = Some(us);
        self
    }

    /// A second region: header-data split (headers, then payload).
    pub fn split_into(mut self, payload_region: &str) -> Self {
        self.0.memory_regions.push(payload_region.to_owned());
        self
    }

    /// `poll_mode: direct` (no core, batch or timeout).
    pub fn direct(mut self) -> Self {
        self.0.poll_mode = PollMode::Direct;
        self.0.cpu_core = None;
        self.0.batch_size = None;
        self.0.timeout_us = None;
        self
    }

    /// `busy_poll_us` (AF_XDP RX).
    pub fn busy_poll_us(mut self, us: u32) -> Self {
        self.0.busy_poll_us = Some(us);
        self
    }

    /// TX `pacing_mbps`.
    pub fn pacing_mbps(mut self, mbps: u64) -> Self {
        self.0.pacing_mbps = Some(mbps);
        self
    }

    /// TX `offloads`.
    pub fn offloads(mut self, offloads: &[TxOffload]) -> Self {
        self.0.offloads = offloads.to_vec();
        self
    }

    /// `name`.
    pub fn named(mut self, name: &str) -> Self {
        self.0.name = name.to_owned();
        self
    }
}
