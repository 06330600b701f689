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

Faults, as a broken or misprogrammed sender makes them (each listed frame
is sent, and lost, that way; the sender's queue pair is programmed right
again after each):
    --outside N,..      frame N is written just past the ring's end
    --misaddressed K    the first K frames go to a queue pair nobody has
    --wrong-psn K       the first K frames start at a PSN the receiver
                        does not expect
It prints `error frame N: WHAT` for each frame its queue pair reports an
error for (`status S`, an ibv_wc_status) or does not complete within a
second (soft-RoCE retries a NAKed sequence for ever; a NIC gives up).
"""

import argparse
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


def frame_list(text: str) -> set[int]:
    return set() if text == "-" else {int(n) for n in text.split(",")}


class Sender:
    """The emulator's queue pair and what it is programmed with."""

    def __init__(self, device: str, ip: str, qp_type: int):
        self.ctx = Context(name=device)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64, None, None, 0)
        cap = QPCap(max_send_wr=32, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, cap=cap, sq_sig_all=1))
        self.gid_index = roce_v2_gid_index(device, ip)
        self.gid = (Path("/sys/class/infiniband") / device / "ports/1/gids" / str(self.gid_index)).read_text().strip()

    def program(self, dest_qpn: int, psn: int) -> None:
        """From any state to RTS towards dest_qpn, the first PSN psn."""
        self.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
        attr.qp_access_flags = 0
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = dest_qpn
        attr.rq_psn = 0
        attr.sq_psn = psn
        attr.timeout, attr.retry_cnt, attr.rnr_retry = 14, 7, 7
        attr.max_rd_atomic, attr.max_dest_rd_atomic, attr.min_rnr_timer = 1, 1, 12
        gr = GlobalRoute(dgid=GID(self.gid), sgid_index=self.gid_index, hop_limit=64)
        attr.ah_attr = AHAttr(is_global=1, port_num=1, gr=gr)
        self.qp.to_rts(attr)

    def send(self, requests: list, patience: float) -> str | None:
        """Posts requests and waits for their completions, patience seconds
        at most: what went wrong, if anything."""
        for wr in requests:
            self.qp.post_send(wr)
        done, error = 0, None
        deadline = time.monotonic() + patience
        while done < len(requests):
            if time.monotonic() > deadline:
                # soft-RoCE retries a NAKed sequence for ever where a NIC gives up.
                return error or f"{len(requests) - done} of {len(requests)} sends not completed in {patience} s"
            polled, wcs = self.cq.poll(len(requests) - done)
            for wc in wcs[:polled]:
                if wc.status != e.IBV_WC_SUCCESS and error is None:
                    error = f"status {wc.status}"
            done += polled
        return error


def main() -> None:
    parser = argparse.ArgumentParser(description="an emulated RoCE sensor")
    parser.add_argument("device")
    parser.add_argument("ip")
    parser.add_argument("transport", choices=["UC", "RC"])
    parser.add_argument("frames", type=int)
    parser.add_argument("withheld", type=frame_list)
    parser.add_argument("--outside", type=frame_list, default=set())
    parser.add_argument("--misaddressed", type=int, default=0)
    parser.add_argument("--wrong-psn", type=int, default=0)
    args = parser.parse_args()
    qp_type = {"UC": e.IBV_QPT_UC, "RC": e.IBV_QPT_RC}[args.transport]
    sender = Sender(args.device, args.ip, qp_type)
    print(f"qpn {sender.qp.qp_num}", flush=True)

    words = sys.stdin.readline().split()
    peer = dict(zip(words[0::2], (int(w) for w in words[1::2])))
    page_size, pages = peer["page_size"], peer["pages"]
    # No queue pair on the device has this number (numbers are handed out from the low end).
    nobody = 0xFFFFF0
    misprogrammed = args.misaddressed > 0 or args.wrong_psn > 0
    sender.program(nobody if args.misaddressed else peer["qpn"], 4242 if args.wrong_psn else 0)

    data_length = page_size - METADATA
    mr = MR(sender.pd, page_size, e.IBV_ACCESS_LOCAL_WRITE)
    sent = 0
    for n in range(args.frames):
        if n in args.withheld:
            continue
        if misprogrammed and n == max(args.misaddressed, args.wrong_psn):
            sender.program(peer["qpn"], 0)
            misprogrammed = False
        mr.write(frame(n, data_length) + metadata(n, data_length), page_size)
        base = (pages if n in args.outside else n % pages) * page_size
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
        faulty = misprogrammed or n in args.outside
        error = sender.send(requests, 1.0 if faulty else 10.0)
        if error is not None:
            print(f"error frame {n}: {error}", flush=True)
            if not faulty:
                sys.exit(f"frame {n}: {error}")
            # Programmed again, as a control plane does after a sender's error.
            if not misprogrammed:
                sender.program(peer["qpn"], 0)
        if not faulty:
            sent += 1
        # A sensor's frame period: the receiver's application keeps up.
        time.sleep(0.004)
    print(f"sent {sent} frames", flush=True)


if __name__ == "__main__":
    main()
