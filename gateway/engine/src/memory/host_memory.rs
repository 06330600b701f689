//! How much plain memory this process may still take: the kernel's
//! `MemAvailable`, lowered to what the cgroup's limit leaves when the
//! process runs in one (a container). Host regions are populated when they
//! are mapped, so a pool beyond this is killed by the OOM killer rather than
//! refused by `mmap`.

use std::fs;
use std::path::PathBuf;

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
    let read = |path: PathBuf| fs::read_to_string(path).ok();
    if let Some(dir) = cgroup_v2_dir(&membership) {
        let dir = PathBuf::from("/sys/fs/cgroup").join(dir);
        return headroom(&read(dir.join("memory.max"))?, &read(dir.join("memory.current"))?);
    }
    let v1 = PathBuf::from("/sys/fs/cgroup/memory");
    headroom(&read(v1.join("memory.limit_in_bytes"))?, &read(v1.join("memory.usage_in_bytes"))?)
}

/// The unified hierarchy's path of this process (`0::/kubepods/...`), relative.
fn cgroup_v2_dir(membership: &str) -> Option<&str> {
    membership.lines().find_map(|l| l.strip_prefix("0::")).map(|p| p.trim_start_matches('/'))
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

    #[test]
    fn cgroup_limits_are_read_from_both_hierarchies() {
        assert_eq!(cgroup_v2_dir("0::/kubepods/pod1/c1\n"), Some("kubepods/pod1/c1"));
        assert_eq!(cgroup_v2_dir("4:memory:/docker/x\n"), None);
        assert_eq!(headroom("max\n", "100\n"), None);
        assert_eq!(headroom("9223372036854771712\n", "100\n"), None, "v1 reports no limit as a near-max value");
        assert_eq!(headroom("3221225472\n", "1073741824\n"), Some(2 << 30));
        assert_eq!(headroom("100\n", "200\n"), Some(0));
    }
}
