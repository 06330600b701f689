# Shared by the benchmarks and the packers of programs for the GPU machine (sourced, not run).

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

# Two network namespaces joined by a veth pair (veth0 in tx_ns, veth1 in
# rx_ns, MTU 1500 unless given), the sender's side wire-like: every GSO send
# split into single datagrams before the veth, as a NIC puts single frames
# on a wire (TSO off too: a veth only hands frames to the receiver's NAPI,
# and so to GRO, when its sender has no TCP segmentation to honour); the
# receiver's packets processed (RPS) on receiver_cpu.
veth_bed() { # tx_ns rx_ns tx_ip rx_ip receiver_cpu [mtu]
    ip netns add "$1"
    ip netns add "$2"
    ip link add veth0 netns "$1" mtu "${6:-1500}" type veth peer name veth1 netns "$2" mtu "${6:-1500}"
    ip -n "$1" addr add "$3/24" dev veth0
    ip -n "$2" addr add "$4/24" dev veth1
    for ns in "$1" "$2"; do ip -n "$ns" link set lo up; done
    ip -n "$1" link set veth0 up
    ip -n "$2" link set veth1 up
    ip netns exec "$1" ethtool -K veth0 tx-udp-segmentation off tx-gso-list off tso off >/dev/null
    ip netns exec "$2" sh -c "printf %x $((1 << $5)) > /sys/class/net/veth1/queues/rx-0/rps_cpus"
}

# Waits until something in namespace ns listens on UDP (or TCP) port.
wait_udp_bound() { # ns port [proto: u | t]
    for _ in $(seq 200); do
        ip netns exec "$1" ss -Hl"${3:-u}"n | grep -q ":$2 " && return 0
        sleep 0.05
    done
    echo "receiver did not bind" >&2
    return 1
}

# Highest rate with zero loss over STEPS bisections of 0..max_rate; prints
# it. A step runs `step_RECEIVER rate size`, which prints "sent delivered";
# it passes when nothing sent was lost (but the last `held` datagrams, which
# a receiver that says so keeps until more arrive) and the sender really
# offered 95% of the rate over STEP_SECONDS.
search() { # receiver size max_rate [held]
    local lo=0 hi=$3 best=0 held=${4:-0}
    for _ in $(seq "$STEPS"); do
        local mid=$(((lo + hi) / 2))
        read -r sent got < <("step_$1" "$mid" "$2")
        local offered=$((mid * STEP_SECONDS * 95 / 100)) verdict=pass
        if ((got + held < sent)); then verdict="fail (lost $((sent - got)))"
        elif ((got < sent)); then verdict="pass ($((sent - got)) held back)"
        elif ((sent < offered)); then verdict="fail (sender short)"; fi
        echo "  $1 size=$2 rate=$mid: sent $sent delivered $got: $verdict" >&2
        if [[ $verdict == pass* ]]; then best=$mid lo=$mid; else hi=$mid; fi
    done
    echo $best
}

# Where no GPU driver is installed, DAQIRI's binaries (which link libcuda)
# load the link-time stub tests/reference/build.sh made; every CUDA call
# then answers "no device", which DAQIRI's host-memory paths never make.
daqiri_reference_env() { # a DAQIRI binary
    ldconfig -p | grep -q 'libcuda\.so\.1 ' && return
    export LD_LIBRARY_PATH=$(tests/reference/build.sh cuda)/lib/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    ldd "$1" | grep -q 'not found' && { echo "$1: libraries not found:" >&2; ldd "$1" | grep 'not found' >&2; return 1; }
    return 0
}

# Copies into `dest` every library `ldd` names for the binaries given, but
# libc's and those whose path `skip` (an extended regex, may be empty)
# matches: what a machine without them needs beside a packed binary.
copy_linked_libraries() { # dest skip binary...
    local dest=$1 skip=$2 lib
    shift 2
    ldd "$@" | awk '/=> \// {print $3}' | sort -u |
        { grep -v -E "/(libc|libm|libpthread|libdl|librt|ld-linux.*)\.so${skip:+|$skip}" || true; } |
        while read -r lib; do
            [[ -e $dest/$(basename "$lib") ]] || cp -L "$lib" "$dest/"
        done
}
