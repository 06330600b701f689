"""DAQIRI's Python API (`import daqiri`) in-process on our engine.

A UDP server and client interface on loopback carry bursts both ways
through DAQIRI's calls; the misuses DAQIRI leaves undefined answer a status
(or, for a freed burst's header, ValueError) with a message; every init form
DAQIRI's module takes works. Run by tests/python_daqiri/run.sh.
"""

import os
import struct
import subprocess
import threading
import time

import daqiri
import pytest
import yaml

SERVER_PORT, CLIENT_PORT = 47811, 47812
CFG = {
    "version": 1,
    "stream_type": "socket",
    "memory_regions": [
        {"name": "server_mem", "kind": "host", "num_bufs": 4096, "buf_size": 2048},
        {"name": "client_mem", "kind": "host", "num_bufs": 4096, "buf_size": 2048},
    ],
    "interfaces": [
        {
            "name": "udp_server",
            "address": "127.0.0.1",
            "socket_config": {"mode": "server", "local_addr": f"udp://127.0.0.1:{SERVER_PORT}"},
            "rx": {"queues": [{"name": "srx", "id": 0, "cpu_core": 0, "batch_size": 8, "memory_regions": ["server_mem"]}]},
            "tx": {"queues": [{"name": "stx", "id": 0, "cpu_core": 0, "batch_size": 8, "memory_regions": ["server_mem"]}]},
        },
        {
            "name": "udp_client",
            "address": "127.0.0.1",
            "socket_config": {
                "mode": "client",
                "local_addr": f"udp://127.0.0.1:{CLIENT_PORT}",
                "remote_addr": f"udp://127.0.0.1:{SERVER_PORT}",
            },
            "rx": {"queues": [{"name": "crx", "id": 0, "cpu_core": 1, "batch_size": 8, "memory_regions": ["client_mem"]}]},
            "tx": {"queues": [{"name": "ctx", "id": 0, "cpu_core": 1, "batch_size": 8, "memory_regions": ["client_mem"]}]},
        },
    ],
}
LENGTH = 1000


def payload(seq: int) -> bytes:
    return seq.to_bytes(4, "big") + bytes((seq * 7 + i) & 0xFF for i in range(4, LENGTH))


@pytest.fixture
def engine():
    assert daqiri.daqiri_init(CFG) == daqiri.Status.SUCCESS, daqiri.last_error()
    try:
        yield
    finally:
        daqiri.shutdown()


def send(conn: int, first: int, count: int, per_burst: int) -> None:
    status, port, queue = daqiri.socket_get_port_queue(conn)
    assert status == daqiri.Status.SUCCESS
    sent = 0
    while sent < count:
        n = min(per_burst, count - sent)
        burst = daqiri.create_tx_burst_params()
        daqiri.set_header(burst, port, queue, n, 1)
        if daqiri.get_tx_packet_burst(burst) != daqiri.Status.SUCCESS:
            daqiri.free_tx_metadata(burst)
            time.sleep(0.001)
            continue
        for idx in range(n):
            assert daqiri.copy_buffer_to_packet(burst, idx, payload(first + sent + idx)) == daqiri.Status.SUCCESS
            assert daqiri.set_packet_lengths(burst, idx, [LENGTH]) == daqiri.Status.SUCCESS
        assert daqiri.set_connection_id(burst, conn) == daqiri.Status.SUCCESS
        if daqiri.send_tx_burst(burst) == daqiri.Status.SUCCESS:
            sent += n
        else:
            time.sleep(0.001)


def receive(conn: int, server: bool, first: int, count: int) -> list:
    """Every packet's bytes checked; the bursts are returned unfreed."""
    seen, bursts = set(), []
    deadline = time.monotonic() + 10
    while len(seen) < count and time.monotonic() < deadline:
        status, burst = daqiri.get_rx_burst_for_connection(conn, server)
        if status != daqiri.Status.SUCCESS:
            assert status == daqiri.Status.NOT_READY and burst is None
            time.sleep(0.0002)
            continue
        assert burst.hdr.hdr.num_pkts == daqiri.get_num_packets(burst) and burst.hdr.hdr.num_segs == 1
        for idx in range(daqiri.get_num_packets(burst)):
            status, data = daqiri.get_packet_bytes(burst, idx)
            assert status == daqiri.Status.SUCCESS
            seq = int.from_bytes(data[:4], "big")
            assert data == payload(seq) and first <= seq < first + count and seq not in seen
            seen.add(seq)
        bursts.append(burst)
    assert len(seen) == count
    return bursts


def test_versions_and_constants():
    assert daqiri.__version__ == daqiri.version_string() == "2026.7.0"
    assert daqiri.__version_info__ == (2026, 7, 0) and daqiri.abi_version() == daqiri.__abi_version__ == 1
    assert daqiri.DAQIRI_BURST_FLAG_REORDERED == 1 << 28 and daqiri.MAX_NUM_SEGS == 4
    assert str(daqiri.Status.NOT_READY) == "Status.NOT_READY"


def test_calls_without_an_engine_answer_not_ready():
    assert daqiri.get_rx_burst() == (daqiri.Status.NOT_READY, None)
    assert "daqiri_init" in daqiri.last_error()


def test_udp_bursts_both_ways(engine, tmp_path):
    assert daqiri.get_port_id("udp_server") == 0 and daqiri.get_port_id("udp_client") == 1
    assert daqiri.get_port_id("eth9") == -1 and daqiri.get_num_rx_queues(0) == 1
    status, server = daqiri.socket_get_server_conn_id("127.0.0.1", SERVER_PORT)
    assert status == daqiri.Status.SUCCESS
    status, client = daqiri.socket_connect_to_server("127.0.0.1", SERVER_PORT, "127.0.0.1")
    assert status == daqiri.Status.SUCCESS and client != server

    send(client, 0, 64, 8)
    bursts = receive(server, True, 0, 64)
    assert sum(daqiri.get_burst_tot_byte(b) for b in bursts) == 64 * LENGTH
    assert all(daqiri.get_connection_id(b) == server for b in bursts)
    assert daqiri.daqiri_write_pcap_to_file(bursts[0], str(tmp_path), "rx") == daqiri.Status.SUCCESS
    status, part = daqiri.get_segment_packet_bytes(bursts[0], 0, 0, nbytes=10, src_offset=4)
    assert status == daqiri.Status.SUCCESS and len(part) == 10
    for burst in bursts:
        assert daqiri.free_all_packets_and_burst_rx(burst) == daqiri.Status.SUCCESS

    # The server answers the peer it heard; the client reads it by port.
    send(server, 1000, 32, 4)
    answered = receive(client, False, 1000, 32)
    for burst in answered:
        daqiri.free_all_packets_and_burst_rx(burst)

    # The pcap holds the datagrams as UDP frames (a reader of our own, not the writer's code).
    raw = (tmp_path / "rx.pcap").read_bytes()
    magic, _, _, _, _, _, linktype = struct.unpack("<IHHiIII", raw[:24])
    assert magic == 0xA1B2C3D4 and linktype == 1
    at, frames = 24, 0
    while at < len(raw):
        _, _, captured, _ = struct.unpack("<IIII", raw[at : at + 16])
        frame = raw[at + 16 : at + 16 + captured]
        sport, dport, udp_len = struct.unpack("!HHH", frame[34:40])
        assert (sport, dport, udp_len) == (CLIENT_PORT, SERVER_PORT, 8 + LENGTH)
        seq = int.from_bytes(frame[42:46], "big")
        assert frame[42:] == payload(seq)
        at, frames = at + 16 + captured, frames + 1
    assert frames == 8


def test_socket_options_take_every_value_form(engine):
    import socket

    status, server = daqiri.socket_get_server_conn_id("127.0.0.1", SERVER_PORT)
    assert status == daqiri.Status.SUCCESS
    ok = daqiri.Status.SUCCESS
    assert daqiri.socket_setsockopt(server, socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20) == ok
    assert daqiri.socket_setsockopt(server, socket.SOL_SOCKET, socket.SO_REUSEADDR, True) == ok
    assert daqiri.socket_setsockopt(server, socket.SOL_SOCKET, socket.SO_RCVBUF, struct.pack("i", 1 << 20)) == ok
    assert daqiri.socket_setsockopt(server, socket.SOL_SOCKET, socket.SO_RCVBUF, bytearray(struct.pack("i", 4096))) == ok
    # The kernel's refusal comes back as a status, its reason in the log; a foreign id is named.
    assert daqiri.socket_setsockopt(server, socket.SOL_SOCKET, 9999, 1) == daqiri.Status.GENERIC_FAILURE
    assert daqiri.socket_setsockopt(12345, socket.SOL_SOCKET, socket.SO_RCVBUF, 1) == daqiri.Status.INVALID_PARAMETER
    with pytest.raises(TypeError):
        daqiri.socket_setsockopt(server, socket.SOL_SOCKET, socket.SO_RCVBUF, 1.5)


def test_misuse_answers_a_status(engine):
    status, server = daqiri.socket_get_server_conn_id("127.0.0.1", SERVER_PORT)
    status, client = daqiri.socket_connect_to_server("127.0.0.1", SERVER_PORT)
    send(client, 0, 8, 8)
    (burst,) = receive(server, True, 0, 8)
    assert daqiri.get_packet_bytes(burst, 99)[0] == daqiri.Status.INVALID_PARAMETER
    assert "packet index 99" in daqiri.last_error()
    assert daqiri.free_all_packets_and_burst_tx(burst) == daqiri.Status.INVALID_PARAMETER  # an RX burst
    assert daqiri.free_all_packets_and_burst_rx(burst) == daqiri.Status.SUCCESS
    assert daqiri.free_all_packets_and_burst_rx(burst) == daqiri.Status.INVALID_PARAMETER
    assert "already freed" in daqiri.last_error()
    with pytest.raises(ValueError, match="already freed"):
        burst.hdr
    assert daqiri.get_packet_bytes(burst, 0) == (daqiri.Status.INVALID_PARAMETER, b"")

    status, port, queue = daqiri.socket_get_port_queue(server)
    tx = daqiri.create_tx_burst_params()
    daqiri.set_header(tx, port, queue, 1, 1)
    assert daqiri.get_tx_packet_burst(tx) == daqiri.Status.SUCCESS
    with pytest.raises(ValueError):
        daqiri.copy_buffer_to_packet(tx, 0, b"x" * 10, nbytes=20)
    assert daqiri.copy_buffer_to_packet(tx, 0, b"x" * 100, dst_offset=2000) == daqiri.Status.INVALID_PARAMETER
    assert daqiri.copy_buffer_to_packet(tx, 0, bytearray(payload(7))) == daqiri.Status.SUCCESS
    assert daqiri.set_packet_lengths(tx, 0, [4096]) == daqiri.Status.INVALID_PARAMETER
    assert daqiri.set_packet_lengths(tx, 0, [LENGTH]) == daqiri.Status.SUCCESS
    assert daqiri.send_tx_burst(tx) == daqiri.Status.SUCCESS
    assert daqiri.free_tx_metadata(tx) == daqiri.Status.INVALID_PARAMETER  # taken by the send
    assert daqiri.socket_connect_to_server("127.0.0.1", 1) == (daqiri.Status.CONNECT_FAILURE, 0)
    assert daqiri.format_eth_addr("02:00:0a:0b:0c:ff") == bytes([2, 0, 10, 11, 12, 255])
    assert daqiri.format_eth_addr("nonsense") == bytes(6)
    assert daqiri.get_mac_addr(port)[0] == daqiri.Status.NOT_SUPPORTED  # a socket port
    assert "no Ethernet address of its own" in daqiri.last_error()
    # This module is built without CUDA: no plan runs on a GPU; a name that is no interface's says so first.
    assert daqiri.set_reorder_cuda_stream("udp_server", "plan", 0) == daqiri.Status.NOT_SUPPORTED
    assert "built without CUDA" in daqiri.last_error()
    assert daqiri.set_reorder_cuda_stream("eth9", "plan") == daqiri.Status.INVALID_PARAMETER
    assert 'no interface is named or addressed "eth9"' in daqiri.last_error()


def test_rdma_calls_name_what_a_socket_engine_lacks(engine):
    # DAQIRI's RDMA bench runs them on soft-RoCE (tests/capi/daqiri_rdma_vm.sh);
    # here, on an engine without RoCE ports, each answers a status and says why.
    assert [int(op) for op in (daqiri.RDMAOpCode.SEND, daqiri.RDMAOpCode.RECEIVE, daqiri.RDMAOpCode.INVALID)] == [1, 2, 7]
    assert daqiri.rdma_get_server_conn_id("127.0.0.1", SERVER_PORT) == (daqiri.Status.INVALID_PARAMETER, 0)
    assert "no RoCE server interface" in daqiri.last_error()
    assert daqiri.rdma_connect_to_server("127.0.0.1", SERVER_PORT, "127.0.0.1") == (daqiri.Status.CONNECT_FAILURE, 0)
    status, server = daqiri.socket_get_server_conn_id("127.0.0.1", SERVER_PORT)
    assert daqiri.rdma_get_port_queue(server)[0] == daqiri.Status.INVALID_PARAMETER  # a socket's id
    request = daqiri.create_tx_burst_params()
    assert daqiri.rdma_set_header(request, daqiri.RDMAOpCode.RDMA_READ, server, True, 1, 5, "x") == daqiri.Status.NOT_SUPPORTED
    assert "SEND and RECEIVE requests only" in daqiri.last_error()
    assert daqiri.rdma_get_opcode(request) == daqiri.RDMAOpCode.INVALID
    assert request.rdma_wr_id == 0
    assert daqiri.free_tx_metadata(request) == daqiri.Status.SUCCESS


def test_init_forms():
    class Wrapped:
        def as_dict(self):
            return CFG

    assert daqiri.daqiri_init(Wrapped()) == daqiri.Status.SUCCESS
    assert daqiri.daqiri_init(CFG) == daqiri.Status.INTERNAL_ERROR  # one engine per process
    daqiri.shutdown()
    bad = {**CFG, "memory_regions": [{"name": "m", "kind": "host", "num_bufs": 0, "buf_size": 2048}]}
    assert daqiri.daqiri_init(bad) == daqiri.Status.INVALID_PARAMETER
    assert "daqiri.cfg." in daqiri.last_error()
    with pytest.raises(TypeError):
        daqiri.daqiri_init(42)


def test_network_config_parses_starts_and_round_trips(tmp_path):
    path = tmp_path / "udp.yaml"
    path.write_text(yaml.safe_dump({"daqiri": {"cfg": CFG}}))
    status, config = daqiri.parse_network_config(str(path))
    assert status == daqiri.Status.SUCCESS, daqiri.last_error()
    assert config.common.engine_type == daqiri.EngineType.SOCKET
    assert config.common.protocol == daqiri.SocketProtocol.UDP
    assert config.common.direction == daqiri.Direction.TX_RX
    assert sorted(config.memory_regions) == ["client_mem", "server_mem"]
    assert config.memory_regions["server_mem"].kind == daqiri.MemoryKind.HOST
    client = config.interfaces[1]
    assert (client.port_id, client.socket.mode) == (1, daqiri.SocketMode.CLIENT)
    assert client.socket.remote_addr == f"udp://127.0.0.1:{SERVER_PORT}"
    assert client.rx.queues[0].common.memory_regions == ["client_mem"]
    assert client.rx.queues[0].common.cpu_core == "1"
    # What it writes parses back to the same config, and starts.
    assert daqiri.parse_network_config(yaml.safe_dump({"daqiri": {"cfg": config.as_dict()}})) == (status, config)
    assert daqiri.get_engine_type() == daqiri.EngineType.UNKNOWN
    assert daqiri.daqiri_init(config) == daqiri.Status.SUCCESS, daqiri.last_error()
    try:
        assert daqiri.get_engine_type() == daqiri.EngineType.SOCKET
    finally:
        daqiri.shutdown()


def test_network_config_built_in_code_starts_and_names_what_it_cannot_hold():
    config = daqiri.NetworkConfig()
    config.common.stream_type = daqiri.StreamType.SOCKET
    config.memory_regions["rx"] = daqiri.MemoryRegionConfig(
        name="rx", kind=daqiri.MemoryKind.HOST, num_bufs=64, buf_size=2048
    )
    server = daqiri.InterfaceConfig(name="server")
    server.socket.mode = daqiri.SocketMode.SERVER
    server.socket.local_addr = f"udp://127.0.0.1:{SERVER_PORT}"
    queue = daqiri.RxQueueConfig(timeout_us=1000)
    queue.common.name, queue.common.cpu_core, queue.common.batch_size = "q", "-1", 4
    queue.common.memory_regions = ["rx"]
    server.rx.queues.append(queue)
    config.interfaces.append(server)
    assert daqiri.daqiri_init(config) == daqiri.Status.SUCCESS, daqiri.last_error()
    daqiri.shutdown()
    queue.common.split_boundary = 64  # no key in this build
    assert daqiri.daqiri_init(config) == daqiri.Status.INVALID_PARAMETER
    assert "split_boundary" in daqiri.last_error()
    ours = {**CFG, "interfaces": [{**CFG["interfaces"][0]}]}
    ours["interfaces"][0]["rx"] = {"queues": [{**CFG["interfaces"][0]["rx"]["queues"][0], "busy_poll_us": 10}]}
    status, empty = daqiri.parse_network_config(yaml.safe_dump({"daqiri": {"cfg": ours}}))
    assert (status, empty) == (daqiri.Status.NOT_SUPPORTED, daqiri.NetworkConfig())
    assert "interfaces.0.rx.queues.0.busy_poll_us" in daqiri.last_error()
    assert daqiri.parse_network_config("/no/such/config.yaml")[0] == daqiri.Status.INVALID_PARAMETER
    assert daqiri.parse_network_config_from_yaml_string("/no/such/config.yaml")[0] == daqiri.Status.INVALID_PARAMETER


LOOPBACK = {
    "version": 1,
    "stream_type": "raw",
    "loopback": "sw",
    "memory_regions": [
        {"name": "tx", "kind": "host", "num_bufs": 256, "buf_size": 2048},
        {"name": "rx", "kind": "host", "num_bufs": 512, "buf_size": 2048},
    ],
    "interfaces": [
        {
            "name": "lo",
            "address": "loopback",
            "tx": {"queues": [{"name": "t", "id": 0, "cpu_core": 0, "batch_size": 8, "memory_regions": ["tx"]}]},
            "rx": {
                "dynamic_flow_capacity": 4,
                "queues": [
                    {"name": f"r{q}", "id": q, "cpu_core": 1, "batch_size": 8, "timeout_us": 1000, "memory_regions": ["rx"]}
                    for q in (0, 1)
                ],
            },
        }
    ],
}


def test_dynamic_flows_steer_udp_frames_and_name_what_is_refused():
    def send_to(dst):
        burst = daqiri.create_tx_burst_params()
        daqiri.set_header(burst, 0, 0, 4, 1)
        while daqiri.get_tx_packet_burst(burst) != daqiri.Status.SUCCESS:
            time.sleep(0.001)
        for idx in range(4):
            assert daqiri.set_eth_header(burst, idx, "02:00:0a:0b:0c:0d") == daqiri.Status.SUCCESS
            assert daqiri.set_ipv4_header(burst, idx, 8 + 16, 17, 0x0A000001, 0x0A000002) == daqiri.Status.SUCCESS
            assert daqiri.set_udp_header(burst, idx, 16, 4096, dst) == daqiri.Status.SUCCESS
            assert daqiri.set_packet_lengths(burst, idx, [14 + 20 + 8 + 16]) == daqiri.Status.SUCCESS
        assert daqiri.send_tx_burst(burst) == daqiri.Status.SUCCESS

    def landed():
        """(queue, flow id) of each of 8 frames, by UDP destination port."""
        seen, deadline = {}, time.monotonic() + 10
        while sum(len(v) for v in seen.values()) < 8 and time.monotonic() < deadline:
            for queue in (0, 1):
                status, burst = daqiri.get_rx_burst(0, queue)
                if status != daqiri.Status.SUCCESS:
                    continue
                for idx in range(daqiri.get_num_packets(burst)):
                    dst = struct.unpack("!H", daqiri.get_packet_bytes(burst, idx)[1][36:38])[0]
                    seen.setdefault(dst, set()).add((queue, daqiri.get_packet_flow_id(burst, idx)))
                daqiri.free_all_packets_and_burst_rx(burst)
            time.sleep(0.0002)
        return seen

    def completion(op_id):
        for _ in range(500):
            status, result = daqiri.poll_flow_op()
            if status == daqiri.Status.SUCCESS and result.op_id == op_id:
                return result
            assert status == daqiri.Status.NOT_READY and result is None
            time.sleep(0.01)
        raise AssertionError("the flow operation never completed")

    assert daqiri.daqiri_init(LOOPBACK) == daqiri.Status.SUCCESS, daqiri.last_error()
    try:
        flow = daqiri.FlowRuleConfig(name="udp_5001")
        flow.action.id, flow.match.udp_dst = 1, 5001
        status, op_id = daqiri.add_rx_flow_async(0, flow)
        assert status == daqiri.Status.SUCCESS, daqiri.last_error()
        added = completion(op_id)
        assert (added.type, added.status) == (daqiri.FlowOpType.ADD_RX, daqiri.Status.SUCCESS)
        send_to(5000)
        send_to(5001)
        assert landed() == {5000: {(0, 0)}, 5001: {(1, added.flow_id)}}

        status, op_id = daqiri.delete_flow_async(added.flow_id)
        assert status == daqiri.Status.SUCCESS and completion(op_id).type == daqiri.FlowOpType.DELETE
        send_to(5001)
        send_to(5000)
        assert landed() == {5000: {(0, 0)}, 5001: {(0, 0)}}

        bad = daqiri.FlowRuleConfig(name="bad")
        bad.action.id = 9
        assert daqiri.add_rx_flow_async(0, bad)[0] == daqiri.Status.INVALID_PARAMETER
        assert "queue 9" in daqiri.last_error()
        with pytest.raises(TypeError):
            daqiri.add_rx_flow_async(0, {"name": "not a flow"})
    finally:
        daqiri.shutdown()


def test_enum_helpers_convert_as_the_yaml_spells_them():
    assert daqiri.engine_type_from_string("socket") == daqiri.EngineType.SOCKET
    assert daqiri.engine_type_to_string(daqiri.EngineType.DPDK) == "dpdk"
    assert daqiri.stream_type_to_string(daqiri.stream_type_from_string("raw")) == "raw"
    assert daqiri.reorder_data_type_from_string("bf16") == daqiri.ReorderDataType.BF16
    assert daqiri.reorder_endianness_to_string(daqiri.ReorderEndianness.NETWORK) == "network"
    assert daqiri.log_level_from_string("warn") == daqiri.LogLevel.WARN
    with pytest.raises(ValueError, match="not a EngineType"):
        daqiri.engine_type_from_string("nic")


def test_threads_send_and_receive_at_once(engine):
    """As DAQIRI's Python benchmark does: a TX and an RX thread, the GIL
    released inside the calls."""
    status, server = daqiri.socket_get_server_conn_id("127.0.0.1", SERVER_PORT)
    status, client = daqiri.socket_connect_to_server("127.0.0.1", SERVER_PORT)
    got = []
    receiver = threading.Thread(target=lambda: got.extend(receive(server, True, 0, 800)))
    receiver.start()
    send(client, 0, 800, 8)
    receiver.join()
    assert sum(daqiri.get_num_packets(b) for b in got) == 800
    for burst in got:
        daqiri.free_all_packets_and_burst_rx(burst)


def test_reorder_aggregates_carry_daqiri_burst_info():
    """A CPU reorder plan on the software loopback: 16 frames sent out of
    order come back as two aggregates of 8 in sequence order, each with
    DAQIRI's ReorderBurstInfo."""
    data_len, per_batch = 100, 8
    cfg = {
        "version": 1,
        "stream_type": "raw",
        "loopback": "sw",
        "memory_regions": [
            {"name": "tx", "kind": "host", "num_bufs": 64, "buf_size": 2048},
            {"name": "rx", "kind": "host", "num_bufs": 256, "buf_size": 2048},
            {"name": "batches", "kind": "host", "num_bufs": 8, "buf_size": per_batch * data_len},
        ],
        "interfaces": [{
            "name": "lo",
            "address": "loopback",
            "tx": {"queues": [{"name": "t", "id": 0, "cpu_core": 0, "batch_size": 16, "memory_regions": ["tx"]}]},
            "rx": {
                "queues": [{"name": "r", "id": 0, "cpu_core": 1, "batch_size": 8, "timeout_us": 1000,
                            "memory_regions": ["rx"]}],
                "flows": [{"name": "f", "id": 1, "action": {"type": "queue", "id": 0}, "match": {"udp_dst": 7000}}],
                "reorder_configs": [{
                    "name": "p", "reorder_type": "cpu", "memory_region": "batches", "payload_byte_offset": 46,
                    "flow_ids": [1],
                    "method": {"seq_packets_per_batch": {
                        "sequence_number": {"bit_offset": 42 * 8, "bit_width": 32}, "packets_per_batch": per_batch}},
                }],
            },
        }],
    }

    def data(seq: int) -> bytes:
        return bytes((seq * 7 + i) & 0xFF for i in range(data_len))

    def frame(seq: int) -> bytes:
        udp = struct.pack("!HHHH", 6000, 7000, 8 + 4 + data_len, 0) + struct.pack("!I", seq) + data(seq)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, bytes([10, 0, 0, 1]),
                         bytes([10, 0, 0, 2]))
        return bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0]) + ip + udp

    assert daqiri.daqiri_init(cfg) == daqiri.Status.SUCCESS, daqiri.last_error()
    try:
        order = [5, 12, 0, 9, 3, 15, 7, 1, 10, 4, 14, 2, 8, 13, 6, 11]
        burst = daqiri.create_tx_burst_params()
        daqiri.set_header(burst, 0, 0, len(order), 1)
        assert daqiri.get_tx_packet_burst(burst) == daqiri.Status.SUCCESS
        for idx, seq in enumerate(order):
            assert daqiri.copy_buffer_to_packet(burst, idx, frame(seq)) == daqiri.Status.SUCCESS
            assert daqiri.set_packet_lengths(burst, idx, [len(frame(seq))]) == daqiri.Status.SUCCESS
        assert daqiri.send_tx_burst(burst) == daqiri.Status.SUCCESS
        seen = {}
        deadline = time.monotonic() + 10
        while len(seen) < 2 and time.monotonic() < deadline:
            status, aggregate = daqiri.get_rx_burst(0, 0)
            if status != daqiri.Status.SUCCESS:
                time.sleep(0.001)
                continue
            status, info = daqiri.get_reorder_burst_info(aggregate)
            assert status == daqiri.Status.SUCCESS, daqiri.last_error()
            assert aggregate.hdr.hdr.burst_flags & daqiri.DAQIRI_BURST_FLAG_REORDERED
            assert (info.source_packet_count, info.packets_per_batch, info.payload_len, info.aggregate_len, info.plan) \
                == (per_batch, per_batch, data_len, per_batch * data_len, 0)
            assert info.burst_flags == aggregate.hdr.hdr.burst_flags
            status, got = daqiri.get_packet_bytes(aggregate, 0)
            first = info.batch_id * per_batch
            assert got == b"".join(data(seq) for seq in range(first, first + per_batch))
            seen[info.batch_id] = True
            assert daqiri.free_all_packets_and_burst_rx(aggregate) == daqiri.Status.SUCCESS
        assert sorted(seen) == [0, 1]
    finally:
        daqiri.shutdown()


def test_s3_writer_uploads_each_packet_as_an_object():
    """DAQIRI's S3Writer on the suite's S3 server (tests/s3/server.sh): a
    looped-back burst of 8 frames written sync and async from past their
    42-byte headers, every object read back by curl (AWS SigV4) as sent."""
    endpoint = os.environ.get("DAQIRI_TEST_S3_ENDPOINT")
    if not endpoint:
        pytest.skip("no S3 server: DAQIRI_TEST_S3_ENDPOINT (tests/run.sh starts one with tests/s3/server.sh)")
    access, secret = subprocess.run(["tests/s3/server.sh", "credentials"], capture_output=True, text=True,
                                    check=True).stdout.split()
    os.environ.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)

    def s3(method: str, path: str) -> bytes:
        out = subprocess.run(["curl", "-sf", "-X", method, "--aws-sigv4", "aws:amz:us-east-1:s3",
                              "--user", f"{access}:{secret}", f"{endpoint}/{path}"], capture_output=True, check=True)
        return out.stdout

    bucket = f"python-{os.getpid()}"
    s3("PUT", bucket)
    cfg = {
        "version": 1, "stream_type": "raw", "loopback": "sw",
        "memory_regions": [{"name": "m", "kind": "host", "num_bufs": 64, "buf_size": 2048}],
        "interfaces": [{
            "name": "lo", "address": "loopback",
            "tx": {"queues": [{"name": "t", "id": 0, "cpu_core": 0, "batch_size": 8, "memory_regions": ["m"]}]},
            "rx": {"queues": [{"name": "r", "id": 0, "cpu_core": 1, "batch_size": 8, "timeout_us": 1000,
                               "memory_regions": ["m"]}]},
        }],
    }

    def payload(i: int) -> bytes:
        return bytes((b * 11 + i) & 0xFF for b in range(300 + 50 * i))

    assert daqiri.daqiri_init(cfg) == daqiri.Status.SUCCESS, daqiri.last_error()
    try:
        tx = daqiri.create_tx_burst_params()
        daqiri.set_header(tx, 0, 0, 8, 1)
        assert daqiri.get_tx_packet_burst(tx) == daqiri.Status.SUCCESS
        for i in range(8):
            frame = bytes(42) + payload(i)
            assert daqiri.copy_buffer_to_packet(tx, i, frame) == daqiri.Status.SUCCESS
            assert daqiri.set_packet_lengths(tx, i, [len(frame)]) == daqiri.Status.SUCCESS
        assert daqiri.send_tx_burst(tx) == daqiri.Status.SUCCESS
        deadline = time.monotonic() + 10
        status, burst = daqiri.get_rx_burst(0, 0)
        while status != daqiri.Status.SUCCESS and time.monotonic() < deadline:
            time.sleep(0.001)
            status, burst = daqiri.get_rx_burst(0, 0)
        assert status == daqiri.Status.SUCCESS

        config = daqiri.S3WriterConfig()
        config.bucket, config.region, config.endpoint_override, config.path_style = bucket, "us-east-1", endpoint, True
        writer = daqiri.S3Writer(config)
        status = writer.write_raw_objects(burst, "sync/packet", packet_data_offset=42)
        assert (status.completed_objects, status.failed_objects) == (8, 0)
        assert status.bytes_uploaded == sum(len(payload(i)) for i in range(8))
        handle = writer.write_raw_objects_async(burst, "async/packet", 42)
        assert daqiri.free_all_packets_and_burst_rx(burst) == daqiri.Status.SUCCESS  # staged already
        assert handle.wait().completed_objects == 8
        code, counts = handle.poll()
        assert (code, counts.completed_objects) == (daqiri.Status.SUCCESS, 8)
        assert handle.destroy() == daqiri.Status.SUCCESS
        with pytest.raises(RuntimeError, match="already been destroyed"):
            handle.poll()
        for prefix in ("sync", "async"):
            for i in range(8):
                assert s3("GET", f"{bucket}/{prefix}/packet_{i}") == payload(i), f"{prefix} object {i}"
        assert writer.destroy() == daqiri.Status.SUCCESS
        with pytest.raises(RuntimeError, match="bucket is empty"):
            daqiri.S3Writer(daqiri.S3WriterConfig())
    finally:
        daqiri.shutdown()
