# Shared by the receive benchmarks (sourced, not run).

# The socket engine as every receive benchmark runs it: a UDP server socket
# on ip:port, one RX queue polled directly by the application, 64 MiB of buffers.
socket_receiver_config() { # file ip port
    cat >"$1" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: socket
    rx_meta_buffers: 256
    memory_regions:
    - { name: rx, kind: host, num_bufs: 16384, buf_size: 2048 }
    interfaces:
    - name: udp_rx
      socket_config: { mode: server, local_addr: "udp://$2:$3" }
      rx:
        queues:
        - { name: q0, id: 0, poll_mode: direct, memory_regions: [rx] }
YAML
}
