#!/usr/bin/python3
"""An independent RoCE peer for the VM tests, on rdma-core's pyverbs (none
of our code) whose memory the gateway writes into or reads from: listens
on ADDR:PORT through rdma_cm and, once a connection request came,
registers COUNT slots of `rdma_send.LARGEST` bytes on it, prints
`target ADDRESS RKEY` and accepts it (one RC connection).

write: the gateway writes message k into slot k with an RDMA WRITE, with
immediate where `rdma_send.immediate(k)` gives one (each such WRITE also
completes a receive here, in order); the last message carries one. Once
it completed, every slot is checked byte for byte (RC places a WRITE
before any that follows it); prints how many it checked.

read: slot k holds message k, open to remote reads; the gateway reads
them; once a line comes on stdin, prints `served` and disconnects.

sink: the slots are open to remote writes, and nothing is checked (a
throughput bench writes there); once a line comes on stdin, prints
`served` and disconnects.

    tests/vm/rdma_target.py ADDR PORT COUNT write|read|sink
"""

import os
import socket
import sys

import pyverbs.cm_enums as cm
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID
from pyverbs.qp import QPCap, QPInitAttr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rdma_send import LARGEST, immediate, message  # noqa: E402

# Receives kept posted for the immediates (a WRITE with immediate consumes one).
POSTED = 32


def listen(addr: str, port: str) -> tuple[CMID, CMID]:
    """The listener on ADDR:PORT (kept: pyverbs closes what it made with
    it), and a connection request, not accepted yet."""
    info = AddrInfo(src=addr, src_service=port, port_space=cm.RDMA_PS_TCP, flags=cm.RAI_PASSIVE)
    cap = QPCap(max_send_wr=1, max_recv_wr=POSTED, max_send_sge=1, max_recv_sge=1)
    listener = CMID(creator=info, qp_init_attr=QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap))
    listener.listen()
    return listener, listener.get_request()


def serve(addr: str, port: str, count: int, mode: str) -> None:
    """Memory open to remote reads (each slot its message) or writes, until told to stop."""
    _listener, peer = listen(addr, port)
    if mode == "read":
        source = peer.reg_read(count * LARGEST)
        for k in range(count):
            source.write(message(k), len(message(k)), k * LARGEST)
    else:
        source = peer.reg_write(count * LARGEST)
    print(f"target {source.buf} {source.rkey}", flush=True)
    peer.accept()
    sys.stdin.readline()
    print("served", flush=True)
    peer.disconnect()


def main() -> None:
    addr, port, count, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode in ("read", "sink"):
        serve(addr, port, count, mode)
        return
    announced = [k for k in range(count) if immediate(k) is not None]
    if not announced or announced[-1] != count - 1:
        sys.exit(f"message {count - 1} carries no immediate: nothing would say the last WRITE landed")
    _listener, peer = listen(addr, port)
    target = peer.reg_write(count * LARGEST)
    notes = peer.reg_msgs(POSTED)
    for _ in range(POSTED):
        peer.post_recv(notes, 1)
    print(f"target {target.buf} {target.rkey}", flush=True)
    peer.accept()
    for i, k in enumerate(announced):
        wc = peer.get_recv_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            sys.exit(f"immediate {i}: completion status {wc.status}")
        if wc.opcode != e.IBV_WC_RECV_RDMA_WITH_IMM:
            sys.exit(f"immediate {i}: opcode {wc.opcode}, not a WRITE with immediate")
        carried = socket.ntohl(wc.imm_data)
        if carried != immediate(k) or wc.byte_len != len(message(k)):
            sys.exit(f"message {k}: immediate {carried:#x} of {wc.byte_len} bytes, expected {immediate(k):#x}")
        if i + POSTED < len(announced):
            peer.post_recv(notes, 1)
    for k in range(count):
        got = target.read(len(message(k)), k * LARGEST)
        if got != message(k):
            sys.exit(f"slot {k}: {got[:16].hex()}, expected {message(k)[:16].hex()}")
    print(f"checked {count} writes", flush=True)
    peer.disconnect()


if __name__ == "__main__":
    main()
