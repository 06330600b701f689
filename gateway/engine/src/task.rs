//! The contract between a backend and the workers: a queue task (an RX
//! poll or a TX send) with the core it runs on. A backend hands its tasks
//! over; [`crate::worker`] runs them, one thread per named core.

use std::time::Duration;

use crate::direction::Direction;
use crate::port::Port;
use crate::queue::Queue;
use crate::sleep::SleepSet;

/// The packets a sender takes from its ring in one poll (whole bursts, so
/// one burst larger than this goes at once) before it gives its core's other
/// tasks their turn. A sender whose wire always takes what it is given (a PMD
/// that sends at once, like `net_af_packet`, or the software loopback) would
/// otherwise keep its worker as long as the application keeps up, and a
/// receiver on that core would neither receive nor count its NIC's drops.
pub(crate) const SENDER_POLL_BUDGET: usize = 1024;

/// One queue's share of a worker: an RX poll (receive, steer, assemble) or a
/// TX send (drain the ring onto the wire). Tasks never block longer than the
/// `wait` they are given, so queues that share a core share a thread.
pub(crate) trait QueueTask: Send {
    /// Moves what is ready; returns the packets moved. With `wait`, a task
    /// with nothing ready may block in the kernel up to that long (only a
    /// task alone on its worker is given one).
    fn poll(&mut self, port: &Port, wait: Option<Duration>) -> usize;

    /// Adds to `set` what this task's next work will wake: its socket, its
    /// queue's doorbell (armed). Whether it could: a task whose work can
    /// come unannounced (a ring fed by memory, a burst held back, pacing)
    /// answers false and its worker keeps polling.
    fn sleeps_on(&self, port: &Port, set: &mut SleepSet) -> bool {
        let _ = (port, set);
        false
    }

    /// Winds down once the engine stops: delivers or gives back what it holds.
    fn finish(&mut self, port: &Port) {
        let _ = port;
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
    /// The port whose queues these are; the task polls with it.
    pub(crate) port: u16,
    /// The queues whose work this is: (direction, queue id) of `port`.
    /// Each records the worker that runs it, for the status.
    pub(crate) serves: Vec<(Direction, u16)>,
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
            port: port.id,
            serves: vec![(Direction::Rx, queue.id)],
            work,
        }
    }

    /// The receive task of a port whose RX queues all share one source (a
    /// socket) and so one worker: on the first RX queue's core, which the
    /// config must give every RX queue (`support` refuses others by path).
    pub(crate) fn port_receiver(port: &Port, work: Box<dyn QueueTask>) -> Self {
        let core = port.rx.first().and_then(|q| q.cpu_core);
        let serves = port.rx.iter().map(|q| (Direction::Rx, q.id)).collect();
        Self {
            name: format!("rx-{}", port.name),
            core,
            max_wait: Some(poll_interval(&port.rx)),
            port: port.id,
            serves,
            work,
        }
    }

    /// The send task of TX queue `queue` of `port`.
    pub(crate) fn sender(port: &Port, queue: &Queue, work: Box<dyn QueueTask>) -> Self {
        Self {
            name: format!("tx-{}-{}", port.name, queue.id),
            core: queue.cpu_core,
            max_wait: None,
            port: port.id,
            serves: vec![(Direction::Tx, queue.id)],
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

/// What a sender whose only work is its ring's bursts sleeps on: the
/// queue's doorbell, unless a pacer holds bursts back by time.
pub(crate) fn sender_sleeps_on(queue: &Queue, paced: bool, set: &mut SleepSet) -> bool {
    let Some(doorbell) = queue.doorbell().filter(|_| !paced) else { return false };
    set.doorbell(doorbell);
    true
}

/// How long a worker may block in the kernel before it must look at its
/// timeouts and the shutdown flag again.
pub(crate) fn poll_interval<'q>(queues: impl IntoIterator<Item = &'q Queue>) -> Duration {
    let shortest = queues.into_iter().filter_map(|q| q.timeout).min().unwrap_or(Duration::from_millis(10));
    shortest.clamp(Duration::from_micros(50), Duration::from_millis(10))
}
