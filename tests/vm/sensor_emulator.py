#!/usr/bin/python3
"""An instrument's sender for the VM tests, on rdma-core's pyverbs (none of
our code), sending as an FPGA such as Holoscan Sensor Bridge does: no
rdma_cm; a UC or RC queue pair brought up by hand with the receiver's
values, which a control plane reads from the gateway's status.

Frame n goes into page n % PAGES of the receiver's ring (the ring starts at
address 0): RDMA WRITEs of at most MTU bytes each carry its data, then an
RDMA WRITE with immediate n carries its 128-byte metadata record into the
page's last 128 bytes. Frames listed in WITHHELD are never sent, as if lost
on the wire; their sequence numbers are skipped all the same.

    tests/vm/sensor_emulator.py DEVICE LOCAL_IP UC|RC FRAMES WITHHELD

WITHHELD is a comma-separated list (or "-"). It prints `qpn N` (its queue
pair), reads `qpn Q rkey K page_size P pages N` (the receiver's) from
stdin, sends, and prints `sent F frames`.
"""

import socket
import sys
import time
from pathlib import Path

import pyverbs.enums as e
from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

METADATA = 128
MTU = 1024
PATTERN = bytes(range(251)) * 64


def frame(n: int, length: int) -> bytes:
    """The data of frame n: a pattern that starts where n says."""
    start = (n * 31) % 251
    return PATTERN[start : start + length]


def metadata(n: int, length: int) -> bytes:
    """Frame n's metadata record: its sequence number, its data bytes, a tag."""
    record = n.to_bytes(4, "big") + length.to_bytes(4, "big") + b"daqiri-sensor-emulator"
    return record.ljust(METADATA, b"\0")


def roce_v2_gid_index(device: str, ip: str) -> int:
    """The index of ip's RoCE v2 GID on the device's port 1."""
    port = Path("/sys/class/infiniband") / device / "ports/1"
    wanted = "0000:0000:0000:0000:0000:ffff:" + "".join(f"{int(o):02x}" for o in ip.split("."))
    wanted = wanted[:34] + ":" + wanted[34:]
    for gid in (port / "gids").iterdir():
        if gid.read_text().strip() != wanted:
            continue
        # An unused entry's type reads as an error; ours is in use.
        if (port / "gid_attrs/types" / gid.name).read_text().strip() == "RoCE v2":
            return int(gid.name)
    sys.exit(f"no RoCE v2 GID for {ip} on {device}")


def main() -> None:
    device, ip, transport, frames = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    withheld = set() if sys.argv[5] == "-" else {int(n) for n in sys.argv[5].split(",")}
    qp_type = {"UC": e.IBV_QPT_UC, "RC": e.IBV_QPT_RC}[transport]
    ctx = Context(name=device)
    pd = PD(ctx)
    cq = CQ(ctx, 64, None, None, 0)
    cap = QPCap(max_send_wr=32, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq, cap=cap, sq_sig_all=1))
    print(f"qpn {qp.qp_num}", flush=True)

    words = sys.stdin.readline().split()
    peer = dict(zip(words[0::2], (int(w) for w in words[1::2])))
    page_size, pages = peer["page_size"], peer["pages"]
    gid_index = roce_v2_gid_index(device, ip)
    gid = (Path("/sys/class/infiniband") / device / "ports/1/gids" / str(gid_index)).read_text().strip()
    attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
    attr.qp_access_flags = 0
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = peer["qpn"]
    attr.rq_psn = 0
    attr.sq_psn = 0
    attr.timeout, attr.retry_cnt, attr.rnr_retry = 14, 7, 7
    attr.max_rd_atomic, attr.max_dest_rd_atomic, attr.min_rnr_timer = 1, 1, 12
    attr.ah_attr = AHAttr(is_global=1, port_num=1, gr=GlobalRoute(dgid=GID(gid), sgid_index=gid_index, hop_limit=64))
    qp.to_rts(attr)

    data_length = page_size - METADATA
    mr = MR(pd, page_size, e.IBV_ACCESS_LOCAL_WRITE)
    sent = 0
    for n in range(frames):
        if n in withheld:
            continue
        mr.write(frame(n, data_length) + metadata(n, data_length), page_size)
        base = (n % pages) * page_size
        requests = []
        for offset in range(0, data_length, MTU):
            length = min(MTU, data_length - offset)
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf + offset, length, mr.lkey)])
            wr.set_wr_rdma(peer["rkey"], base + offset)
            requests.append(wr)
        last = SendWR(
            opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM,
            num_sge=1,
            imm_data=socket.htonl(n),
            sg=[SGE(mr.buf + data_length, METADATA, mr.lkey)],
        )
        last.set_wr_rdma(peer["rkey"], base + data_length)
        requests.append(last)
        for wr in requests:
            qp.post_send(wr)
        done = 0
        while done < len(requests):
            polled, wcs = cq.poll(len(requests) - done)
            for wc in wcs[:polled]:
                if wc.status != e.IBV_WC_SUCCESS:
                    sys.exit(f"frame {n}: completion status {wc.status}")
            done += polled
        sent += 1
        # A sensor's frame period: the receiver's application keeps up.
        time.sleep(0.004)
    print(f"sent {sent} frames", flush=True)


if __name__ == "__main__":
    main()
