#!/usr/bin/env python3
"""Runs DAQIRI's GDS-write example (daqiri_example_gds_write, unchanged) on
one config and checks what it wrote: one burst of frames sent, looped back,
written by DAQIRI's writer calls synchronously and asynchronously
(daqiri_write_*_to_file_async, poll, destroy), as raw files (the example's
60 bytes of headers skipped) and as pcap; every file must hold the bytes
the example put into the frames.

Usage: gds_write_check.py PROGRAM CONFIG OUT_DIR   (tests/capi/daqiri_programs.sh
here, daqiri_programs_gpu.sh on the GPU machine)
"""
import pathlib
import re
import struct
import subprocess
import sys

program, config_path, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
config = open(config_path).read()
value = lambda key: int(re.search(rf"^\s*{key}:\s*(\d+)", config, re.M)[1])
batch, length, offset = value("batch_size"), value("header_size") + value("payload_size"), 60
for fmt in ("raw", "pcap"):
    folder = out / f"gds_{fmt}"
    folder.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([program, config_path, str(folder.resolve()), "gds", "--mode", "both", "--format", fmt],
                         capture_output=True, text=True, timeout=60)
    (out / f"gds_write_{fmt}.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, f"the GDS-write example (--format {fmt}) failed:\n{(run.stdout + run.stderr)[-3000:]}"

# The example's payload: byte `pos` of packet `pkt` is (pkt + pos - offset) & 0xff from the offset on.
tail = lambda pkt: bytes((pkt + pos - offset) & 0xFF for pos in range(offset, length))
for mode in ("sync", "async"):
    for pkt in range(batch):
        raw = (out / "gds_raw" / f"gds_{mode}_{pkt}").read_bytes()
        assert raw == tail(pkt), f"raw file gds_{mode}_{pkt} differs"
    with open(out / "gds_pcap" / f"gds_{mode}.pcap", "rb") as f:
        f.read(24)
        frames = []
        while head := f.read(16):
            frames.append(f.read(struct.unpack("<IIII", head)[2]))
    assert len(frames) == batch, f"gds_{mode}.pcap holds {len(frames)} records, not {batch}"
    for pkt, frame in enumerate(frames):
        assert len(frame) == length and frame[offset:] == tail(pkt), f"gds_{mode}.pcap record {pkt} differs"
memory = "GPU" if 'kind: "device"' in config else "host"
print(f"daqiri_programs: GDS-write example: {batch} frames through {memory} memory, written sync and async, "
      "raw and pcap, each as sent")
