//! Worker threads: one generic loop that polls the queue tasks of a core,
//! one thread per named core.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::Backoff;

use crate::error::{Error, Result, Status};
use crate::queue::WorkerThread;
use crate::sleep::{SleepSet, idle};
use crate::state::EngineState;
use crate::task::Task;

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
/// idles while none moved a packet, then lets each task wind down. A task
/// alone that can block does so in its own poll; otherwise an idle worker
/// sleeps on what all its tasks name (`QueueTask::sleeps_on`), or spins
/// and naps where one cannot.
fn run(engine: &EngineState, mut tasks: Vec<Task>) {
    let wait = match &tasks[..] {
        [only] => only.max_wait,
        _ => None,
    };
    // The timeouts of partial bursts bound a sleep, as they bound a task's own wait.
    let longest_sleep = tasks.iter().filter_map(|t| t.max_wait).min().unwrap_or(crate::task::poll_interval([]));
    let mut sleep = SleepSet::default();
    let backoff = Backoff::new();
    while !engine.stopping() {
        if poll_all(engine, &mut tasks, wait) > 0 {
            backoff.reset();
        } else if wait.is_some() {
        } else if backoff.is_completed() && gather(engine, &tasks, &mut sleep) {
            // Armed: one more look, so a burst queued just before is not slept past.
            if poll_all(engine, &mut tasks, None) > 0 {
                backoff.reset();
            } else {
                sleep.sleep(longest_sleep);
            }
        } else {
            idle(&backoff);
        }
    }
    for task in &mut tasks {
        task.work.finish(&engine.ports[usize::from(task.port)]);
    }
}

fn poll_all(engine: &EngineState, tasks: &mut [Task], wait: Option<Duration>) -> usize {
    tasks.iter_mut().map(|t| t.work.poll(&engine.ports[usize::from(t.port)], wait)).sum()
}

/// Gathers what every task sleeps on; false when one cannot say.
fn gather(engine: &EngineState, tasks: &[Task], set: &mut SleepSet) -> bool {
    set.clear();
    tasks.iter().all(|t| t.work.sleeps_on(&engine.ports[usize::from(t.port)], set))
}

/// Files this thread under every queue its tasks serve.
fn record_worker(engine: &EngineState, tasks: &[Task], core: Option<u32>) {
    let thread = WorkerThread {
        name: std::thread::current().name().unwrap_or_default().to_owned(),
        tid: current_tid().unwrap_or(0),
        core,
    };
    for task in tasks {
        for &(direction, id) in &task.serves {
            if let Some(queue) = engine.ports[usize::from(task.port)].queue(direction, id) {
                let _ = queue.worker.set(thread.clone());
            }
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
                    tracing::warn!(worker = %name, core, "cannot pin to core {core}; running unpinned");
                }
                pinned
            });
            body(pinned);
        })
        .map_err(|e| Error::io(Status::InternalError, "cannot spawn worker thread", e))
}
