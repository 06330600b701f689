//! RX hardware timestamps: whether a port's PMD gives them, and where a
//! packet's stamp lies (DPDK's timestamp mbuf dynamic field and flag).

use std::ptr::NonNull;

use dpdk_sys::rte_mbuf;

use super::EthPort;
use crate::error::{Error, Result, Status};

/// PMDs that stamp every packet without advertising the offload:
/// `net_pcap` gives each packet its capture time.
const STAMPING_WITHOUT_OFFLOAD: &[&str] = &["net_pcap"];

/// How a port's PMD gives RX timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimestampSource {
    /// It advertises `RTE_ETH_RX_OFFLOAD_TIMESTAMP`: the offload is enabled.
    Offload,
    /// It stamps every packet anyway.
    Always,
}

impl TimestampSource {
    /// How `port`'s PMD stamps received packets, or why it cannot.
    pub(crate) fn of(port: &EthPort) -> Result<Self> {
        // SAFETY: a constant of the shim.
        if port.rx_offload_capa() & unsafe { dpdk_sys::daqiri_rx_offload_timestamp() } != 0 {
            return Ok(Self::Offload);
        }
        let pmd = port.driver_name();
        if STAMPING_WITHOUT_OFFLOAD.contains(&pmd.as_str()) {
            return Ok(Self::Always);
        }
        Err(Error::new(
            Status::NotSupported,
            format!(
                "rx.hardware_timestamps: the {pmd} PMD of \"{}\" does not timestamp received packets (no RTE_ETH_RX_OFFLOAD_TIMESTAMP); remove the key or use a NIC that has it",
                port.address()
            ),
        ))
    }

    /// The RX offload bits to configure the port with.
    pub(crate) fn rx_offloads(self) -> u64 {
        match self {
            // SAFETY: a constant of the shim.
            Self::Offload => unsafe { dpdk_sys::daqiri_rx_offload_timestamp() },
            Self::Always => 0,
        }
    }
}

/// Where PMDs write a packet's receive timestamp, once one registered it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimestampField {
    offset: usize,
    flag: u64,
}

impl TimestampField {
    /// The registered field and flag; `None` while no PMD registered them.
    pub(crate) fn lookup() -> Option<Self> {
        let field = dpdk_sys::RTE_MBUF_DYNFIELD_TIMESTAMP_NAME.as_ptr().cast();
        let flag = dpdk_sys::RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME.as_ptr().cast();
        // SAFETY: NUL-terminated names; the lookups only read DPDK's registry.
        let (offset, bit) = unsafe {
            (
                dpdk_sys::rte_mbuf_dynfield_lookup(field, std::ptr::null_mut()),
                dpdk_sys::rte_mbuf_dynflag_lookup(flag, std::ptr::null_mut()),
            )
        };
        (offset >= 0 && (0..64).contains(&bit)).then(|| Self { offset: offset as usize, flag: 1u64 << bit })
    }

    /// The stamp of `mbuf`, whose `ol_flags` are `flags`, if the PMD set one.
    pub(super) fn read(self, mbuf: NonNull<rte_mbuf>, flags: u64) -> Option<u64> {
        if flags & self.flag == 0 {
            return None;
        }
        // SAFETY: the flag says the PMD wrote the 8-byte field at `offset`
        // inside this live mbuf (DPDK registered it within the mbuf's size).
        Some(unsafe { mbuf.as_ptr().cast::<u8>().add(self.offset).cast::<u64>().read_unaligned() })
    }
}
