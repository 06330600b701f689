//! What the kernel shows of an RDMA device port under
//! `/sys/class/infiniband`: its GID table (which entry is our address's
//! RoCE v2 one) and its hardware counters. Verbs have no call for a GID's
//! type in rdma-core 44's stable API, and the counters are sysfs only.

use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;

fn port_dir(device: &str, port: u8) -> PathBuf {
    PathBuf::from("/sys/class/infiniband").join(device).join("ports").join(port.to_string())
}

/// The RoCE GID of `ip`: an IPv4 address in its IPv4-mapped form.
pub(super) fn gid_of(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The index of `ip`'s RoCE v2 entry in the GID table of `device`'s `port`.
pub(super) fn roce_v2_gid_index(device: &str, port: u8, ip: IpAddr) -> io::Result<u8> {
    let dir = port_dir(device, port);
    let wanted = gid_of(ip);
    let entries = std::fs::read_dir(dir.join("gids"))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.join("gids").display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(index) = name.to_str().and_then(|n| n.parse::<u8>().ok()) else { continue };
        let gid = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if gid.trim().parse::<Ipv6Addr>().ok() != Some(wanted) {
            continue;
        }
        let kind = std::fs::read_to_string(dir.join("gid_attrs/types").join(index.to_string())).unwrap_or_default();
        if kind.trim() == "RoCE v2" {
            return Ok(index);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{device} port {port} has no RoCE v2 GID for {ip} (is the address on the device's netdev?)"),
    ))
}

/// The port's hardware counters by the driver's names (`rcvd_seq_err`,
/// `out_of_sequence`, `rcvd_pkts` ...); none if the driver has none.
pub(super) fn hw_counters(device: &str, port: u8) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(port_dir(device, port).join("hw_counters")) else { return Vec::new() };
    let mut counters: Vec<(String, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let value = std::fs::read_to_string(e.path()).ok()?.trim().parse().ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), value))
        })
        .collect();
    counters.sort();
    counters
}
