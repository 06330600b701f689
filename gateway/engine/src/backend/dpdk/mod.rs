//! The DPDK backend (`stream_type: raw` on the `dpdk` engine): a DPDK port
//! per interface, NIC or virtual device, whose RX queues land packets in
//! mbufs that are our own region buffers (see [`rte::Mempool`]), so a burst
//! holds them zero-copy like every other backend's.
//!
//! EAL is started once per process, by the first engine that needs it.

mod egress_rules;
mod flow_rules;
mod rte;
mod sender;
mod steering;

use std::sync::Arc;
use std::time::{Duration, Instant};

use daqiri_config::model::{Flow, MemoryKind};
use daqiri_config::{Link, ValidConfig};

use super::PortDriver;
use crate::burst::PacketSlot;
use crate::error::{Error, Result, Status};
use crate::flow::{FlowTable, Steering};
use crate::memory::{BufToken, Region, RegionTable};
use crate::pacing::Pacer;
use crate::port::Port;
use crate::preflight::DPDK_RX_DESCRIPTORS as RX_DESCRIPTORS;
use crate::snapshot::LinkStats;
use crate::state::EngineState;
use crate::stats::DropReason;
use crate::worker::{self, Assembler, QueueTask, Task};

pub(crate) use rte::Mempool;
use rte::{Eal, EalArgs, EthPort, InstalledFlow, PortCounters, RxMbufs, TimestampField, TimestampSource, Traffic};
use steering::PortSteering;

/// Most mbufs one `rte_eth_rx_burst` returns (DPDK's usual burst).
const RX_BURST: usize = 64;
/// How often the receiver turns the NIC's drop counters into drops.
const COUNTER_PERIOD: Duration = Duration::from_millis(100);

/// Starts EAL if the config has DPDK interfaces, creates their devices,
/// and hands every region a DPDK RX queue lands in to a mempool over its
/// buffers. Runs before the regions are shared with the engine.
pub(crate) fn adopt_regions(config: &ValidConfig, regions: &mut [Region]) -> Result<()> {
    let addresses: Vec<&str> = (0..config.config().interfaces.len())
        .filter_map(|i| match config.link(i) {
            Link::Dpdk { address } => Some(address.as_str()),
            _ => None,
        })
        .collect();
    if addresses.is_empty() {
        return Ok(());
    }
    let cfg = config.config();
    let pci = addresses.iter().filter(|a| !a.starts_with("net_")).map(|a| a.to_string()).collect();
    let wanted = EalArgs {
        main_core: cfg.master_core.map_or(0, |c| c.0),
        pci,
        hugepages: cfg.memory_regions.iter().any(|r| r.kind == MemoryKind::Huge),
    };
    let eal = Eal::get(wanted.clone())?;
    let running = eal.args();
    if (running.main_core, running.hugepages) != (wanted.main_core, wanted.hugepages) {
        tracing::warn!(
            "DPDK's EAL runs as the first config started it (master_core {}, hugepages {}); it cannot restart in this process, so master_core {} and hugepages {} take effect after a gateway restart",
            running.main_core,
            running.hugepages,
            wanted.main_core,
            wanted.hugepages
        );
    }
    for address in &addresses {
        eal.probe(address)?;
    }
    for (i, interface) in cfg.interfaces.iter().enumerate() {
        if !matches!(config.link(i), Link::Dpdk { .. }) {
            continue;
        }
        // An RX queue's mbufs come from its (one) region; a TX packet's
        // segments are mbufs of each of its queue's regions.
        let rx = interface.rx_queues().iter().filter_map(|q| q.memory_regions.first());
        let tx = interface.tx.iter().flat_map(|tx| &tx.queues).flat_map(|q| &q.memory_regions);
        for name in rx.chain(tx) {
            let region = regions.iter_mut().find(|r| r.name() == name).expect("validated region name");
            if region.mempool().is_some() {
                continue;
            }
            let base = region.backing().host_base().ok_or_else(|| {
                Error::new(
                    Status::NotSupported,
                    format!("region \"{name}\" is not host memory, which DPDK mbufs need here"),
                )
            })?;
            let pool = Mempool::over(name, base, region.buf_size(), region.num_bufs())?;
            region.set_mempool(Arc::new(pool))?;
        }
    }
    Ok(())
}

/// A started DPDK port.
#[derive(Debug)]
pub(super) struct DpdkDriver {
    port: Arc<EthPort>,
    /// Each RX queue's pool.
    pools: Vec<Arc<Mempool>>,
    /// Each TX queue's pools, one per segment.
    tx_pools: Vec<Vec<Arc<Mempool>>>,
    steering: PortSteering,
    /// Where the PMD writes receive timestamps (`rx.hardware_timestamps`).
    timestamps: Option<TimestampField>,
    /// The TX flows' egress rules; they go with the port when it closes.
    _egress: Vec<InstalledFlow>,
}

/// Programs the interface's TX flows as egress rules. No software path
/// can rewrite headers on the way out, so a PMD that cannot program one
/// fails the start with its reason.
fn install_tx_flows(eth: &EthPort, flows: &[Flow]) -> Result<Vec<InstalledFlow>> {
    egress_rules::rules(flows)
        .iter()
        .zip(flows)
        .map(|(rule, flow)| {
            eth.create_flow(rule, Traffic::Egress).map_err(|why| {
                Error::new(
                    Status::NotSupported,
                    format!(
                        "tx.flows \"{}\" of \"{}\": the {} PMD cannot program it: {why}",
                        flow.name,
                        eth.address(),
                        eth.driver_name()
                    ),
                )
            })
        })
        .collect()
}

fn mempool_of(regions: &RegionTable, region: u16) -> Result<Arc<Mempool>> {
    let region = regions.get(region);
    region
        .mempool()
        .cloned()
        .ok_or_else(|| Error::new(Status::InternalError, format!("region \"{}\" has no DPDK mempool", region.name())))
}

pub(super) fn open(
    address: &str,
    port: &Port,
    regions: &RegionTable,
    tx_flows: &[Flow],
) -> Result<Box<dyn PortDriver>> {
    // One region per RX queue: `support` refused buffer split by path.
    let pools: Vec<Arc<Mempool>> =
        port.rx.iter().map(|q| mempool_of(regions, q.segment_regions[0])).collect::<Result<_>>()?;
    let tx_pools: Vec<Vec<Arc<Mempool>>> = port
        .tx
        .iter()
        .map(|q| q.segment_regions.iter().map(|&r| mempool_of(regions, r)).collect::<Result<_>>())
        .collect::<Result<_>>()?;
    let raw: Vec<&Mempool> = pools.iter().map(|p| p.as_ref()).collect();
    let eth = EthPort::find(address)?;
    let table: Arc<FlowTable> = port.flows.load_full();
    let steering = PortSteering::prepare(&eth, &table, pools.len());
    let stamping = port.rx_timestamps.then(|| TimestampSource::of(&eth)).transpose()?;
    eth.start(&raw, tx_pools.len() as u16, RX_DESCRIPTORS, stamping.map_or(0, TimestampSource::rx_offloads))?;
    let timestamps = match stamping {
        None => None,
        Some(_) => Some(TimestampField::lookup().ok_or_else(|| {
            Error::new(
                Status::GenericFailure,
                format!("rx.hardware_timestamps: the {} PMD registered no mbuf timestamp field", eth.driver_name()),
            )
        })?),
    };
    steering.apply(&eth, port, table)?;
    let egress = install_tx_flows(&eth, tx_flows)?;
    tracing::info!(interface = %port.name, address, dpdk_port = eth.id(), pmd = %eth.driver_name(), "DPDK port started");
    Ok(Box::new(DpdkDriver { port: Arc::new(eth), pools, tx_pools, steering, timestamps, _egress: egress }))
}

impl DpdkDriver {
    /// `pacing_mbps` of TX queue `queue`: the NIC's rate limit where the PMD
    /// has one, else a pacer in the sender.
    fn software_pacer(&self, port: &Port, queue: usize, q: &crate::queue::Queue) -> Option<Pacer> {
        let mbps = q.pacing_mbps?;
        let refused = match u32::try_from(mbps) {
            Ok(limit) => match self.port.set_queue_rate_limit(queue as u16, limit) {
                Ok(()) => {
                    tracing::info!(interface = %port.name, queue = %q.name, mbps, "TX paced by the NIC's queue rate limit");
                    return None;
                }
                Err(reason) => reason,
            },
            Err(_) => "the rate is beyond its 32-bit Mb/s field".to_owned(),
        };
        tracing::info!(interface = %port.name, queue = %q.name, mbps, pmd = %self.port.driver_name(), "TX paced in software: the PMD has no queue rate limit ({refused})");
        Pacer::for_queue(q)
    }
}

impl PortDriver for DpdkDriver {
    fn tasks(&mut self, _engine: &Arc<EngineState>, port: &Port) -> Vec<Task> {
        let mac = self.port.mac().unwrap_or_default();
        let mut tasks: Vec<Task> = port
            .tx
            .iter()
            .zip(&self.tx_pools)
            .enumerate()
            .map(|(queue, (q, pools))| {
                let pacer = self.software_pacer(port, queue, q);
                let sender = sender::Sender::new(port.id, queue, Arc::clone(&self.port), pools.clone(), mac, pacer);
                Task::sender(port, q, Box::new(sender))
            })
            .collect();
        let receiver = Receiver {
            port: port.id,
            eth: Arc::clone(&self.port),
            pools: self.pools.clone(),
            assemblers: port.rx.iter().map(Assembler::new).collect(),
            mbufs: RxMbufs::with_capacity(RX_BURST),
            timestamps: self.timestamps,
            registered: false,
            counted: PortCounters::default(),
            next_count: Instant::now(),
        };
        if !port.rx.is_empty() {
            let mut task = Task::receiver(port, Box::new(receiver));
            // A poll-mode driver has nothing to block on.
            task.max_wait = None;
            tasks.push(task);
        }
        tasks
    }

    fn apply_flows(&self, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        self.steering.apply(&self.port, port, table)
    }

    fn link_stats(&self) -> LinkStats {
        LinkStats { nic_counters: self.port.extended_counters(), ..LinkStats::default() }
    }

    fn stop(&self) {
        self.port.close();
    }
}

/// Polls every RX queue of a port and assembles bursts. The NIC chose the
/// queue; the flow id is the packet's MARK or, without one, the first flow
/// that matches it, as in software steering.
struct Receiver {
    port: u16,
    eth: Arc<EthPort>,
    pools: Vec<Arc<Mempool>>,
    assemblers: Vec<Assembler>,
    mbufs: RxMbufs,
    timestamps: Option<TimestampField>,
    registered: bool,
    /// The NIC's counters as last turned into drops.
    counted: PortCounters,
    next_count: Instant,
}

impl Receiver {
    /// Adds what the NIC dropped since the last look to the port's drops.
    fn count_nic_drops(&mut self, engine: &EngineState) {
        let now = self.eth.counters();
        let drops = &engine.ports[usize::from(self.port)].rx_drops;
        let before = std::mem::replace(&mut self.counted, now);
        drops.dropped(DropReason::NicMissed, now.rx_missed.saturating_sub(before.rx_missed));
        drops.dropped(DropReason::NicRxError, now.rx_errors.saturating_sub(before.rx_errors));
        drops.dropped(DropReason::NoFreePacketBuffers, now.rx_no_mbuf.saturating_sub(before.rx_no_mbuf));
    }
}

/// Copies a frame whose mbuf is not the queue's (a PMD passed on another
/// pool's mbuf) into a buffer of the queue's region.
fn land_foreign(mbufs: &RxMbufs, at: usize, region: &Region) -> std::result::Result<(BufToken, u32), DropReason> {
    let Some(mut token) = region.take() else {
        mbufs.take_foreign(at, &mut []);
        return Err(DropReason::NoFreePacketBuffers);
    };
    match mbufs.take_foreign(at, region.bytes_mut(&mut token)) {
        Some(len) => Ok((token, len as u32)),
        None => {
            region.release(token);
            Err(DropReason::Truncated)
        }
    }
}

impl QueueTask for Receiver {
    fn poll(&mut self, engine: &EngineState, _wait: Option<Duration>) -> usize {
        if !self.registered {
            rte::register_thread();
            self.registered = true;
        }
        let p = &engine.ports[usize::from(self.port)];
        let mut received = 0;
        for (queue, pool) in self.pools.iter().enumerate() {
            if self.eth.rx_burst(queue as u16, &mut self.mbufs) == 0 {
                continue;
            }
            let rx = &p.rx[queue];
            let region = engine.regions.get(rx.segment_regions[0]);
            let flows = p.flows.load();
            let dropping = p.drop_all.load(std::sync::atomic::Ordering::Relaxed);
            for (at, packet) in self.mbufs.received(pool, self.timestamps) {
                received += 1;
                let (token, offset, len) = match packet.index {
                    Some(index) => (region.adopt(index), packet.offset, packet.len),
                    None => match land_foreign(&self.mbufs, at, region) {
                        Ok((token, len)) => (token, 0, len),
                        Err(reason) => {
                            rx.stats.dropped(reason, 1);
                            continue;
                        }
                    },
                };
                if dropping {
                    region.release(token);
                    p.rx_drops.dropped(DropReason::DropAllTraffic, 1);
                    continue;
                }
                let rule = match packet.mark.and_then(|id| flows.rule_of(id)) {
                    Some(rule) => Some(rule),
                    // Not even the headers are read: the packet stays out of this core's cache.
                    None if flows.steers_nothing() => None,
                    None => match flows.steer_frame(&region.bytes(&token)[usize::from(offset)..][..len as usize]) {
                        Steering::Flow { rule, .. } => Some(rule),
                        Steering::Default { .. } => None,
                        Steering::Unmatched => {
                            region.release(token);
                            p.rx_drops.dropped(DropReason::UnmatchedFlow, 1);
                            continue;
                        }
                    },
                };
                let flow_id = rule.map(|rule| {
                    let rule = &flows.rules[rule];
                    rule.stats.matched(1, u64::from(len));
                    rule.flow_id
                });
                let mut slot = PacketSlot::single(token, len, flow_id);
                slot.set_segment_offset(0, offset);
                slot.set_rx_timestamp(packet.timestamp);
                self.assemblers[queue].push(rx, slot, &engine.regions);
            }
        }
        let now = Instant::now();
        worker::flush_due(&mut self.assemblers, &p.rx, now, &engine.regions);
        if now >= self.next_count {
            self.count_nic_drops(engine);
            self.next_count = now + COUNTER_PERIOD;
        }
        received
    }

    fn finish(&mut self, engine: &EngineState) {
        self.count_nic_drops(engine);
        worker::finish_all(&mut self.assemblers, &engine.ports[usize::from(self.port)].rx, &engine.regions);
    }
}
