//! The driver contract: what a backend gives the engine for each port, and
//! the checks every CPU-side backend shares.

use std::sync::Arc;

use crate::direction::Direction;
use crate::error::{Error, Result, Status};
use crate::flow::FlowTable;
use crate::memory::RegionTable;
use crate::port::Port;
use crate::queue::Queue;
use crate::task::Task;

use super::link::{LinkStats, RdmaConnection};

/// A port's live driver: opened at init, kept for the engine's whole life.
/// It hands its queues' work to the workers once, applies flow tables on
/// reload, reads what lies below the queues (a kernel socket, a NIC), and
/// closes its resources in order once the workers are gone.
pub(crate) trait PortDriver: Send + Sync + std::fmt::Debug {
    /// The port's queue tasks for the generic workers, taken once when the
    /// engine starts. A direct-mode receive side goes to the port instead
    /// ([`Port::set_direct`]).
    fn tasks(&mut self, port: &Port) -> Vec<Task>;

    /// Makes `table` the port's steering. Software steering swaps the table
    /// the workers read; a driver that programs a NIC or an XDP map does it
    /// here and fails with the device's reason.
    fn apply_flows(&self, port: &Port, table: Arc<FlowTable>) -> Result<()> {
        port.flows.store(table);
        Ok(())
    }

    /// The port's Ethernet address, as its device reports it; `None` for a
    /// port with no Ethernet of its own (a socket, an RDMA connection).
    fn mac_address(&self) -> Option<[u8; 6]> {
        None
    }

    /// Sets a socket option on the port's sockets, kept for those it opens
    /// later (DAQIRI's `socket_setsockopt`); `None` for a port without sockets.
    fn set_socket_option(&self, level: i32, name: i32, value: &[u8]) -> Option<Result<()>> {
        let _ = (level, name, value);
        None
    }

    /// A socket option of the port's socket (a TCP port's connection), as
    /// the kernel holds it; `None` for a port without sockets.
    fn socket_option(&self, level: i32, name: i32) -> Option<Result<Vec<u8>>> {
        let _ = (level, name);
        None
    }

    /// Counters and state below the queues.
    fn link_stats(&self) -> LinkStats {
        LinkStats::default()
    }

    /// Connection `index` (an RX queue's position) of a RoCE port; `None`
    /// for other ports and positions.
    fn rdma_connection(&self, index: usize) -> Option<RdmaConnection> {
        let _ = index;
        None
    }

    /// Closes the port's connections and devices; called after every worker stopped.
    fn stop(&self) {}
}

/// How many RX queues kernel netdev `netdev` has (`/sys/class/net/<netdev>/queues`).
#[cfg(any(feature = "dpdk", feature = "af_xdp"))]
pub(crate) fn netdev_rx_queues(netdev: &str) -> Result<usize> {
    let dir = format!("/sys/class/net/{netdev}/queues");
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Error::new(
            Status::InvalidParameter,
            format!("netdev \"{netdev}\" not found in this network namespace ({dir}: {e})"),
        )
    })?;
    Ok(entries.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count())
}

/// Lets the CPU read and write every queue's memory, which both CPU-side
/// backends need. In a CUDA build a queue may use a `device` region all the
/// same: the region gets a pinned staging twin and the queue a copier, which
/// moves each RX burst to the GPU as it is delivered and each TX burst from
/// the GPU as it is sent.
pub(crate) fn prepare_cpu_landing(port: &Port, regions: &RegionTable) -> Result<()> {
    for direction in [Direction::Rx, Direction::Tx] {
        for q in port.queues(direction) {
            for &r in &q.segment_regions {
                let region = regions.get(r);
                if !region.kind().cpu_addressable() {
                    stage_on_host(port, direction, q, region)?;
                }
            }
        }
    }
    Ok(())
}

/// Lets `queue` land or send packets of `device` region `region` through
/// its pinned twin. A GPU reorder plan reads packets where they land, before
/// any burst exists, so its queue must land in `host_pinned` instead.
fn stage_on_host(port: &Port, direction: Direction, queue: &Queue, region: &crate::memory::Region) -> Result<()> {
    if direction == Direction::Rx
        && let Some(plan) = port.plans.iter().find(|plan| plan.queue_id == queue.id)
    {
        return Err(Error::new(
            Status::NotSupported,
            format!(
                "reorder plan \"{}\" reads packets where they land, and the {} backend lands them with the CPU: give queue \"{}\" a host_pinned region instead of \"{}\" (kind device needs a GPUDirect backend)",
                plan.name,
                port.backend.as_str(),
                queue.name,
                region.name()
            ),
        ));
    }
    region.stage_on_host()?;
    queue.copier.start(region.backing().gpu().expect("device memory is on a GPU"), direction)
}
