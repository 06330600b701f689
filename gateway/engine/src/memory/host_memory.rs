//! How much plain memory this process may still take: the kernel's
//! `MemAvailable`, lowered to what the cgroup's limit leaves when the
//! process runs in one (a container). Host regions are populated when they
//! are mapped, so a pool beyond this is killed by the OOM killer rather than
//! refused by `mmap`.

use std::fs;
use std::path::Path;

/// Memory this process can still allocate, and what limits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostMemory {
    /// Bytes available.
    pub available: u64,
    /// `MemAvailable` or the cgroup limit, whichever is lower.
    pub limited_by: MemoryLimit,
}

/// What sets [`HostMemory::available`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The kernel's estimate of memory available without swapping.
    MemAvailable,
    /// The cgroup's `memory.max` (v2) or `memory.limit_in_bytes` (v1), less its usage.
    Cgroup,
}

impl MemoryLimit {
    /// How messages name it.
    pub const fn describe(self) -> &'static str {
        match self {
            MemoryLimit::MemAvailable => "MemAvailable in /proc/meminfo",
            MemoryLimit::Cgroup => "the container's cgroup memory limit less its usage",
        }
    }
}

impl HostMemory {
    /// Reads `/proc/meminfo` and this process's cgroup; `None` when the
    /// kernel reports no `MemAvailable`.
    pub fn read() -> Option<Self> {
        let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
        Some(Self::from_parts(mem_available(&meminfo)?, cgroup_headroom()))
    }

    fn from_parts(mem_available: u64, cgroup_headroom: Option<u64>) -> Self {
        match cgroup_headroom {
            Some(headroom) if headroom < mem_available => Self { available: headroom, limited_by: MemoryLimit::Cgroup },
            _ => Self { available: mem_available, limited_by: MemoryLimit::MemAvailable },
        }
    }
}

fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line["MemAvailable:".len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The cgroup limit less its usage; `None` without a limit.
fn cgroup_headroom() -> Option<u64> {
    let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroup_headroom_under(Path::new("/sys/fs/cgroup"), &membership)
}

/// The least headroom of this process's memory cgroup and its ancestors
/// (a parent's limit binds its children), under the cgroup mount `root`.
/// A v1 (or hybrid) kernel lists the memory controller on a line of its
/// own (`4:memory:/docker/x`), and also prints a `0::` line for the
/// unified hierarchy, which then holds no memory controller: the v1 line
/// decides. A pure v2 kernel has only `0::/path`.
fn cgroup_headroom_under(root: &Path, membership: &str) -> Option<u64> {
    let v1 = membership.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "memory").then_some(path)
    });
    match v1 {
        Some(path) => least_headroom(
            &root.join("memory"),
            path,
            &[
                ("memory.limit_in_bytes", "memory.usage_in_bytes"),
                ("memory.memsw.limit_in_bytes", "memory.memsw.usage_in_bytes"),
            ],
        ),
        None => {
            let path = membership.lines().find_map(|l| l.strip_prefix("0::"))?;
            least_headroom(root, path, &[("memory.max", "memory.current")])
        }
    }
}

/// The least `limit - usage` over the cgroup at `path` below `mount` and
/// each of its ancestors, for each (limit, usage) file pair. Inside a
/// container the mount's root may already be the process's own cgroup
/// while `/proc/self/cgroup` names the host's path: a path that does not
/// exist under the mount is taken as the mount's root.
fn least_headroom(mount: &Path, path: &str, files: &[(&str, &str)]) -> Option<u64> {
    let mut dir = mount.join(path.trim_start_matches('/'));
    if !dir.is_dir() {
        dir = mount.to_path_buf();
    }
    let read = |dir: &Path, file: &str| fs::read_to_string(dir.join(file)).ok();
    let mut least: Option<u64> = None;
    loop {
        for (limit, usage) in files {
            if let (Some(limit), Some(usage)) = (read(&dir, limit), read(&dir, usage))
                && let Some(room) = headroom(&limit, &usage)
            {
                least = Some(least.map_or(room, |l| l.min(room)));
            }
        }
        if dir == mount || !dir.pop() || !dir.starts_with(mount) {
            return least;
        }
    }
}

/// `limit - usage`; `None` when unlimited (`max`, or v1's near-`u64::MAX`).
fn headroom(limit: &str, usage: &str) -> Option<u64> {
    let limit: u64 = limit.trim().parse().ok()?;
    if limit >= 1 << 62 {
        return None;
    }
    let usage: u64 = usage.trim().parse().ok()?;
    Some(limit.saturating_sub(usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        assert_eq!(mem_available("MemTotal: 9 kB\nMemAvailable:    2048 kB\n"), Some(2 << 20));
        assert_eq!(mem_available("MemTotal: 9 kB\n"), None);
    }

    #[test]
    fn the_lower_of_meminfo_and_the_cgroup_wins() {
        assert_eq!(HostMemory::from_parts(100, Some(40)).limited_by, MemoryLimit::Cgroup);
        assert_eq!(
            HostMemory::from_parts(100, Some(400)),
            HostMemory { available: 100, limited_by: MemoryLimit::MemAvailable }
        );
        assert_eq!(HostMemory::from_parts(100, None).available, 100);
    }

    /// A cgroup mount under a temporary folder: `files` are (path, contents).
    fn mount(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let file = root.path().join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, text).unwrap();
        }
        root
    }

    #[test]
    fn a_v1_limit_is_read_though_the_kernel_also_prints_a_unified_line() {
        // A hybrid kernel's /proc/self/cgroup: the `0::` line comes first.
        let membership = "0::/docker/x\n7:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n";
        let root = mount(&[
            ("memory/docker/x/memory.limit_in_bytes", "1073741824\n"),
            ("memory/docker/x/memory.usage_in_bytes", "104857600\n"),
            ("memory/memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory/memory.usage_in_bytes", "5\n"),
        ]);
        assert_eq!(cgroup_headroom_under(root.path(), membership), Some((1 << 30) - 100 * (1 << 20)));
    }

    #[test]
    fn a_parents_limit_binds_and_a_container_sees_its_own_cgroup_at_the_root() {
        // v2: the limit is on the parent (a Kubernetes pod), not the container.
        let root = mount(&[
            ("kubepods/pod1/memory.max", "2147483648\n"),
            ("kubepods/pod1/memory.current", "1073741824\n"),
            ("kubepods/pod1/c1/memory.max", "max\n"),
            ("kubepods/pod1/c1/memory.current", "1000\n"),
        ]);
        assert_eq!(cgroup_headroom_under(root.path(), "0::/kubepods/pod1/c1\n"), Some(1 << 30));
        // A v1 container without a cgroup namespace: its own cgroup is the mount's root.
        let root = mount(&[("memory/memory.limit_in_bytes", "2048\n"), ("memory/memory.usage_in_bytes", "48\n")]);
        assert_eq!(cgroup_headroom_under(root.path(), "4:memory:/docker/abc\n"), Some(2000));
        // memsw (memory and swap) binds too, when lower.
        let root = mount(&[
            ("memory/memory.limit_in_bytes", "4096\n"),
            ("memory/memory.usage_in_bytes", "0\n"),
            ("memory/memory.memsw.limit_in_bytes", "3000\n"),
            ("memory/memory.memsw.usage_in_bytes", "1000\n"),
        ]);
        assert_eq!(cgroup_headroom_under(root.path(), "4:memory:/\n"), Some(2000));
        assert_eq!(cgroup_headroom_under(root.path(), "0::/\n"), None, "no v2 files: no limit");
    }

    #[test]
    fn headroom_is_limit_less_usage_and_none_when_unlimited() {
        assert_eq!(headroom("max\n", "100\n"), None);
        assert_eq!(headroom("9223372036854771712\n", "100\n"), None, "v1 reports no limit as a near-max value");
        assert_eq!(headroom("3221225472\n", "1073741824\n"), Some(2 << 30));
        assert_eq!(headroom("100\n", "200\n"), Some(0));
    }
}
