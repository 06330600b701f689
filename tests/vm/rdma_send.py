#!/usr/bin/python3
"""An independent RoCE peer for the VM tests, on rdma-core's pyverbs (none
of our code): connects to SERVER:PORT through rdma_cm with an RC queue pair
and SENDs COUNT messages, FIRST (0 unless given) and on, message k being
`message(k)` below, each waited for until its send completes (so the
receiver's RNR retries pace it). With --hold it says "connected" once
connected and sends once a line arrives on its input, so that several
peers can be connected at once.

    tests/vm/rdma_send.py [--hold] SERVER PORT COUNT [FIRST]
"""

import sys

import pyverbs.cm_enums as cm
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID
from pyverbs.qp import QPCap, QPInitAttr

LARGEST = 4096


def message(k: int) -> bytes:
    """Message k: 1 to 4096 bytes, its index first, then a pattern."""
    length = 1 + (k * 997) % LARGEST
    body = k.to_bytes(4, "big") + bytes((k + i) & 0xFF for i in range(max(0, length - 4)))
    return body[:length]


def immediate(k: int):
    """The immediate message k carries when the gateway sends it (every
    third message, as gateway/engine/tests/vm_rdma.rs sends them); this
    peer sends none."""
    return 0xDA000000 + k if k % 3 == 1 else None


def main() -> None:
    hold = "--hold" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--hold"]
    server, port, count = args[0], args[1], int(args[2])
    first = int(args[3]) if len(args) > 3 else 0
    info = AddrInfo(dst=server, dst_service=port, port_space=cm.RDMA_PS_TCP)
    cap = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    cmid = CMID(creator=info, qp_init_attr=QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap, sq_sig_all=1))
    cmid.connect()
    mr = cmid.reg_msgs(LARGEST)
    if hold:
        print("connected", flush=True)
        sys.stdin.readline()
    for k in range(first, first + count):
        data = message(k)
        mr.write(data, len(data))
        cmid.post_send(mr, 0, len(data))
        wc = cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            sys.exit(f"send {k}: completion status {wc.status}")
    cmid.disconnect()
    print(f"sent {count} messages")


if __name__ == "__main__":
    main()
