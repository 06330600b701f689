//! The cores a config pins its threads to, against the cores this process
//! may run on (its affinity mask: a cgroup's cpuset, `taskset`, a
//! Kubernetes CPU manager's exclusive set).
//!
//! A `cpu_core` or `master_core` outside that set cannot be honoured: the
//! thread would run unpinned, sharing cores with everything else, which is
//! the latency a pinned config was written to avoid. So the engine refuses
//! it by path, unless the user allows unpinned threads for a config written
//! for another host (`allow_unpinned_cores`, `DAQIRI_ALLOW_UNPINNED_CORES=1`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use daqiri_config::{ValidConfig, YamlPath};

use crate::error::{Error, Status};

/// The environment variable that allows unpinned threads (`1` or `true`).
pub const ALLOW_UNPINNED_CORES_ENV: &str = "DAQIRI_ALLOW_UNPINNED_CORES";

static ALLOWED_BY_CALLER: AtomicBool = AtomicBool::new(false);

/// Lets engines started from now on run a thread whose core this process
/// lacks, unpinned (with a warning), instead of refusing the config.
pub fn allow_unpinned_cores(allow: bool) {
    ALLOWED_BY_CALLER.store(allow, Ordering::Relaxed);
}

/// Whether unpinned threads are allowed, by the caller or the environment.
pub fn unpinned_cores_allowed() -> bool {
    ALLOWED_BY_CALLER.load(Ordering::Relaxed)
        || std::env::var(ALLOW_UNPINNED_CORES_ENV).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
}

/// The cores this process may run on.
pub fn allowed_cores() -> BTreeSet<usize> {
    core_affinity::get_core_ids().map_or_else(|| BTreeSet::from([0]), |ids| ids.into_iter().map(|c| c.id).collect())
}

/// Cores this process may run on, as a count.
pub fn available_cores() -> usize {
    allowed_cores().len()
}

/// Every `cpu_core` and `master_core` of `config` outside `allowed`, by path.
pub(crate) fn absent_cores(config: &ValidConfig, allowed: &BTreeSet<usize>) -> Vec<(YamlPath, String)> {
    let here = describe(allowed);
    let mut out = Vec::new();
    let mut check = |path: YamlPath, core: u32| {
        if !allowed.contains(&(core as usize)) {
            out.push((path, format!("core {core} is not one this process may run on ({here})")));
        }
    };
    if let Some(master) = config.config().master_core {
        check(YamlPath::cfg().key("master_core"), master.0);
    }
    let interfaces = YamlPath::cfg().key("interfaces");
    for (port, iface) in config.interfaces() {
        for (dir, queues) in [("rx", iface.rx_queues()), ("tx", iface.tx_queues())] {
            for (i, core) in queues.iter().enumerate().filter_map(|(i, q)| Some((i, q.pinned_core()?))) {
                check(interfaces.index(port).key(dir).key("queues").index(i).key("cpu_core"), core.0);
            }
        }
    }
    out
}

/// `Err(NOT_SUPPORTED)` naming every core of `config` this process lacks,
/// unless unpinned threads are allowed.
pub(crate) fn require_present_cores(config: &ValidConfig) -> Result<(), Error> {
    let absent = absent_cores(config, &allowed_cores());
    if absent.is_empty() || unpinned_cores_allowed() {
        return Ok(());
    }
    let lines: Vec<String> = absent.iter().map(|(path, why)| format!("  {path}: {why}")).collect();
    Err(Error::new(
        Status::NotSupported,
        format!(
            "{} thread(s) would run unpinned:\n{}\nname cores from that set, or allow unpinned threads ({ALLOW_UNPINNED_CORES_ENV}=1, or daqiri-gateway run --allow-unpinned-cores)",
            absent.len(),
            lines.join("\n")
        ),
    ))
}

/// `0-3,8` for a set of cores.
fn describe(cores: &BTreeSet<usize>) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &core in cores {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == core => *end = core,
            _ => runs.push((core, core)),
        }
    }
    let runs: Vec<String> =
        runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    format!("cores {}", runs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_set_reads_as_runs() {
        assert_eq!(describe(&BTreeSet::from([0, 1, 2, 3, 8, 10, 11])), "cores 0-3,8,10-11");
        assert_eq!(describe(&BTreeSet::from([5])), "cores 5");
    }
}
