//! A port: one configured interface with its queues, flow table, counters
//! and the regions its queues use. It is all a backend sees of the engine:
//! its drivers and tasks are handed the port, never the engine's state.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};

use daqiri_config::{InterfaceBackend, ValidConfig};

use crate::burst::{EngineId, PacketFields};
use crate::direction::Direction;
use crate::error::Result;
use crate::flow::FlowTable;
use crate::memory::RegionTable;
use crate::queue::Queue;
use crate::reorder::Plan;
use crate::stats::QueueStats;

/// A port's receive side, polled on the application's thread by
/// `get_rx_burst` (`poll_mode: direct`) instead of by a worker.
pub(crate) trait DirectPoll: Send + std::fmt::Debug {
    /// Receives what is ready on `port`, without blocking, and delivers it
    /// to its queues as bursts; returns the packets received. Once
    /// `stopping`, it only gives back what it holds.
    fn poll(&mut self, port: &Port, stopping: bool) -> usize;
}

#[derive(Debug)]
pub(crate) struct Port {
    pub(crate) id: u16,
    pub(crate) name: String,
    pub(crate) address: String,
    pub(crate) backend: InterfaceBackend,
    pub(crate) rx: Vec<Queue>,
    pub(crate) tx: Vec<Queue>,
    /// Reorder plans, in `reorder_configs` order.
    pub(crate) plans: Vec<Arc<Plan>>,
    /// The engine's memory regions, which the queues' segments index.
    pub(crate) regions: Arc<RegionTable>,
    /// Swapped whole by a flow reload; workers load it per packet (one atomic read).
    pub(crate) flows: arc_swap::ArcSwap<FlowTable>,
    /// Set by `drop_all_traffic`.
    pub(crate) drop_all: AtomicBool,
    /// RX drops that happen before a queue is chosen (unmatched, truncated, ...).
    pub(crate) rx_drops: QueueStats,
    /// Round-robin cursor for `get_rx_burst` on any queue of the port.
    pub(crate) next_queue: AtomicUsize,
    /// `socket_config.max_payload_size`.
    pub(crate) max_payload: Option<usize>,
    /// The address a socket backend bound, once open.
    pub(crate) local_addr: OnceLock<SocketAddr>,
    /// `rx.hardware_timestamps`: bursts carry each packet's NIC timestamp.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) rx_timestamps: bool,
    /// A UDP server that has heard no peer: its TX has no destination yet.
    pub(crate) awaiting_peer: AtomicBool,
    /// `poll_mode: direct`: the receive side that `get_rx_burst` polls.
    direct: OnceLock<Mutex<Box<dyn DirectPoll>>>,
}

impl Port {
    pub(crate) fn new(
        config: &ValidConfig,
        index: usize,
        regions: &Arc<RegionTable>,
        engine: EngineId,
    ) -> Result<Self> {
        let iface = &config.config().interfaces[index];
        let id = index as u16;
        let rx_meta = config.config().rx_meta_buffers();
        let tx_meta = config.config().tx_meta_buffers();
        let roce = config.backend(index) == InterfaceBackend::Roce;
        let fields = PacketFields {
            // Only sockets know who sent a packet; raw frames carry it in their headers.
            senders: config.backend(index) == InterfaceBackend::Socket,
            rx_timestamps: iface.rx.as_ref().is_some_and(|rx| rx.hardware_timestamps),
            immediates: roce,
            remote: roce,
            rdma_reads: false,
        };
        let plans: Vec<Arc<Plan>> = iface
            .rx
            .iter()
            .flat_map(|rx| rx.reorder_configs.iter().enumerate().map(move |(i, plan)| (rx, i, plan)))
            .map(|(rx, i, plan)| {
                // Validated: a plan's flows exist and steer to one queue.
                let flow =
                    rx.flows.iter().find(|f| plan.flow_ids.contains(&f.id)).expect("validated: plan flows exist");
                let queue_id = flow.queue_ids()[0];
                let queue = rx.queues.iter().find(|q| q.id == queue_id).expect("validated: flows steer to queues");
                let source = regions.index_of(&queue.memory_regions[0]).expect("validated: queue regions exist");
                Plan::new(plan, i as u16, (id, queue_id, source), regions, engine).map(Arc::new)
            })
            .collect::<Result<_>>()?;
        let rx = iface
            .rx_queues()
            .iter()
            .map(|q| Queue::new(q, id, rx_meta, regions, engine, fields))
            .collect::<Result<_>>()?;
        let tx = iface
            .tx_queues()
            .iter()
            .enumerate()
            .map(|(j, q)| {
                // A READ's bytes are delivered on the RX queue of the TX queue's position.
                let rx_region = iface.rx_queues().get(j).and_then(|rx| rx.memory_regions.first());
                let rdma_reads = roce && rx_region.is_some() && q.memory_regions.first() == rx_region;
                let fields = PacketFields { immediates: roce, remote: roce, rdma_reads, ..PacketFields::default() };
                Queue::new(q, id, tx_meta, regions, engine, fields)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            id,
            name: iface.name.clone(),
            address: iface.address.clone(),
            backend: config.backend(index),
            rx,
            tx,
            plans,
            regions: Arc::clone(regions),
            flows: arc_swap::ArcSwap::from_pointee(iface.rx.as_ref().map(FlowTable::new).unwrap_or_default()),
            drop_all: AtomicBool::new(false),
            rx_drops: QueueStats::default(),
            next_queue: AtomicUsize::new(0),
            max_payload: iface.socket_config.as_ref().and_then(|s| s.max_payload_size).map(|n| n as usize),
            local_addr: OnceLock::new(),
            awaiting_peer: AtomicBool::new(false),
            rx_timestamps: fields.rx_timestamps,
            direct: OnceLock::new(),
        })
    }

    /// Largest read or datagram the config allows, if it sets one.
    pub(crate) fn config_max_payload(&self) -> Option<usize> {
        self.max_payload
    }

    /// Hands the port's receive side to the application's polls.
    pub(crate) fn set_direct(&self, poller: Box<dyn DirectPoll>) {
        if self.direct.set(Mutex::new(poller)).is_err() {
            unreachable!("a port's backend starts once");
        }
    }

    /// In direct mode, receives what is ready into the queues' rings. A
    /// caller that finds another thread polling returns at once: that
    /// thread's bursts land in the same rings.
    pub(crate) fn poll_direct(&self, stopping: bool) {
        if let Some(poller) = self.direct.get()
            && let Ok(mut poller) = poller.try_lock()
        {
            poller.poll(self, stopping);
        }
    }

    /// The reorder plans whose flows steer to RX queue `queue_id`.
    pub(crate) fn plans_of(&self, queue_id: u16) -> Vec<Arc<Plan>> {
        self.plans.iter().filter(|plan| plan.queue_id == queue_id).cloned().collect()
    }

    pub(crate) fn queues(&self, direction: Direction) -> &[Queue] {
        match direction {
            Direction::Rx => &self.rx,
            Direction::Tx => &self.tx,
        }
    }

    pub(crate) fn queue(&self, direction: Direction, id: u16) -> Option<&Queue> {
        self.queues(direction).iter().find(|q| q.id == id)
    }
}
