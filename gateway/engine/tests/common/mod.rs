//! Fixtures shared by the engine's integration tests.

#![allow(dead_code)] // each test binary uses its own share of these

/// A free UDP port on 127.0.0.1, so parallel tests do not collide.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A free TCP port on 127.0.0.1.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A UDP server on `127.0.0.1:port` with one RX queue `q0` (`queue` holds its
/// settings besides name, id and region, each followed by a comma) over
/// `num_bufs` buffers of 2048 bytes in region `mem`.
pub fn udp_server(port: u16, queue: &str, num_bufs: u32) -> String {
    format!(
        r#"
daqiri:
  cfg:
    version: 1
    stream_type: socket
    memory_regions:
    - {{ name: mem, kind: host, num_bufs: {num_bufs}, buf_size: 2048 }}
    interfaces:
    - name: server
      socket_config: {{ mode: server, local_addr: "udp://127.0.0.1:{port}" }}
      rx:
        queues:
        - {{ name: q0, id: 0, {queue} memory_regions: [mem] }}
"#
    )
}
