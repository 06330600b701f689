"""The daqiri_gateway Python module against a running gateway: a reorder
plan's aggregates as float32 numpy arrays, viewed in place, equal to an
oracle computed here, and as DLPack tensors (on the GPU machine, a GPU
plan's aggregates in GPU memory as PyTorch tensors); a queue's datagrams
byte-exact; the end of a subscription when the gateway stops. The gateway
binary is $DAQIRI_GATEWAY (tests/python/run.sh and tests/gpu/run.sh set it).

Nothing here assumes a quiet machine: where a packet can be lost (the
socket's buffer overflows while the gateway waits for a core), the test
reads the gateway's counters and the aggregates' missing slots and asserts
that every packet sent is accounted for, and every byte delivered exact."""

import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import daqiri_gateway as dg

REPO = Path(__file__).resolve().parents[2]
PER_BATCH = 64
SAMPLES = 62  # int16 samples after each datagram's 4-byte sequence number


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_gateway(tmp_path, on_gpu: bool = False):
    """The example reorder config on free ports, run with a consumer socket;
    on_gpu lands packets in pinned memory and runs the plan on the GPU, its
    aggregates in a `device` region."""
    udp, source, admin = free_port(), free_port(), free_port(socket.SOCK_STREAM)
    config = (REPO / "configs" / "socket_udp_reorder.yaml").read_text()
    config = config.replace("udp://127.0.0.1:5002", f"udp://127.0.0.1:{udp}")
    config = re.sub(r"udp_src: 6000", f"udp_src: {source}", config)
    # A batch is emitted incomplete once this passed since its first packet:
    # long enough that a sender waiting for a core rarely splits one (the
    # tests account for it when it does).
    config = config.replace("timeout_us: 10000", "timeout_us: 500000")
    assert "timeout_us: 500000" in config
    if on_gpu:
        config = config.replace('name: "rx_host"\n      kind: "host"', 'name: "rx_host"\n      kind: "host_pinned"')
        config = config.replace('name: "batches"\n      kind: "host"', 'name: "batches"\n      kind: "device"')
        config = config.replace('reorder_type: "cpu"', 'reorder_type: "gpu"')
        assert config.count("host_pinned") == 1 and config.count('"device"') == 1, "the GPU config is made"
    (tmp_path / "gateway.yaml").write_text(config)
    sock = tmp_path / "consumers.sock"
    binary = os.environ.get("DAQIRI_GATEWAY", str(REPO / "target" / "debug" / "daqiri-gateway"))
    process = subprocess.Popen(
        [binary, "run", "--config", str(tmp_path / "gateway.yaml"), "--admin-addr", f"127.0.0.1:{admin}"]
        + ["--consumer-socket", str(sock)],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert process.poll() is None, "the gateway exited"
        assert time.monotonic() < deadline, "the consumer socket appears"
        time.sleep(0.05)
    yield {"socket": sock, "udp": udp, "source": source, "admin": admin, "process": process}
    process.kill()
    process.wait()


@pytest.fixture
def gateway(tmp_path):
    yield from run_gateway(tmp_path)


@pytest.fixture
def gpu_gateway(tmp_path):
    """The gateway on a GPU plan, where PyTorch sees a GPU (the GPU machine,
    tests/gpu/run.sh); skipped elsewhere, saying why."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: the GPU test reads aggregates with it")
    if not torch.cuda.is_available():
        pytest.skip("no GPU here: the GPU test runs on the GPU machine (tests/gpu/run.sh)")
    yield from run_gateway(tmp_path, on_gpu=True)


def samples(seq: int) -> np.ndarray:
    return np.random.default_rng(seq).integers(-32768, 32767, SAMPLES, dtype=np.int16)


def oracle(batch: int) -> np.ndarray:
    """Batch `batch`'s aggregate as the plan makes it: its samples in sequence order, as float32."""
    return np.concatenate([samples(seq) for seq in range(batch * PER_BATCH, (batch + 1) * PER_BATCH)]).astype(np.float32)


def datagram(seq: int) -> bytes:
    return seq.to_bytes(4, "big") + samples(seq).astype(">i2").tobytes()


def send_batches(gateway, batches: int, first: int = 0) -> None:
    """Each batch's datagrams shuffled, from the flow's source port; made
    before any is sent, so a batch goes out in a fraction of a millisecond."""
    shuffled = []
    for batch in range(first, first + batches):
        seqs = list(range(batch * PER_BATCH, (batch + 1) * PER_BATCH))
        random.Random(batch).shuffle(seqs)
        shuffled.append([datagram(seq) for seq in seqs])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", gateway["source"]))
        for batch in shuffled:
            for d in batch:
                s.sendto(d, ("127.0.0.1", gateway["udp"]))
            time.sleep(0.002)


def stats(gateway) -> dict:
    """The gateway's stats of its one interface (GET /api/v1/stats)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{gateway['admin']}/api/v1/stats", timeout=10) as answer:
        (interface,) = json.load(answer)["interfaces"]
    return interface


def drops(interface: dict) -> int:
    """Packets the interface dropped, before a queue was chosen or on its queues."""
    return sum(interface["port_drops"].values()) + sum(sum(q["drops"].values()) for q in interface["rx_queues"])


def check_aggregate(burst, values: np.ndarray, batch: int) -> int:
    """An aggregate of batch `batch`: the oracle's samples in its filled
    slots, zeros in the empty ones it lists (flagged a timeout); returns
    how many slots it filled."""
    assert burst.batch_id == batch and burst.flags & dg.REORDERED
    missing = burst.missing_slots
    expected = oracle(batch).reshape(PER_BATCH, SAMPLES)
    expected[missing] = 0
    np.testing.assert_array_equal(values.reshape(PER_BATCH, SAMPLES), expected)
    assert bool(burst.flags & dg.REORDER_TIMEOUT) == bool(missing), (burst.flags, missing)
    assert burst.source_packets == PER_BATCH - len(missing) and burst.aggregate_slots == PER_BATCH
    return PER_BATCH - len(missing)


def account(gateway, sent: int, aggregates: int, filled: int) -> None:
    """Every packet sent is in one of the `aggregates` aggregates delivered
    (`filled` slots in all), or counted by the gateway as late, or dropped
    by reason; the plan's missing slots are exactly the empty slots the
    aggregates listed."""
    deadline = time.monotonic() + 10
    while True:
        interface = stats(gateway)
        (plan,) = interface["reorder"]
        placed, late, lost = plan["packets_placed"], plan["packets_late"], drops(interface)
        if placed + late + lost == sent or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert placed + late + lost == sent, interface
    assert placed == filled and plan["batches_dropped"] == 0, plan
    assert plan["packets_missing"] == aggregates * PER_BATCH - filled, plan


def test_a_plans_aggregates_are_float32_arrays_in_place_equal_to_the_oracle(gateway):
    subscription = dg.Subscription(gateway["socket"], "udp_rx", plan="by_batch")
    batches = 10
    send_batches(gateway, batches)
    filled = 0
    for batch in range(batches):
        burst = subscription.next(timeout=10)
        assert burst is not None, f"aggregate {batch}"
        (aggregate,) = burst.packets()
        values = np.frombuffer(aggregate, dtype=np.float32)
        filled += check_aggregate(burst, values, batch)
        # A view of the gateway's memory, not a copy: read-only, and two
        # views of the packet are the same bytes.
        assert not values.flags.writeable
        again = np.frombuffer(aggregate, dtype=np.float32)
        assert values.__array_interface__["data"][0] == again.__array_interface__["data"][0]
        # Released only once no view is left.
        with pytest.raises(BufferError):
            burst.release()
        del values, again
        burst.release()
    account(gateway, batches * PER_BATCH, batches, filled)
    # A with block whose views outlive it leaves the burst to their end.
    send_batches(gateway, 1, first=batches)
    with subscription.next(timeout=10) as burst:
        kept = np.frombuffer(burst.packets()[0], dtype=np.float32)
    assert kept.size == PER_BATCH * SAMPLES
    del kept


def test_a_packet_is_a_dlpack_tensor_in_place_and_holds_its_burst(gateway):
    subscription = dg.Subscription(gateway["socket"], "udp_rx", plan="by_batch")
    send_batches(gateway, 1)
    burst = subscription.next(timeout=10)
    (aggregate,) = burst.packets()
    assert aggregate.device == "cpu" and aggregate.__dlpack_device__() == (1, 0)
    tensor = np.from_dlpack(aggregate)
    assert tensor.dtype == np.uint8 and tensor.shape == (len(aggregate),)
    # The same bytes as the buffer view, at the same address: no copy.
    view = np.frombuffer(aggregate, dtype=np.uint8)
    assert tensor.__array_interface__["data"][0] == view.__array_interface__["data"][0]
    account(gateway, PER_BATCH, 1, check_aggregate(burst, tensor.view(np.float32), 0))
    del view
    with pytest.raises(BufferError):
        burst.release()
    # A capsule no one consumed gives its hold back when collected.
    aggregate.__dlpack__()
    del tensor
    with pytest.raises(BufferError, match="copy"):
        aggregate.__dlpack__(copy=True)
    burst.release()


WRITER = """
import sys, torch, daqiri_gateway as dg
subscription = dg.Subscription(sys.argv[1], "udp_rx", plan="by_batch")
print("subscribed", flush=True)
burst = subscription.next(timeout=20)
tensor = torch.from_dlpack(burst.packets()[0])
try:
    tensor.fill_(0)
    torch.cuda.synchronize()
    print("wrote", flush=True)
except RuntimeError as e:
    print("write refused:", e, flush=True)
"""


def test_a_gpu_plans_aggregates_are_torch_tensors_on_the_gpu_in_place_equal_to_the_oracle(gpu_gateway):
    import torch

    subscription = dg.Subscription(gpu_gateway["socket"], "udp_rx", plan="by_batch")
    # Another consumer, in a process of its own, tries to write into the
    # first aggregate: the gateway's memory is mapped read-only for it, so
    # its kernel faults in its own process and the aggregate stays whole.
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(gpu_gateway["socket"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert writer.stdout.readline().strip() == "subscribed"
    batches = 6
    send_batches(gpu_gateway, batches)
    out, _ = writer.communicate(timeout=60)
    assert "write refused" in out, out
    filled = 0
    for batch in range(batches):
        burst = subscription.next(timeout=10)
        assert burst is not None, f"aggregate {batch}"
        (aggregate,) = burst.packets()
        assert aggregate.device.startswith("cuda:"), aggregate.device
        with pytest.raises(BufferError, match="GPU memory"):
            memoryview(aggregate)
        tensor = torch.from_dlpack(aggregate)
        assert tensor.is_cuda and tensor.dtype == torch.uint8 and tensor.numel() == len(aggregate)
        # In place: the tensor is the gateway's memory as mapped here.
        assert tensor.data_ptr() == torch.from_dlpack(aggregate).data_ptr()
        values = tensor.view(torch.float32).cpu().numpy()
        filled += check_aggregate(burst, values, batch)
        with pytest.raises(BufferError):
            burst.release()
        del tensor
        burst.release()
    account(gpu_gateway, batches * PER_BATCH, batches, filled)


def test_a_queues_datagrams_arrive_byte_exact_and_the_end_is_told(gateway):
    subscription = dg.Subscription(gateway["socket"], "udp_rx", queue=0, slots=64)
    sent = [datagram(seq) for seq in range(200)]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in sent:
            # Not the plan's source port: the datagrams reach the queue as they are.
            s.sendto(d, ("127.0.0.1", gateway["udp"]))
    received = []
    deadline = time.monotonic() + 30
    while len(received) + drops(stats(gateway)) < len(sent):
        assert time.monotonic() < deadline, f"{len(received)} received, {stats(gateway)}"
        burst = subscription.next(timeout=1)
        if burst is not None:
            with burst:
                received.extend(bytes(packet) for packet in burst)
    # In order and byte-exact; any not received dropped by a reason counted.
    assert len(received) + drops(stats(gateway)) == len(sent)
    numbers = [int.from_bytes(d[:4], "big") for d in received]
    assert numbers == sorted(numbers) and all(d == datagram(n) for d, n in zip(received, numbers))
    gateway["process"].terminate()
    with pytest.raises(dg.Ended, match="the gateway stops"):
        while True:
            subscription.next(timeout=10)


def test_next_returns_none_once_its_timeout_passed(gateway):
    subscription = dg.Subscription(gateway["socket"], "udp_rx", queue=0)
    start = time.monotonic()
    assert subscription.next(timeout=0.3) is None
    assert 0.25 < time.monotonic() - start < 5


def test_a_subscription_to_what_is_not_there_is_refused_by_name(gateway):
    with pytest.raises(dg.Refused, match='no reorder plan "nope"'):
        dg.Subscription(gateway["socket"], "udp_rx", plan="nope")
    with pytest.raises(ValueError):
        dg.Subscription(gateway["socket"], "udp_rx", queue=0, plan="by_batch")
