//! A subscription to a gateway's bursts, from the consumer's side.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use crate::error::Error;
use crate::protocol::{Answer, Hello, Target, VERSION, Welcome, WhenFull};
use crate::region::{Memory, Region};
use crate::ring::{BurstHeader, Reader, SegmentDescriptor};
use crate::wire;

/// Looks at the ring before sleeping on the doorbell (a few microseconds).
const SPINS: u32 = 2000;

/// How to subscribe.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bursts the consumer may hold or leave unread before the gateway
    /// drops bursts for it (1 to 4096).
    pub slots: u32,
    /// A group to join (each burst goes to one member), or none (fan-out).
    pub group: Option<String>,
    /// What the gateway does with a burst while the ring is full.
    pub when_full: WhenFull,
    /// The gateway's consumer token, where it asks for one.
    pub token: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self { slots: 256, group: None, when_full: WhenFull::Drop, token: None }
    }
}

/// A live subscription: bursts arrive with [`next`](Self::next), and go
/// back to the gateway when dropped.
#[derive(Debug)]
pub struct Subscription {
    socket: OwnedFd,
    id: u64,
    reader: Reader,
    doorbell: OwnedFd,
    /// Each region the welcome listed, by its index.
    regions: Vec<(u16, Region)>,
}

impl Subscription {
    /// Connects to the gateway's consumer socket at `path` and subscribes to `target`.
    pub fn connect(path: impl AsRef<Path>, target: Target, options: Options) -> Result<Self, Error> {
        let socket = rustix::net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        let path = path.as_ref();
        rustix::net::connect(&socket, &SocketAddrUnix::new(path)?).map_err(|e| {
            std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!("cannot connect to the gateway's consumer socket {}: {e}", path.display()),
            )
        })?;
        let hello = Hello {
            version: VERSION,
            target,
            slots: options.slots,
            group: options.group,
            when_full: options.when_full,
            token: options.token,
            gpu_memory: cfg!(feature = "cuda"),
        };
        wire::send(&socket, &serde_json::to_vec(&hello).expect("a hello serialises"), &[])?;
        let Some((message, fds)) = wire::receive(&socket)? else {
            return Err(Error::Ended("the gateway closed the socket before answering".into()));
        };
        let welcome = match parse(&message)? {
            Answer::Welcome(welcome) => welcome,
            Answer::Refused { reason } => return Err(Error::Refused(reason)),
            Answer::Ended { reason } => return Err(Error::Ended(reason)),
        };
        Self::from_welcome(socket, welcome, fds)
    }

    fn from_welcome(socket: OwnedFd, welcome: Welcome, fds: Vec<OwnedFd>) -> Result<Self, Error> {
        if fds.len() != welcome.descriptors() {
            return Err(Error::Protocol(format!(
                "{} descriptors with a welcome that lists {}",
                fds.len(),
                welcome.descriptors()
            )));
        }
        let mut fds = fds.into_iter();
        let (ring, doorbell) = (fds.next().expect("counted"), fds.next().expect("counted"));
        let reader = Reader::open(ring, welcome.ring)?;
        let regions = welcome
            .regions
            .iter()
            .zip(fds)
            .map(|(region, fd)| Ok((region.index, Region::open(region, &fd)?)))
            .collect::<Result<_, Error>>()?;
        Ok(Self { socket, id: welcome.subscription, reader, doorbell, regions })
    }

    /// The subscription's id, as the gateway's status lists it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The next burst, waiting up to `timeout` (for ever with `None`);
    /// `Ok(None)` when none came in time. Bursts delivered before the
    /// gateway ended the subscription are all given first.
    pub fn next(&self, timeout: Option<Duration>) -> Result<Option<Burst<'_>>, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(burst) = self.try_next() {
                return Ok(Some(burst));
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            self.wait(left)?;
        }
    }

    /// The next burst if one is waiting.
    pub fn try_next(&self) -> Option<Burst<'_>> {
        self.try_take().map(|taken| Burst { subscription: self, taken })
    }

    /// [`next`](Self::next) for bindings that keep a burst past a borrow
    /// (Python's): a plain value, released only by [`release`](Self::release).
    pub fn next_taken(&self, timeout: Option<Duration>) -> Result<Option<Taken>, Error> {
        Ok(self.next(timeout)?.map(|burst| {
            let taken = burst.taken;
            std::mem::forget(burst);
            taken
        }))
    }

    /// The next burst, if one is waiting, as a plain value (see [`next_taken`](Self::next_taken)).
    pub fn try_take(&self) -> Option<Taken> {
        let slot = self.reader.next()?;
        Some(Taken { slot, header: self.reader.header(slot) })
    }

    /// Gives a burst back to the gateway. Each burst once: the gateway
    /// ends a subscription that releases what it does not hold.
    pub fn release(&self, taken: Taken) {
        self.reader.release(taken.slot);
    }

    /// The empty slots of a reorder aggregate taken and not released yet
    /// (see [`Burst::missing_slots`]).
    pub fn missing_slots(&self, taken: &Taken) -> Vec<u32> {
        self.reader.missing_slots(taken.slot)
    }

    /// The packets of a burst taken and not released yet.
    pub fn packets_of(&self, taken: &Taken) -> impl Iterator<Item = Packet<'_>> {
        let descriptors = self.reader.descriptors(taken.slot);
        descriptors.chunk_by(|a, b| a.packet == b.packet).map(|segments| Packet { subscription: self, segments })
    }

    /// Sleeps until the doorbell rings, the socket speaks, or `left` passes.
    fn wait(&self, left: Option<Duration>) -> Result<(), Error> {
        // Spin briefly first: a busy stream's next burst is microseconds away,
        // and the gateway rings the doorbell only for a consumer asleep.
        for _ in 0..SPINS {
            if !self.reader.is_empty() {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        if !self.reader.going_to_sleep() {
            return Ok(());
        }
        let mut fds = [PollFd::new(&self.doorbell, PollFlags::IN), PollFd::new(&self.socket, PollFlags::IN)];
        let timeout =
            left.map(|l| rustix::event::Timespec { tv_sec: l.as_secs() as i64, tv_nsec: i64::from(l.subsec_nanos()) });
        rustix::event::poll(&mut fds, timeout.as_ref())?;
        let (rang, spoke) = (!fds[0].revents().is_empty(), !fds[1].revents().is_empty());
        if rang {
            self.clear_doorbell();
        }
        if spoke && self.reader.is_empty() {
            return Err(self.why_ended());
        }
        Ok(())
    }

    #[cfg(feature = "tokio")]
    /// Whether no burst waits to be taken.
    pub(crate) fn try_next_is_none(&self) -> bool {
        self.reader.is_empty()
    }

    /// Reads the doorbell's count away (it is non-blocking).
    pub(crate) fn clear_doorbell(&self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.doorbell, &mut count);
    }

    /// What the socket says once it turned readable after the welcome: why
    /// the gateway ended the subscription.
    pub(crate) fn why_ended(&self) -> Error {
        match wire::receive(&self.socket) {
            Ok(Some((message, _))) => match parse(&message) {
                Ok(Answer::Ended { reason }) => Error::Ended(reason),
                Ok(other) => Error::Protocol(format!("unexpected {other:?}")),
                Err(e) => e,
            },
            Ok(None) => Error::Ended("the gateway closed the socket".into()),
            Err(e) => Error::Io(e),
        }
    }

    #[cfg(feature = "tokio")]
    /// Whether every burst delivered was taken, having said that this
    /// consumer is about to sleep on its doorbell (`false`: one came, take it).
    pub(crate) fn going_to_sleep(&self) -> bool {
        self.reader.going_to_sleep()
    }

    #[cfg(feature = "tokio")]
    /// The doorbell and the socket, for an event loop to wait on.
    pub(crate) fn wake_fds(&self) -> (&OwnedFd, &OwnedFd) {
        (&self.doorbell, &self.socket)
    }

    /// `len` bytes at `offset` of region `region`; `None` where the
    /// gateway named bytes outside what it mapped.
    fn memory(&self, region: u16, offset: u64, len: u32) -> Option<Memory<'_>> {
        let (_, region) = self.regions.iter().find(|(index, _)| *index == region)?;
        region.memory(offset, len)
    }
}

impl AsFd for Subscription {
    /// The doorbell: readable when a burst may be waiting, for an event loop.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.doorbell.as_fd()
    }
}

fn parse(message: &[u8]) -> Result<Answer, Error> {
    serde_json::from_slice(message).map_err(|e| Error::Protocol(e.to_string()))
}

/// A burst taken from the ring and not released yet, as a plain value.
#[derive(Debug, Clone, Copy)]
pub struct Taken {
    slot: u32,
    header: BurstHeader,
}

impl Taken {
    /// The gateway's port id and RX queue id.
    pub fn port_queue(&self) -> (u16, u16) {
        (self.header.port, self.header.queue)
    }

    /// The burst's number in the subscription.
    pub fn sequence(&self) -> u64 {
        self.header.sequence
    }

    /// Bursts dropped for this consumer, its ring full, just before this one.
    pub fn lost_before(&self) -> u64 {
        self.header.lost_before
    }

    /// Packets in the burst.
    pub fn len(&self) -> usize {
        self.header.packets as usize
    }

    /// Whether the burst has no packets.
    pub fn is_empty(&self) -> bool {
        self.header.packets == 0
    }

    /// When the gateway delivered it, in `CLOCK_MONOTONIC` nanoseconds
    /// (compare with [`crate::ring::monotonic_ns`]).
    pub fn delivered_ns(&self) -> u64 {
        self.header.delivered_ns
    }

    /// DAQIRI's burst flags ([`crate::ring::flags`]).
    pub fn flags(&self) -> u32 {
        self.header.flags
    }

    /// A reorder aggregate's batch id; `None` for other bursts.
    pub fn batch_id(&self) -> Option<u64> {
        Some(self.header.batch_id).filter(|&id| id != crate::ring::NO_BATCH)
    }

    /// A reorder aggregate's source packets (how many went into it); 0 for
    /// other bursts.
    pub fn source_packets(&self) -> u32 {
        self.header.source_packets
    }

    /// A reorder aggregate's slots; 0 for other bursts.
    pub fn aggregate_slots(&self) -> u32 {
        self.header.aggregate_slots
    }

    /// How many of a reorder aggregate's slots are empty (zero-filled);
    /// which, [`Burst::missing_slots`] tells.
    pub fn missing_count(&self) -> u32 {
        self.header.missing_slots
    }
}

/// One burst, in the gateway's memory; released when dropped.
#[derive(Debug)]
pub struct Burst<'s> {
    subscription: &'s Subscription,
    taken: Taken,
}

impl std::ops::Deref for Burst<'_> {
    type Target = Taken;
    fn deref(&self) -> &Taken {
        &self.taken
    }
}

impl Burst<'_> {
    /// The packets, in order.
    pub fn packets(&self) -> impl Iterator<Item = Packet<'_>> {
        self.subscription.packets_of(&self.taken)
    }

    /// A reorder aggregate's empty slots, lowest first (their packets never
    /// came; zero-filled): DAQIRI's `get_reorder_missing_info()`.
    pub fn missing_slots(&self) -> Vec<u32> {
        self.subscription.missing_slots(&self.taken)
    }
}

impl Drop for Burst<'_> {
    fn drop(&mut self) {
        self.subscription.release(self.taken);
    }
}

/// One packet of a burst.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'b> {
    subscription: &'b Subscription,
    segments: &'b [SegmentDescriptor],
}

impl<'b> Packet<'b> {
    /// The bytes of segment 0 (the whole packet unless header-data split).
    ///
    /// # Panics
    /// Where the packet lies in GPU memory, which the CPU cannot read: see
    /// [`memory`](Self::memory).
    pub fn data(&self) -> &'b [u8] {
        match self.memory(0) {
            None => &[],
            Some(Memory::Host(bytes)) => bytes,
            #[cfg(feature = "cuda")]
            Some(Memory::Gpu(_)) => panic!("the packet lies in GPU memory: read it with Packet::memory"),
        }
    }

    /// Segment `index`'s bytes, read in place; `None` where absent or in
    /// GPU memory (see [`memory`](Self::memory)).
    pub fn segment(&self, index: u16) -> Option<&'b [u8]> {
        match self.memory(index)? {
            Memory::Host(bytes) => Some(bytes),
            #[cfg(feature = "cuda")]
            Memory::Gpu(_) => None,
        }
    }

    /// Where segment `index` lies: host bytes, or GPU memory mapped in
    /// this process. `None` where absent (or where the gateway named bytes
    /// outside what it mapped).
    pub fn memory(&self, index: u16) -> Option<Memory<'b>> {
        let s = self.segments.iter().find(|s| s.segment == index)?;
        self.subscription.memory(s.region, s.offset, s.len)
    }

    /// The flow the packet matched.
    pub fn flow_id(&self) -> Option<u32> {
        self.segments.first().map(|s| s.flow_id).filter(|&id| id != u32::MAX)
    }

    /// Its receive timestamp in nanoseconds, where the NIC stamped it.
    pub fn timestamp(&self) -> Option<u64> {
        self.segments.first().map(|s| s.timestamp).filter(|&t| t != u64::MAX)
    }

    /// Its immediate (RDMA write or SEND with immediate), where it has one.
    pub fn immediate(&self) -> Option<u32> {
        self.segments.first().filter(|s| s.has & crate::ring::HAS_IMMEDIATE != 0).map(|s| s.immediate)
    }
}
