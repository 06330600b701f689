//! Worker threads: one generic loop that polls the queue tasks of a core,
//! and the assembly of packets into bursts with DAQIRI's `batch_size` /
//! `timeout_us` semantics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::burst::{Burst, PacketSlot};
use crate::error::{Error, Result, Status};
use crate::memory::RegionTable;
use crate::port::Port;
use crate::queue::{Direction, Queue};
use crate::reorder::Reorderer;
use crate::state::EngineState;
use crate::stats::DropReason;

/// One queue's share of a worker: an RX poll (receive, steer, assemble) or a
/// TX send (drain the ring onto the wire). Tasks never block longer than the
/// `wait` they are given, so queues that share a core share a thread.
pub(crate) trait QueueTask: Send {
    /// Moves what is ready; returns the packets moved. With `wait`, a task
    /// with nothing ready may block in the kernel up to that long (only a
    /// task alone on its worker is given one).
    fn poll(&mut self, engine: &EngineState, wait: Option<Duration>) -> usize;

    /// Winds down once the engine stops: delivers or gives back what it holds.
    fn finish(&mut self, engine: &EngineState) {
        let _ = engine;
    }
}

/// A task with where and how it runs.
pub(crate) struct Task {
    /// Names the worker thread when the task runs alone (`rx-<port>-<queue>`, `tx-<port>-<queue>`).
    pub(crate) name: String,
    /// The queue's `cpu_core`; tasks of one core share its worker.
    pub(crate) core: Option<u32>,
    /// How long the task may block when alone on its worker; `None` for
    /// tasks that cannot (a ring has nothing to wait on).
    pub(crate) max_wait: Option<Duration>,
    /// The queues whose work this is: (port, direction, queue id). Each
    /// records the worker that runs it, for the status.
    pub(crate) serves: Vec<(u16, Direction, u16)>,
    pub(crate) work: Box<dyn QueueTask>,
}

impl Task {
    /// The receive task of RX queue `queue` of `port`, on the queue's core;
    /// alone there, it may wait in the kernel up to the queue's poll interval.
    pub(crate) fn receiver(port: &Port, queue: &Queue, work: Box<dyn QueueTask>) -> Self {
        Self {
            name: format!("rx-{}-{}", port.name, queue.id),
            core: queue.cpu_core,
            max_wait: Some(poll_interval([queue])),
            serves: vec![(port.id, Direction::Rx, queue.id)],
            work,
        }
    }

    /// The receive task of a port whose RX queues all share one source (a
    /// socket) and so one worker: on the first RX queue's core, which the
    /// config must give every RX queue (`support` refuses others by path).
    pub(crate) fn port_receiver(port: &Port, work: Box<dyn QueueTask>) -> Self {
        let core = port.rx.first().and_then(|q| q.cpu_core);
        let serves = port.rx.iter().map(|q| (port.id, Direction::Rx, q.id)).collect();
        Self { name: format!("rx-{}", port.name), core, max_wait: Some(poll_interval(&port.rx)), serves, work }
    }

    /// The send task of TX queue `queue` of `port`.
    pub(crate) fn sender(port: &Port, queue: &Queue, work: Box<dyn QueueTask>) -> Self {
        Self {
            name: format!("tx-{}-{}", port.name, queue.id),
            core: queue.cpu_core,
            max_wait: None,
            serves: vec![(port.id, Direction::Tx, queue.id)],
            work,
        }
    }

    /// A task that never blocks: a poll-mode driver or a ring has nothing
    /// to wait on in the kernel.
    pub(crate) fn polling(mut self) -> Self {
        self.max_wait = None;
        self
    }
}

/// The thread that runs a queue's work, as `/api/v1/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerThread {
    /// Thread name (`rx-<interface>-<queue>`, `tx-...`, or `core-<n>` when
    /// queues share the core).
    pub name: String,
    /// Kernel thread id (`/proc/<pid>/task/<tid>`).
    pub tid: u32,
    /// The core it is pinned to; `None` when it runs unpinned.
    pub core: Option<u32>,
}

/// Starts the workers for every port's tasks: one per `cpu_core` (as in
/// DAQIRI, queues of any port that name the same core share its thread), and
/// one each for tasks without a core.
pub(crate) fn start(engine: &Arc<EngineState>, tasks: Vec<Task>) -> Result<Vec<JoinHandle<()>>> {
    let mut by_core: BTreeMap<u32, Vec<Task>> = BTreeMap::new();
    let mut groups = Vec::new();
    for task in tasks {
        match task.core {
            Some(core) => by_core.entry(core).or_default().push(task),
            None => groups.push((None, vec![task])),
        }
    }
    groups.extend(by_core.into_iter().map(|(core, tasks)| (Some(core), tasks)));
    // Each worker says when it has filed itself under its queues, so the
    // status shows every queue's thread as soon as the engine is up.
    let (started, filed) = std::sync::mpsc::channel();
    let handles = groups
        .into_iter()
        .map(|(core, tasks)| {
            let name = match (&tasks[..], core) {
                ([only], _) => only.name.clone(),
                (_, Some(core)) => format!("core-{core}"),
                (_, None) => unreachable!("tasks without a core run alone"),
            };
            let (engine, started) = (Arc::clone(engine), started.clone());
            spawn(name, core, move |pinned| {
                record_worker(&engine, &tasks, pinned);
                let _ = started.send(());
                drop(started);
                run(&engine, tasks)
            })
        })
        .collect::<Result<Vec<_>>>()?;
    drop(started);
    // Ends once every worker has sent and dropped its sender (or died).
    while filed.recv().is_ok() {}
    Ok(handles)
}

/// The generic worker loop: polls each task in turn until the engine stops,
/// idles while none moved a packet, then lets each task wind down.
fn run(engine: &EngineState, mut tasks: Vec<Task>) {
    let wait = match &tasks[..] {
        [only] => only.max_wait,
        _ => None,
    };
    let backoff = Backoff::new();
    while !engine.stopping() {
        let moved: usize = tasks.iter_mut().map(|t| t.work.poll(engine, wait)).sum();
        if moved > 0 {
            backoff.reset();
        } else if wait.is_none() {
            idle(&backoff);
        }
    }
    for task in &mut tasks {
        task.work.finish(engine);
    }
}

/// Files this thread under every queue its tasks serve.
fn record_worker(engine: &EngineState, tasks: &[Task], core: Option<u32>) {
    let thread = WorkerThread {
        name: std::thread::current().name().unwrap_or_default().to_owned(),
        tid: current_tid().unwrap_or(0),
        core,
    };
    for &(port, direction, id) in tasks.iter().flat_map(|t| &t.serves) {
        if let Some(queue) = engine.ports[usize::from(port)].queue(direction, id) {
            let _ = queue.worker.set(thread.clone());
        }
    }
}

/// This thread's kernel id, read from `/proc/thread-self` (std has no gettid).
fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Spawns a named worker, pinned to `core` when this machine has it; the
/// body learns the core it is pinned to.
fn spawn(name: String, core: Option<u32>, body: impl FnOnce(Option<u32>) + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let pinned = core.filter(|&core| {
                let pinned = core_affinity::set_for_current(core_affinity::CoreId { id: core as usize });
                if !pinned {
                    tracing::warn!(worker = %name, core, "cannot pin to core {core} (this machine has {}); running unpinned", crate::preflight::available_cores());
                }
                pinned
            });
            body(pinned);
        })
        .map_err(|e| Error::io(Status::InternalError, "cannot spawn worker thread", e))
}

/// How long a worker may block in the kernel before it must look at its
/// timeouts and the shutdown flag again.
pub(crate) fn poll_interval<'q>(queues: impl IntoIterator<Item = &'q Queue>) -> Duration {
    let shortest = queues.into_iter().filter_map(|q| q.timeout).min().unwrap_or(Duration::from_millis(10));
    shortest.clamp(Duration::from_micros(50), Duration::from_millis(10))
}

/// Collects packets for one RX queue into bursts of `batch_size`, delivering
/// a partial burst once `timeout_us` has passed since its first packet. It
/// holds no borrow of its queue, so a poller that outlives one call (direct
/// mode) can keep it.
#[derive(Debug)]
pub(crate) struct Assembler {
    pending: Option<Burst>,
    started: Instant,
    /// Byte streams: a full burst the ring had no room for, handed over first.
    stalled: Option<Burst>,
    /// The queue's reorder plans, which take their flows' packets.
    reorder: Option<Reorderer>,
}

impl Assembler {
    /// The assembler of RX queue `queue`.
    pub(crate) fn new(queue: &Queue) -> Self {
        let reorder = (!queue.plans.is_empty()).then(|| Reorderer::new(&queue.plans));
        Self { pending: None, started: Instant::now(), stalled: None, reorder }
    }

    /// Adds a packet for `queue`; a full burst is delivered at once. Without
    /// a free metadata entry the packet is dropped and counted. A packet of
    /// a reordered flow goes to its plan instead.
    pub(crate) fn push(&mut self, queue: &Queue, slot: PacketSlot, regions: &RegionTable) {
        let slot = match &mut self.reorder {
            Some(reorder) => match reorder.accept(queue, slot, regions) {
                Some(slot) => slot,
                None => return,
            },
            None => slot,
        };
        if self.pending.is_none() {
            match queue.meta.take() {
                Some(burst) => {
                    self.pending = Some(burst);
                    self.started = Instant::now();
                }
                None => {
                    slot.release(regions, &queue.segment_regions);
                    queue.stats.dropped(DropReason::NoFreeBurstBuffers, 1);
                    return;
                }
            }
        }
        let burst = self.pending.as_mut().expect("set above");
        burst.push(slot);
        if burst.is_full() {
            queue.deliver(self.pending.take().expect("set above"));
        }
    }

    /// Delivers a partial burst, and emits batches, whose timeout has passed.
    pub(crate) fn flush_if_due(&mut self, queue: &Queue, now: Instant, regions: &RegionTable) {
        if let (Some(timeout), Some(_)) = (queue.timeout, &self.pending)
            && now.duration_since(self.started) >= timeout
        {
            self.flush(queue);
        }
        if let Some(reorder) = &mut self.reorder {
            reorder.flush_due(queue, now, regions);
        }
    }

    /// Delivers whatever is pending (direct mode after each poll).
    pub(crate) fn flush(&mut self, queue: &Queue) {
        if let Some(burst) = self.pending.take() {
            queue.deliver(burst);
        }
    }

    /// At stop: delivers the partial burst and every open batch, so what
    /// arrived before the stop stays readable.
    pub(crate) fn finish(&mut self, queue: &Queue, regions: &RegionTable) {
        self.flush(queue);
        if let Some(reorder) = &mut self.reorder {
            reorder.flush_all(queue, regions);
        }
    }

    /// Byte streams never drop: whether a packet can be taken now. A burst
    /// the ring had no room for is retried first, then a metadata entry must
    /// be at hand. While this says no the stream is not read, and TCP flow
    /// control slows the sender.
    pub(crate) fn ready_lossless(&mut self, queue: &Queue) -> bool {
        if !self.retry_stalled(queue) {
            return false;
        }
        if self.pending.is_none() {
            let Some(burst) = queue.meta.take() else { return false };
            self.pending = Some(burst);
            self.started = Instant::now();
        }
        true
    }

    /// Adds a packet of a byte stream; call only after [`ready_lossless`](Self::ready_lossless).
    pub(crate) fn push_lossless(&mut self, queue: &Queue, slot: PacketSlot) {
        let burst = self.pending.as_mut().expect("ready_lossless took a metadata entry");
        burst.push(slot);
        if burst.is_full() {
            self.hand_over_lossless(queue);
        }
    }

    /// Hands over what is pending, keeping it for a retry if the ring is full.
    pub(crate) fn flush_lossless(&mut self, queue: &Queue) {
        if self.retry_stalled(queue) {
            self.hand_over_lossless(queue);
        }
    }

    /// Hands over a partial burst of a stream once its timeout has passed.
    pub(crate) fn flush_if_due_lossless(&mut self, queue: &Queue, now: Instant) {
        if let (Some(timeout), Some(_)) = (queue.timeout, &self.pending)
            && now.duration_since(self.started) >= timeout
        {
            self.flush_lossless(queue);
        }
    }

    /// At stop: what no ring had room for is dropped and counted.
    pub(crate) fn abandon(&mut self, queue: &Queue) {
        let packets: usize = self.stalled.take().into_iter().chain(self.pending.take()).map(|b| b.num_packets()).sum();
        if packets > 0 {
            queue.stats.dropped(DropReason::RingFull, packets as u64);
        }
    }

    fn hand_over_lossless(&mut self, queue: &Queue) {
        if let Some(burst) = self.pending.take() {
            self.stalled = queue.try_deliver(burst).err();
        }
    }

    /// Retries a stalled burst; whether none is left.
    fn retry_stalled(&mut self, queue: &Queue) -> bool {
        match self.stalled.take() {
            None => true,
            Some(burst) => {
                self.stalled = queue.try_deliver(burst).err();
                self.stalled.is_none()
            }
        }
    }
}

/// Hands over what each of a port's RX assemblers has due (partial bursts,
/// batches) at `now`.
pub(crate) fn flush_due(assemblers: &mut [Assembler], rx: &[Queue], now: Instant, regions: &RegionTable) {
    for (assembler, queue) in assemblers.iter_mut().zip(rx) {
        assembler.flush_if_due(queue, now, regions);
    }
}

/// At stop: hands over everything a port's RX assemblers hold.
pub(crate) fn finish_all(assemblers: &mut [Assembler], rx: &[Queue], regions: &RegionTable) {
    for (assembler, queue) in assemblers.iter_mut().zip(rx) {
        assembler.finish(queue, regions);
    }
}

/// Spins briefly, then sleeps, while a worker has nothing to do.
pub(crate) fn idle(backoff: &Backoff) {
    if backoff.is_completed() {
        std::thread::sleep(Duration::from_micros(50));
    } else {
        backoff.snooze();
    }
}
