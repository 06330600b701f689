//! What the kernel has reserved in hugepages, from `/proc/meminfo`.

use std::fs;

/// Hugepage counters of the default hugepage size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugepageInfo {
    /// Size of one page in bytes (`Hugepagesize`).
    pub page_size: u64,
    /// Pages reserved (`HugePages_Total`).
    pub total: u64,
    /// Pages not yet mapped (`HugePages_Free`).
    pub free: u64,
}

impl HugepageInfo {
    /// Reads `/proc/meminfo`; `None` when the kernel has no hugepage support.
    pub fn read() -> Option<Self> {
        Self::parse(&fs::read_to_string("/proc/meminfo").ok()?)
    }

    fn parse(meminfo: &str) -> Option<Self> {
        let field = |name: &str| -> Option<u64> {
            let line = meminfo.lines().find(|l| l.starts_with(name))?;
            line[name.len()..].split_whitespace().next()?.parse().ok()
        };
        Some(Self {
            page_size: field("Hugepagesize:")? * 1024,
            total: field("HugePages_Total:")?,
            free: field("HugePages_Free:")?,
        })
    }

    /// Pages needed to hold `bytes`.
    pub fn pages_for(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.page_size)
    }

    /// How to reserve `pages` more pages, for error messages.
    pub fn how_to_reserve(&self, pages: u64) -> String {
        format!(
            "reserve them with `echo {} > /proc/sys/vm/nr_hugepages` (as root) or `sysctl vm.nr_hugepages={}`",
            self.total + pages,
            self.total + pages
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_meminfo() {
        let info = HugepageInfo::parse(
            "MemTotal: 1 kB\nHugePages_Total:      64\nHugePages_Free:       60\nHugepagesize:       2048 kB\n",
        )
        .unwrap();
        assert_eq!(info, HugepageInfo { page_size: 2 << 20, total: 64, free: 60 });
        assert_eq!(info.pages_for((2 << 20) + 1), 2);
        assert!(info.how_to_reserve(4).contains("echo 68 > /proc/sys/vm/nr_hugepages"));
    }
}
