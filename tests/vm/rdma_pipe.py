#!/usr/bin/python3
"""An independent RoCE peer for the conformance suite's soft-RoCE bed, on
rdma-core's pyverbs (none of our code): an RC client of SERVER:PORT through
rdma_cm that relays messages between the connection and its stdin/stdout,
each message framed as a 4-byte big-endian length, then its bytes.

    tests/vm/rdma_pipe.py send SERVER PORT   # stdin's messages, each one SEND
    tests/vm/rdma_pipe.py recv SERVER PORT   # each message received, to stdout

`send` keeps up to WINDOW sends in flight (the receiver's RNR retries pace
it) and disconnects at end of input; `recv` keeps WINDOW receives posted.
"""

import sys

import pyverbs.cm_enums as cm
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID
from pyverbs.qp import QPCap, QPInitAttr

LARGEST = 4096
WINDOW = 16


def connect(server: str, port: str) -> CMID:
    info = AddrInfo(dst=server, dst_service=port, port_space=cm.RDMA_PS_TCP)
    cap = QPCap(max_send_wr=WINDOW, max_recv_wr=WINDOW, max_send_sge=1, max_recv_sge=1)
    return CMID(creator=info, qp_init_attr=QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap, sq_sig_all=1))


def completed(wc, what: str) -> None:
    if wc.status != e.IBV_WC_SUCCESS:
        sys.exit(f"rdma_pipe: {what}: completion status {wc.status}")


def read_exact(stream, n: int) -> bytes:
    data = stream.read(n)
    return data if data is not None and len(data) == n else b""


def send(cmid: CMID) -> None:
    cmid.connect()
    buffers = [cmid.reg_msgs(LARGEST) for _ in range(WINDOW)]
    stdin, k = sys.stdin.buffer, 0
    while header := read_exact(stdin, 4):
        length = int.from_bytes(header, "big")
        data = read_exact(stdin, length) if length else b""
        if len(data) != length or length > LARGEST:
            sys.exit(f"rdma_pipe: message {k}: a frame of {length} bytes, cut short or past {LARGEST}")
        if k >= WINDOW:
            completed(cmid.get_send_comp(), f"send {k - WINDOW}")
        mr = buffers[k % WINDOW]
        mr.write(data, length)
        cmid.post_send(mr, 0, length)
        k += 1
    for done in range(max(0, k - WINDOW), k):
        completed(cmid.get_send_comp(), f"send {done}")
    cmid.disconnect()


def recv(cmid: CMID) -> None:
    # Receives complete in the order they were posted: message k lands in
    # buffer k % WINDOW, posted again once written out.
    buffers = [cmid.reg_msgs(LARGEST) for _ in range(WINDOW)]
    for mr in buffers:
        cmid.post_recv(mr, LARGEST)
    cmid.connect()
    stdout, k = sys.stdout.buffer, 0
    while True:
        wc = cmid.get_recv_comp()
        completed(wc, f"receive {k}")
        mr = buffers[k % WINDOW]
        data = mr.read(wc.byte_len, 0)
        cmid.post_recv(mr, LARGEST)
        stdout.write(len(data).to_bytes(4, "big") + data)
        stdout.flush()
        k += 1


def main() -> None:
    role, server, port = sys.argv[1:4]
    cmid = connect(server, port)
    {"send": send, "recv": recv}[role](cmid)


if __name__ == "__main__":
    main()
