//! RX hardware timestamps: whether a port's PMD gives them, where a
//! packet's stamp lies (DPDK's timestamp mbuf dynamic field and flag), and
//! how its unit becomes DAQIRI's: nanoseconds since the epoch. DPDK leaves
//! the unit to the PMD: `net_pcap` gives microseconds, a NIC its clock's
//! ticks, which are scaled by the clock's rate as measured at start against
//! the host's real-time clock.

use std::ptr::NonNull;

use dpdk_sys::rte_mbuf;

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
    /// How a port's PMD stamps received packets, or why it cannot:
    /// `rx_offload_capa` is what the port offers, `pmd` its driver and
    /// `address` its name, for the refusal.
    pub(crate) fn of(rx_offload_capa: u64, pmd: &str, address: &str) -> Result<Self> {
        // SAFETY: a constant of the shim.
        if rx_offload_capa & unsafe { dpdk_sys::daqiri_rx_offload_timestamp() } != 0 {
            return Ok(Self::Offload);
        }
        if STAMPING_WITHOUT_OFFLOAD.contains(&pmd) {
            return Ok(Self::Always);
        }
        Err(Error::new(
            Status::NotSupported,
            format!(
                "rx.hardware_timestamps: the {pmd} PMD of \"{address}\" does not timestamp received packets (no RTE_ETH_RX_OFFLOAD_TIMESTAMP); remove the key or use a NIC that has it"
            ),
        ))
    }

    /// How the PMD's stamps become nanoseconds since the epoch, once the
    /// port is started: a NIC's clock is read twice (`read_clock`) to learn
    /// its rate; `pmd` and `address` name it in a refusal.
    pub(crate) fn clock(
        self,
        pmd: &str,
        address: &str,
        read_clock: impl Fn() -> std::result::Result<u64, String>,
    ) -> Result<StampClock> {
        match self {
            Self::Always => Ok(StampClock::Micros),
            Self::Offload => StampClock::calibrate(pmd, address, read_clock),
        }
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

/// A PMD's timestamp unit, and how to turn it into nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StampClock {
    /// Microseconds since the epoch (`net_pcap`: a capture's record times).
    Micros,
    /// Ticks of the NIC's clock: `tick` was `ns` since the epoch, and the
    /// clock runs at `hz`.
    Ticks { tick: u64, ns: u64, hz: f64 },
}

/// How long the NIC's clock is watched to learn its rate.
const CALIBRATION: std::time::Duration = std::time::Duration::from_millis(20);

impl StampClock {
    /// Reads a NIC's clock twice, `CALIBRATION` apart, against the host's
    /// real-time clock; a PMD that cannot read its clock is refused by path.
    fn calibrate(pmd: &str, address: &str, read_clock: impl Fn() -> std::result::Result<u64, String>) -> Result<Self> {
        let refused = |why: String| {
            Error::new(
                Status::NotSupported,
                format!(
                    "rx.hardware_timestamps: the {pmd} PMD of \"{address}\" cannot read its clock ({why}), so its timestamps cannot be turned into nanoseconds; remove the key"
                ),
            )
        };
        let now_ns =
            || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let (tick, ns) = (read_clock().map_err(refused)?, now_ns());
        std::thread::sleep(CALIBRATION);
        let (later, later_ns) = (read_clock().map_err(refused)?, now_ns());
        let hz = later.wrapping_sub(tick) as f64 * 1e9 / later_ns.saturating_sub(ns).max(1) as f64;
        if hz <= 0.0 {
            return Err(refused("it did not advance".into()));
        }
        Ok(Self::Ticks { tick, ns, hz })
    }

    /// A raw stamp in nanoseconds since the epoch.
    pub(crate) fn nanos(self, raw: u64) -> u64 {
        match self {
            Self::Micros => raw.saturating_mul(1000),
            Self::Ticks { tick, ns, hz } => {
                // Signed: a stamp may predate the calibration.
                let ticks = raw.wrapping_sub(tick) as i64;
                ns.saturating_add_signed((ticks as f64 * 1e9 / hz) as i64)
            }
        }
    }
}

/// Where PMDs write a packet's receive timestamp, once one registered it,
/// and its unit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimestampField {
    offset: usize,
    flag: u64,
    clock: StampClock,
}

impl TimestampField {
    /// The registered field and flag; `None` while no PMD registered them.
    pub(crate) fn lookup(clock: StampClock) -> Option<Self> {
        let field = dpdk_sys::RTE_MBUF_DYNFIELD_TIMESTAMP_NAME.as_ptr().cast();
        let flag = dpdk_sys::RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME.as_ptr().cast();
        // SAFETY: NUL-terminated names; the lookups only read DPDK's registry.
        let (offset, bit) = unsafe {
            (
                dpdk_sys::rte_mbuf_dynfield_lookup(field, std::ptr::null_mut()),
                dpdk_sys::rte_mbuf_dynflag_lookup(flag, std::ptr::null_mut()),
            )
        };
        (offset >= 0 && (0..64).contains(&bit)).then(|| Self { offset: offset as usize, flag: 1u64 << bit, clock })
    }

    /// The stamp of `mbuf`, whose `ol_flags` are `flags`, if the PMD set
    /// one, in nanoseconds since the epoch.
    pub(super) fn read(self, mbuf: NonNull<rte_mbuf>, flags: u64) -> Option<u64> {
        if flags & self.flag == 0 {
            return None;
        }
        // SAFETY: the flag says the PMD wrote the 8-byte field at `offset`
        // inside this live mbuf (DPDK registered it within the mbuf's size).
        let raw = unsafe { mbuf.as_ptr().cast::<u8>().add(self.offset).cast::<u64>().read_unaligned() };
        Some(self.clock.nanos(raw))
    }
}
