//! The DPDK backend (`stream_type: raw` on the `dpdk` engine): a DPDK port
//! per interface, NIC or virtual device, whose RX queues land packets in
//! mbufs that are our own region buffers (see [`rte::Mempool`]), so a burst
//! holds them zero-copy like every other backend's.
//!
//! EAL is started once per process, by the first engine that needs it.

mod egress_rules;
mod flow_rules;
mod receiver;
mod rte;
mod sender;
mod steering;

use std::sync::Arc;

use daqiri_config::model::{Flow, MemoryKind, Queue};
use daqiri_config::{Link, ValidConfig};

// The rings the config crate's buffer floor counts (`daqiri_config::pools`).
use super::driver::PortDriver;
use crate::backend::LinkStats;
use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;
use crate::memory::{Region, RegionTable};
use crate::pacing::Pacer;
use crate::port::Port;
use crate::task::Task;
use daqiri_config::pools::DPDK_RING_DESCRIPTORS as RX_DESCRIPTORS;

use receiver::Receiver;
pub(crate) use rte::Mempool;
use rte::{Eal, EalArgs, EthPort, InstalledFlow, RxPools, TimestampField, TimestampSource, Traffic};
use steering::PortSteering;

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
        // A packet's segments are mbufs of each of its queue's regions (an
        // RX queue of two splits headers from payload).
        let tx = interface.tx.as_ref().map_or(&[][..], |tx| &tx.queues);
        for (direction, j, name) in queue_regions("rx", interface.rx_queues()).chain(queue_regions("tx", tx)) {
            let region = regions.iter_mut().find(|r| r.name() == name).expect("validated region name");
            if region.device_pool::<Mempool>().is_some() {
                continue;
            }
            let base = region.backing().host_base().ok_or_else(|| {
                Error::new(
                    Status::NotSupported,
                    format!(
                        "interfaces[{i}].{direction}.queues[{j}].memory_regions: region \"{name}\" is {} memory, and this build's DPDK mbufs must be host memory (GPUDirect receive is not built)",
                        region.kind().as_str()
                    ),
                )
            })?;
            let pool = Mempool::over(name, base, region.buf_size(), region.num_bufs())?;
            region.set_device_pool(Arc::new(pool))?;
        }
    }
    Ok(())
}

/// Each region `queues` name, with where: (`direction`, queue position, region name).
fn queue_regions<'q>(
    direction: &'static str,
    queues: &'q [Queue],
) -> impl Iterator<Item = (&'static str, usize, &'q String)> + 'q {
    queues.iter().enumerate().flat_map(move |(j, q)| q.memory_regions.iter().map(move |name| (direction, j, name)))
}

/// A started DPDK port.
#[derive(Debug)]
pub(super) struct DpdkDriver {
    port: Arc<EthPort>,
    /// Each RX queue's pool.
    pools: Vec<RxPools>,
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

/// Maps the pool of every region `port`'s queues use for the device's DMA
/// (once per region and device). Virtual devices (`net_*`) move bytes with
/// the CPU and need no mapping.
fn map_for_dma(eth: &EthPort, address: &str, port: &Port, regions: &RegionTable) -> Result<()> {
    if address.starts_with("net_") {
        return Ok(());
    }
    let device = eth.device().ok_or_else(|| {
        Error::new(Status::InternalError, format!("DPDK port {address} has no EAL device to map memory for"))
    })?;
    for &r in port.rx.iter().chain(&port.tx).flat_map(|q| &q.segment_regions) {
        let region = regions.get(r);
        mempool_of(regions, r)?.map_for_dma(device, region.name(), address)?;
    }
    Ok(())
}

/// Refuses, by path, RX queues the PMD cannot give (DPDK would only say
/// EINVAL at configure) and, for net_af_packet, fewer RX queues than its
/// sockets: it opens all `qpairs` at probe and the kernel fans frames out
/// over them by flow hash, so a socket no RX queue reads would swallow its
/// flows unseen. (A NIC spreads only over the queues configured.)
fn refuse_queue_counts(eth: &EthPort, port: &Port, rx_queues: usize) -> Result<()> {
    let (offered, _) = eth.max_queues();
    let offered = usize::from(offered);
    let refuse =
        |why: String| Err(Error::new(Status::NotSupported, format!("rx.queues of interface \"{}\": {why}", port.name)));
    if rx_queues > offered {
        return refuse(format!(
            "the {} PMD of {} offers {offered} RX queue(s) and the config has {rx_queues}",
            eth.driver_name(),
            eth.address()
        ));
    }
    if eth.driver_name() == "net_af_xdp" {
        warn_of_unbound_netdev_queues(eth, port, offered);
    }
    if eth.driver_name() == "net_af_packet" && rx_queues > 0 && rx_queues < offered {
        return refuse(format!(
            "{} opens {offered} sockets (qpairs), which the kernel fills by flow hash, but {rx_queues} RX queue(s) read them: the flows hashed to the others would be lost unseen; set qpairs={rx_queues} in the address or add RX queues",
            eth.address()
        ));
    }
    Ok(())
}

/// net_af_xdp binds `queue_count` netdev queues and its own XDP program
/// hands frames on any other queue to the kernel, uncounted: said once.
fn warn_of_unbound_netdev_queues(eth: &EthPort, port: &Port, bound: usize) {
    let address = eth.address();
    let Some(netdev) = address.split(',').find_map(|arg| arg.strip_prefix("iface=")) else { return };
    let Ok(available) = super::driver::netdev_rx_queues(netdev) else { return };
    if available > bound {
        tracing::warn!(
            interface = %port.name,
            "{netdev} has {available} RX queues and {address} binds {bound}: net_af_xdp's XDP program passes frames on the others to the kernel, uncounted; set queue_count={available} (and as many RX queues) or `ethtool -L {netdev} combined {bound}`"
        );
    }
}

fn mempool_of(regions: &RegionTable, region: u16) -> Result<Arc<Mempool>> {
    let region = regions.get(region);
    region
        .device_pool::<Mempool>()
        .ok_or_else(|| Error::new(Status::InternalError, format!("region \"{}\" has no DPDK mempool", region.name())))
}

pub(super) fn open(
    address: &str,
    port: &Port,
    regions: &RegionTable,
    tx_flows: &[Flow],
) -> Result<Box<dyn PortDriver>> {
    // An RX queue of two regions splits headers from payload (buffer split).
    let pools: Vec<RxPools> = port
        .rx
        .iter()
        .map(|q| {
            let payload = q.segment_regions.get(1).map(|&r| mempool_of(regions, r)).transpose()?;
            Ok(RxPools { head: mempool_of(regions, q.segment_regions[0])?, payload })
        })
        .collect::<Result<_>>()?;
    let tx_pools: Vec<Vec<Arc<Mempool>>> = port
        .tx
        .iter()
        .map(|q| q.segment_regions.iter().map(|&r| mempool_of(regions, r)).collect::<Result<_>>())
        .collect::<Result<_>>()?;
    let eth = EthPort::find(address)?;
    refuse_queue_counts(&eth, port, pools.len())?;
    map_for_dma(&eth, address, port, regions)?;
    let table: Arc<FlowTable> = port.flows.load_full();
    let steering = PortSteering::prepare(&eth, &table, pools.len());
    let stamping = port
        .rx_timestamps
        .then(|| TimestampSource::of(eth.rx_offload_capa(), &eth.driver_name(), eth.address()))
        .transpose()?;
    eth.start(&pools, tx_pools.len() as u16, RX_DESCRIPTORS, stamping.map_or(0, TimestampSource::rx_offloads))?;
    let timestamps = match stamping {
        None => None,
        Some(source) => Some(
            TimestampField::lookup(source.clock(&eth.driver_name(), eth.address(), || eth.read_clock())?).ok_or_else(
                || {
                    Error::new(
                        Status::GenericFailure,
                        format!(
                            "rx.hardware_timestamps: the {} PMD registered no mbuf timestamp field",
                            eth.driver_name()
                        ),
                    )
                },
            )?,
        ),
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
    fn tasks(&mut self, port: &Port) -> Vec<Task> {
        let mac = self.port.mac().unwrap_or_default();
        let mut tasks: Vec<Task> = port
            .tx
            .iter()
            .zip(&self.tx_pools)
            .enumerate()
            .map(|(queue, (q, pools))| {
                let pacer = self.software_pacer(port, queue, q);
                let sender = sender::Sender::new(queue, Arc::clone(&self.port), pools.clone(), mac, pacer);
                Task::sender(port, q, Box::new(sender))
            })
            .collect();
        // A receiver per RX queue, each on its queue's core; a poll-mode
        // driver has nothing to block on.
        for (queue, (q, pools)) in port.rx.iter().zip(&self.pools).enumerate() {
            let receiver = Receiver::new(port, queue, Arc::clone(&self.port), pools.clone(), self.timestamps);
            tasks.push(Task::receiver(port, q, Box::new(receiver)).polling());
        }
        tasks
    }

    fn apply_flows(&self, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        self.steering.apply(&self.port, port, table)
    }

    fn mac_address(&self) -> Option<[u8; 6]> {
        self.port.mac()
    }

    fn link_stats(&self) -> LinkStats {
        LinkStats { nic_counters: self.port.extended_counters(), ..LinkStats::default() }
    }

    fn stop(&self) {
        self.port.close();
    }
}
