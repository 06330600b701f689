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

# The DPDK backend on net_null as the DPDK benchmarks run it: `queues` RX
# queues on cores first_core.., 64 mbufs per rte_eth_rx_burst, `size`-byte
# frames, master_core 0, 16384 buffers of 2 KiB per queue, `meta` burst
# metadata entries per queue (rx_meta_buffers).
net_null_config() { # file queues first_core size meta [regions: shared | per-queue]
    local queues="" regions="" k
    for ((k = 0; k < $2; k++)); do
        local region=rx_mem
        [[ ${6:-shared} == per-queue ]] && region=rx_mem$k
        queues+="        - { name: q$k, id: $k, cpu_core: $(($3 + k)), batch_size: 64, timeout_us: 1000, memory_regions: [$region] }"$'\n'
        [[ $region == rx_mem$k ]] && regions+="    - { name: $region, kind: host, num_bufs: 16384, buf_size: 2048 }"$'\n'
    done
    [[ -z $regions ]] && regions="    - { name: rx_mem, kind: host, num_bufs: $((16384 * $2)), buf_size: 2048 }"$'\n'
    cat >"$1" <<YAML
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    rx_meta_buffers: $5
    memory_regions:
$regions    interfaces:
    - name: bench_port
      address: net_null0,size=$4
      rx:
        queues:
$queues
YAML
}

# Packets per second a `run --summary-json` file says the application consumed.
consumed_rate() { # summary.json
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(round(s["consumed"]["packets"] / s["elapsed_s"]))' "$1"
}
