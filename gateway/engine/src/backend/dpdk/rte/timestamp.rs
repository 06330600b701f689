//! RX hardware timestamps: whether a port's PMD gives them, where a
//! packet's stamp lies (DPDK's timestamp mbuf dynamic field and flag), and
//! how its unit becomes DAQIRI's: nanoseconds since the epoch. DPDK leaves
//! the unit to the PMD: `net_pcap` gives microseconds, a NIC its clock's
//! ticks, which are turned into time against the host's real-time clock:
//! the clock's rate measured at start, then re-anchored every second by
//! each queue's receiver (a NIC oscillator and the host's clock drift
//! apart by tens of ppm, and a rate measured over 20 ms is off by about as
//! much again). A stamp is then within the skew of one pair of clock reads
//! (microseconds) plus the rate error over at most a second of the host's
//! real-time clock; the rate, measured over all the time since the port
//! started, keeps getting better.

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
    /// Ticks of the NIC's clock: `anchor` was read with the host's clock
    /// last, `first` when the port started; the clock runs at `hz`.
    Ticks { first: ClockRead, anchor: ClockRead, hz: f64 },
}

/// The NIC's clock and the host's real-time clock, read one after the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClockRead {
    tick: u64,
    ns: u64,
}

/// How long the NIC's clock is watched at start to learn its rate.
const CALIBRATION: std::time::Duration = std::time::Duration::from_millis(20);
/// How often a receiver re-anchors the NIC's clock to the host's.
pub(crate) const REANCHOR_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// A rate this far from the last one means the host's clock was stepped
/// (not slewed): the rate is measured afresh from then on.
const STEPPED: f64 = 1e-3;

fn host_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl ClockRead {
    /// Reads the NIC's clock, then the host's.
    pub(crate) fn now(read_clock: impl Fn() -> std::result::Result<u64, String>) -> std::result::Result<Self, String> {
        Ok(Self { tick: read_clock()?, ns: host_now_ns() })
    }

    /// The NIC clock's rate between `self` and `later`, if it advanced.
    fn rate_to(self, later: ClockRead) -> Option<f64> {
        let hz = later.tick.wrapping_sub(self.tick) as f64 * 1e9 / later.ns.saturating_sub(self.ns).max(1) as f64;
        (hz > 0.0 && (later.tick.wrapping_sub(self.tick) as i64) > 0).then_some(hz)
    }
}

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
        let first = ClockRead::now(&read_clock).map_err(refused)?;
        std::thread::sleep(CALIBRATION);
        let later = ClockRead::now(&read_clock).map_err(refused)?;
        Self::calibrated(first, later).ok_or_else(|| refused("it did not advance".into()))
    }

    /// The clock two reads give, if it advanced between them.
    fn calibrated(first: ClockRead, later: ClockRead) -> Option<Self> {
        Some(Self::Ticks { first, anchor: later, hz: first.rate_to(later)? })
    }

    /// Moves the anchor to `now` and re-measures the rate over all the
    /// time since `first`; a host clock stepped since makes `now` the new
    /// `first`, keeping the last rate. A NIC clock that did not advance
    /// leaves everything as it was.
    pub(crate) fn reanchor(&mut self, now: ClockRead) {
        let Self::Ticks { first, anchor, hz } = self else { return };
        if anchor.rate_to(now).is_none() {
            return;
        }
        match first.rate_to(now) {
            Some(rate) if (rate / *hz - 1.0).abs() < STEPPED => *hz = rate,
            _ => *first = now,
        }
        *anchor = now;
    }

    /// A raw stamp in nanoseconds since the epoch.
    pub(crate) fn nanos(self, raw: u64) -> u64 {
        match self {
            Self::Micros => raw.saturating_mul(1000),
            Self::Ticks { anchor, hz, .. } => {
                // Signed: a stamp may predate the anchor.
                let ticks = raw.wrapping_sub(anchor.tick) as i64;
                anchor.ns.saturating_add_signed((ticks as f64 * 1e9 / hz) as i64)
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
    /// When a NIC clock's anchor is due to move.
    next_anchor: std::time::Instant,
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
        (offset >= 0 && (0..64).contains(&bit)).then(|| Self {
            offset: offset as usize,
            flag: 1u64 << bit,
            clock,
            next_anchor: std::time::Instant::now() + REANCHOR_EVERY,
        })
    }

    /// Re-anchors a NIC's clock once `REANCHOR_EVERY` has passed at `now`
    /// (a failed read keeps the last anchor).
    pub(crate) fn keep_anchored(
        &mut self,
        now: std::time::Instant,
        read_clock: impl Fn() -> std::result::Result<u64, String>,
    ) {
        if now < self.next_anchor || self.clock == StampClock::Micros {
            return;
        }
        self.next_anchor = now + REANCHOR_EVERY;
        if let Ok(read) = ClockRead::now(read_clock) {
            self.clock.reanchor(read);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A NIC clock at 1 GHz nominal, `ppm` fast against the host's, read
    /// `skew_ns` after the host's (host time `t` in ns since an epoch).
    fn read(t: u64, ppm: f64, skew_ns: u64) -> ClockRead {
        ClockRead { tick: ((t + skew_ns) as f64 * (1.0 + ppm * 1e-6)) as u64, ns: t }
    }

    /// Error in ns of the stamp of a packet received at host time `t`.
    fn error(clock: StampClock, t: u64, ppm: f64) -> i64 {
        clock.nanos(read(t, ppm, 0).tick) as i64 - t as i64
    }

    #[test]
    fn reanchoring_every_second_bounds_the_error_of_a_20_ms_calibration() {
        const SECOND: u64 = 1_000_000_000;
        let (ppm, start) = (40.0, 1_700_000_000 * SECOND);
        // The calibration's second read came 2 µs late: its rate is 100 ppm off.
        let fixed = StampClock::calibrated(read(start, ppm, 0), read(start + 20_000_000, ppm, 2_000)).unwrap();
        let hour = start + 3600 * SECOND;
        assert!(
            error(fixed, hour, ppm).abs() > 300_000_000,
            "never re-anchored: off by {} ns",
            error(fixed, hour, ppm)
        );
        let mut anchored = fixed;
        for s in 1..=3600 {
            // Each anchor's reads up to 1 µs apart.
            anchored.reanchor(read(start + s * SECOND, ppm, s % 1_000));
        }
        let worst = (0..10).map(|i| error(anchored, hour + i * SECOND / 10, ppm).abs()).max().unwrap();
        assert!(worst < 2_000, "re-anchored every second: within 2 µs a second later, off by {worst} ns");
    }

    #[test]
    fn a_stepped_host_clock_restarts_the_rate_measurement() {
        const SECOND: u64 = 1_000_000_000;
        let start = 1_700_000_000 * SECOND;
        let mut clock = StampClock::calibrated(read(start, 0.0, 0), read(start + 20_000_000, 0.0, 0)).unwrap();
        clock.reanchor(read(start + SECOND, 0.0, 0));
        // The host's clock jumps back 10 s: ticks go on, host time does not.
        let stepped = ClockRead { tick: read(start + 2 * SECOND, 0.0, 0).tick, ns: start - 8 * SECOND };
        clock.reanchor(stepped);
        let StampClock::Ticks { first, hz, .. } = clock else { unreachable!() };
        assert_eq!(first, stepped, "measured afresh from the step");
        assert!((hz / 1e9 - 1.0).abs() < 1e-6, "the last rate is kept: {hz}");
        assert_eq!(clock.nanos(stepped.tick + 1_000), stepped.ns + 1_000, "stamps follow the host's new time");
    }
}
