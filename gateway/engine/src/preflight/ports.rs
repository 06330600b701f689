//! Whether the ports a config's socket servers bind are free on this host.
//! `check` runs beside a gateway or another receiver; a bind probe is the
//! only way to know what the kernel will say when the engine binds.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};

use daqiri_config::model::SocketMode;
use daqiri_config::{InterfaceBackend, Transport, ValidConfig, YamlPath};

/// `(path, message)` for each socket server whose address is taken.
pub(super) fn ports_in_use(config: &ValidConfig) -> Vec<(YamlPath, String)> {
    let mut out = Vec::new();
    for (port, _) in config.interfaces() {
        if config.backend(port) != InterfaceBackend::Socket {
            continue;
        }
        let Some(endpoints) = config.endpoints(port) else { continue };
        let Some(local) = endpoints.local.filter(|_| endpoints.mode == SocketMode::Server) else { continue };
        let addr = local.socket_addr();
        let probe = match local.transport {
            Transport::Udp => UdpSocket::bind(addr).map(drop),
            Transport::Tcp => TcpListener::bind(addr).map(drop),
            Transport::Roce => continue,
        };
        let why = match probe {
            Ok(()) => continue,
            Err(e) if e.kind() == ErrorKind::AddrInUse => {
                format!("{local} is in use on this host (another receiver, or a gateway already running this config)")
            }
            Err(e) if e.kind() == ErrorKind::AddrNotAvailable => {
                format!("{} is not an address of this host; binding {local} will fail", local.ip)
            }
            Err(e) => format!("binding {local} fails here: {e}"),
        };
        out.push((YamlPath::cfg().key("interfaces").index(port).key("socket_config").key("local_addr"), why));
    }
    out
}
