//! What DAQIRI's RDMA bench gives its RoCE ports in code, read from its
//! config's tool sections so that `daqiri_bench_rdma_tx_rx.yaml` runs here
//! as it does there. Its queues name no memory regions and its client has
//! no `remote_addr`: the bench application posts buffers of the regions
//! named for each side and direction (`DATA_RX_GPU_SERVER`,
//! `DATA_TX_GPU_CLIENT`, ...) and connects its client to
//! `rdma_bench_client`'s `server_address:server_port`. Each key filled in
//! is a warning naming its path and where it came from, never silent.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::diagnostic::{Report, YamlPath};
use crate::endpoint::{Endpoint, Transport};
use crate::model::{EngineConfig, Interface, SocketMode};

/// The bench's sections, by the role they configure.
const SERVER_SECTION: &str = "rdma_bench_server";
const CLIENT_SECTION: &str = "rdma_bench_client";

/// Fills what the bench would supply into `config`'s RoCE interfaces, when
/// the document carries the bench's sections; each fill is a warning.
pub(crate) fn fill_from_bench(config: &mut EngineConfig, sections: &BTreeMap<String, serde_yaml::Value>) -> Report {
    let mut notes = Report::default();
    if !sections.contains_key(SERVER_SECTION) && !sections.contains_key(CLIENT_SECTION) {
        return notes;
    }
    let region_names: Vec<String> = config.memory_regions.iter().map(|r| r.name.clone()).collect();
    for (i, iface) in config.interfaces.iter_mut().enumerate() {
        let Some(mode) = roce_mode(iface) else { continue };
        let path = YamlPath::cfg().key("interfaces").index(i);
        if mode == SocketMode::Client {
            fill_remote(iface, sections.get(CLIENT_SECTION), &path, &mut notes);
        }
        let role = match mode {
            SocketMode::Server => "SERVER",
            SocketMode::Client => "CLIENT",
        };
        let rx = iface.rx.iter_mut().flat_map(|rx| rx.queues.iter_mut().map(|q| &mut q.memory_regions));
        let tx = iface.tx.iter_mut().flat_map(|tx| tx.queues.iter_mut().map(|q| &mut q.memory_regions));
        let queues = rx.map(|q| ("rx", q)).enumerate().chain(tx.map(|q| ("tx", q)).enumerate());
        for (q, (direction, regions)) in queues {
            if !regions.is_empty() {
                continue;
            }
            let named = |name: &&String| {
                let has = |word: &str| name.split('_').any(|w| w.eq_ignore_ascii_case(word));
                has(direction) && has(role)
            };
            let mut candidates = region_names.iter().filter(named);
            if let (Some(region), None) = (candidates.next(), candidates.next()) {
                regions.push(region.clone());
                notes.warn(
                    &path.key(direction).key("queues").index(q).key("memory_regions"),
                    format!(
                        "names no region; takes \"{region}\", the one region named for a {} {} queue, as DAQIRI's RDMA bench names them",
                        role.to_ascii_lowercase(),
                        direction.to_ascii_uppercase()
                    ),
                );
            }
        }
    }
    notes
}

/// A client without `remote_addr` connects where the bench's client
/// section says, when that section is for this interface's address.
fn fill_remote(iface: &mut Interface, section: Option<&serde_yaml::Value>, path: &YamlPath, notes: &mut Report) {
    let Some(section) = section else { return };
    let Some(socket) = iface.socket_config.as_mut().filter(|s| s.remote_addr.is_none()) else { return };
    let local = socket.local_addr.as_deref().and_then(|a| a.parse::<Endpoint>().ok()).map(|e| e.ip);
    let field = |key: &str| {
        section.get(key).and_then(|v| v.as_str().map(str::to_owned).or_else(|| v.as_u64().map(|n| n.to_string())))
    };
    let client = field("client_address").and_then(|a| a.parse::<IpAddr>().ok());
    if client.is_some_and(|client| local.is_some_and(|local| local != client)) {
        return;
    }
    let (Some(server), Some(port)) = (field("server_address"), field("server_port")) else { return };
    let (Ok(server), Ok(port)) = (server.parse::<IpAddr>(), port.parse::<u16>()) else { return };
    let remote = Endpoint { transport: Transport::Roce, ip: server, port: Some(port) }.to_string();
    notes.warn(
        &path.key("socket_config").key("remote_addr"),
        format!("not given; {remote}, where {CLIENT_SECTION} says DAQIRI's RDMA bench connects its client"),
    );
    socket.remote_addr = Some(remote);
}

/// The socket mode of a RoCE interface (`roce://` or `rdma://` local address).
fn roce_mode(iface: &Interface) -> Option<SocketMode> {
    let socket = iface.socket_config.as_ref()?;
    let local: Endpoint = socket.local_addr.as_deref()?.parse().ok()?;
    (local.transport == Transport::Roce).then_some(socket.mode)
}

#[cfg(test)]
mod tests {
    use crate::Document;

    const BENCH: &str = include_str!("../tests/data/upstream/daqiri_bench_rdma_tx_rx.yaml");

    #[test]
    fn the_bench_regions_and_server_address_are_filled_in_with_a_warning_each() {
        let doc = Document::parse(BENCH).unwrap();
        let checked = doc.validate_as_template();
        let valid = checked.valid.expect("valid");
        let config = valid.config();
        let regions = |i: usize, direction: &str| match direction {
            "rx" => config.interfaces[i].rx.as_ref().unwrap().queues[0].memory_regions.clone(),
            _ => config.interfaces[i].tx.as_ref().unwrap().queues[0].memory_regions.clone(),
        };
        assert_eq!(regions(0, "rx"), ["DATA_RX_GPU_CLIENT"]);
        assert_eq!(regions(0, "tx"), ["DATA_TX_GPU_CLIENT"]);
        assert_eq!(regions(1, "rx"), ["DATA_RX_GPU_SERVER"]);
        assert_eq!(regions(1, "tx"), ["DATA_TX_GPU_SERVER"]);
        let remote = config.interfaces[0].socket_config.as_ref().unwrap().remote_addr.as_deref();
        assert_eq!(remote, Some("roce://10.100.3.1:4096"));
        let said: Vec<String> = checked.report.warnings().map(|w| w.path.to_string()).collect();
        for path in [
            "daqiri.cfg.interfaces[0].socket_config.remote_addr",
            "daqiri.cfg.interfaces[0].rx.queues[0].memory_regions",
            "daqiri.cfg.interfaces[1].tx.queues[0].memory_regions",
        ] {
            assert!(said.iter().any(|p| p == path), "{path} is said: {said:?}");
        }
    }

    #[test]
    fn without_the_bench_sections_nothing_is_filled() {
        let text = BENCH.split("\nrdma_bench_server:").next().unwrap();
        let doc = Document::parse(text).unwrap();
        let rx = &doc.config.interfaces[0].rx.as_ref().unwrap().queues[0];
        assert!(rx.memory_regions.is_empty());
        let valid = doc.validate_as_template().valid.expect("valid as written");
        assert!(valid.config().interfaces[0].rx.as_ref().unwrap().queues[0].memory_regions.is_empty());
    }
}
