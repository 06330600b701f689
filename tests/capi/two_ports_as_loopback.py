#!/usr/bin/env python3
"""Copies a DAQIRI config written for two ports with a wire between them as
one software-loopback interface, for a machine with no such ports.

The TX port's `tx` and the RX port's `rx` become one interface
(`loopback_ports`, address `loopback`, as DAQIRI's software-loopback
examples name it), `loopback: "sw"` makes it receive what it sends, and the
benchmark sections (`bench_tx`, `bench_rx`) name it, their placeholders
(`<1.2.3.4>`) filled with the values they show. Nothing else changes:
regions, queues, flows and cores stay as written.
  tests/capi/two_ports_as_loopback.py SOURCE DESTINATION
"""

import sys

import yaml

source, destination = sys.argv[1:]
# PyYAML reads YAML 1.1; DAQIRI's files declare 1.2 and use nothing newer.
text = "".join(line for line in open(source) if not line.startswith("%YAML"))
root = yaml.safe_load(text)
cfg = root["daqiri"]["cfg"]
senders = [i for i in cfg["interfaces"] if "tx" in i and "rx" not in i]
receivers = [i for i in cfg["interfaces"] if "rx" in i and "tx" not in i]
assert len(senders) == len(receivers) == 1 == len(cfg["interfaces"]) - 1, f"{source}: not one TX port and one RX port"
loop = {"name": "loopback_ports", "address": "loopback", "tx": senders[0]["tx"], "rx": receivers[0]["rx"]}
cfg["interfaces"] = [loop]
cfg["loopback"] = "sw"
for section in ("bench_tx", "bench_rx"):
    entries = root.get(section) or []
    for entry in entries if isinstance(entries, list) else [entries]:
        entry["interface_name"] = loop["name"]
        for key, value in entry.items():
            if isinstance(value, str) and value.startswith("<") and value.endswith(">"):
                entry[key] = value[1:-1]
with open(destination, "w") as out:
    yaml.safe_dump(root, out, sort_keys=False)
