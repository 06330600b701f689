//! One DPDK Ethernet port: configured with the engine's queues, started,
//! polled, read for counters, stopped and closed.

use std::ffi::CString;
use std::ptr::NonNull;

use dpdk_sys::rte_mbuf;

use super::Mempool;
use crate::error::{Error, Result, Status};

/// A started port.
#[derive(Debug)]
pub(crate) struct EthPort {
    id: u16,
    address: String,
    closed: std::sync::atomic::AtomicBool,
}

/// Mbufs one RX poll returned, as (buffer index, data offset, length).
#[derive(Debug)]
pub(crate) struct RxMbufs {
    raw: Vec<*mut rte_mbuf>,
    count: usize,
}

// SAFETY: the pointers are mbufs this queue's poller owns until it turns
// them into buffer indices; they never cross threads while held.
unsafe impl Send for RxMbufs {}

impl RxMbufs {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self { raw: vec![std::ptr::null_mut(); n], count: 0 }
    }

    /// What the last poll received: buffer index, where the frame starts, its length.
    pub(crate) fn received<'a>(&'a self, pool: &'a Mempool) -> impl Iterator<Item = (u32, u16, u32)> + 'a {
        self.raw[..self.count].iter().map(move |&m| {
            let mbuf = NonNull::new(m).expect("rx_burst fills what it counts");
            // SAFETY: a single-segment mbuf the PMD just handed over.
            let (offset, len) = unsafe { (mbuf.as_ref().data_off, mbuf.as_ref().data_len) };
            (pool.index_of(mbuf).expect("an mbuf of the queue's pool"), offset, u32::from(len))
        })
    }
}

impl EthPort {
    /// Finds `address` (a PCIe address or a virtual device's name), gives it
    /// one RX queue per pool (with `descriptors` each) and `tx_queues` TX
    /// queues, and starts it.
    pub(crate) fn start(address: &str, rx_pools: &[&Mempool], tx_queues: u16, descriptors: u16) -> Result<Self> {
        let failed = |doing: String, rc: i32| {
            Error::new(Status::GenericFailure, format!("DPDK port \"{address}\": {doing}: {}", super::errno_text(rc)))
        };
        // A vdev's name is its devargs up to the first comma.
        let name = address.split(',').next().unwrap_or(address);
        let c_name = CString::new(name).map_err(|_| Error::invalid(format!("address \"{address}\" has a NUL")))?;
        let mut id = 0u16;
        // SAFETY: EAL is initialised; the name is a valid C string; `id` is written on success.
        let rc = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
        if rc != 0 {
            return Err(Error::new(
                Status::InvalidParameter,
                format!(
                    "no DPDK port \"{name}\": not a probed PCIe device or virtual device ({})",
                    super::errno_text(rc)
                ),
            ));
        }
        let port = EthPort { id, address: address.to_owned(), closed: false.into() };
        let conf = dpdk_sys::rte_eth_conf::default();
        let rx_queues = rx_pools.len() as u16;
        // SAFETY: the port exists and is stopped; `conf` is a valid default configuration.
        let rc = unsafe { dpdk_sys::rte_eth_dev_configure(id, rx_queues, tx_queues, &conf) };
        if rc != 0 {
            return Err(failed(format!("configuring {rx_queues} RX and {tx_queues} TX queues"), rc));
        }
        // SAFETY: as above.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(id) }.max(0) as u32;
        for (queue, pool) in rx_pools.iter().enumerate() {
            // SAFETY: the port is configured with this many RX queues; the
            // pool outlives the port (the engine stops ports before regions drop).
            let rc = unsafe {
                dpdk_sys::rte_eth_rx_queue_setup(id, queue as u16, descriptors, socket, std::ptr::null(), pool.raw())
            };
            if rc != 0 {
                return Err(failed(format!("setting up RX queue {queue}"), rc));
            }
        }
        for queue in 0..tx_queues {
            // SAFETY: the port is configured with this many TX queues.
            let rc = unsafe { dpdk_sys::rte_eth_tx_queue_setup(id, queue, descriptors, socket, std::ptr::null()) };
            if rc != 0 {
                return Err(failed(format!("setting up TX queue {queue}"), rc));
            }
        }
        // SAFETY: every queue is set up.
        let rc = unsafe { dpdk_sys::rte_eth_dev_start(id) };
        if rc != 0 {
            return Err(failed("starting".into(), rc));
        }
        // Not every PMD has a promiscuous mode; receiving works without one.
        // SAFETY: the port is started.
        let _ = unsafe { dpdk_sys::rte_eth_promiscuous_enable(id) };
        Ok(port)
    }

    /// The port id DPDK gave the device.
    pub(crate) fn id(&self) -> u16 {
        self.id
    }

    /// Receives up to the buffer's capacity from RX queue `queue`.
    pub(crate) fn rx_burst(&self, queue: u16, mbufs: &mut RxMbufs) -> usize {
        let capacity = mbufs.raw.len().min(usize::from(u16::MAX)) as u16;
        // SAFETY: the port is started with this queue; `raw` has room for
        // `capacity` pointers; only this queue's poller calls it.
        mbufs.count =
            usize::from(unsafe { dpdk_sys::daqiri_eth_rx_burst(self.id, queue, mbufs.raw.as_mut_ptr(), capacity) });
        mbufs.count
    }
}

impl EthPort {
    /// Stops and closes the port and removes its device, so its queues give
    /// every mbuf back while their pools still exist, and the next engine
    /// probes the device afresh. Idempotent; pollers must be gone.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let name = self.address.split(',').next().unwrap_or(&self.address);
        let bus = if name.starts_with("net_") { c"vdev" } else { c"pci" };
        // SAFETY: the port was started by us and nothing polls it any more.
        unsafe {
            let _ = dpdk_sys::rte_eth_dev_stop(self.id);
            let _ = dpdk_sys::rte_eth_dev_close(self.id);
        }
        if let Ok(c_name) = CString::new(name) {
            // SAFETY: the port is closed; the names are valid C strings.
            let rc = unsafe { dpdk_sys::rte_eal_hotplug_remove(bus.as_ptr(), c_name.as_ptr()) };
            if rc != 0 {
                tracing::warn!(port = %self.address, "DPDK could not remove the device: {}", super::errno_text(rc));
            }
        }
    }
}

impl Drop for EthPort {
    fn drop(&mut self) {
        self.close();
    }
}
