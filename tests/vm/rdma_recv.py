#!/usr/bin/python3
"""An independent RoCE peer for the VM tests, on rdma-core's pyverbs (none
of our code): listens on ADDR:PORT through rdma_cm, accepts one RC
connection and receives COUNT SENDs, checking that message k is
`rdma_send.message(k)` byte for byte, with the immediate
`rdma_send.immediate(k)` or none; prints how many it checked.

    tests/vm/rdma_recv.py ADDR PORT COUNT
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

# Receives kept posted, so a sender seldom waits for one (RNR).
POSTED = 32


def main() -> None:
    addr, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    info = AddrInfo(src=addr, src_service=port, port_space=cm.RDMA_PS_TCP, flags=cm.RAI_PASSIVE)
    cap = QPCap(max_send_wr=1, max_recv_wr=POSTED, max_send_sge=1, max_recv_sge=1)
    listener = CMID(creator=info, qp_init_attr=QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap))
    listener.listen()
    print("listening", flush=True)
    peer = listener.get_request()
    # Receives complete in the order they were posted: message k lands in
    # buffer k % POSTED, which is posted again once read.
    buffers = [peer.reg_msgs(LARGEST) for _ in range(POSTED)]
    for mr in buffers:
        peer.post_recv(mr, LARGEST)
    peer.accept()
    for k in range(count):
        wc = peer.get_recv_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            sys.exit(f"receive {k}: completion status {wc.status}")
        mr = buffers[k % POSTED]
        got = mr.read(wc.byte_len, 0)
        if k + POSTED < count:
            peer.post_recv(mr, LARGEST)
        if got != message(k):
            sys.exit(f"message {k}: {len(got)} bytes, expected {len(message(k))}: {got[:16].hex()}")
        carried = socket.ntohl(wc.imm_data) if wc.wc_flags & e.IBV_WC_WITH_IMM else None
        if carried != immediate(k):
            sys.exit(f"message {k}: immediate {carried}, expected {immediate(k)}")
    print(f"received {count} messages", flush=True)
    peer.disconnect()


if __name__ == "__main__":
    main()
