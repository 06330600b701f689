#!/usr/bin/env python3
"""Copies a DAQIRI config with its cores folded onto this machine's.

Every `cpu_core` and `master_core` becomes itself modulo the number of
cores here, so DAQIRI's examples (written for 16-core hosts) run on fewer;
each `key=value` given after the paths sets that numeric key too (a
benchmark's `iterations`, `message_size`).
  tests/capi/fold_cores.py SOURCE DESTINATION [key=value ...]
"""

import os
import re
import sys

source, destination, *settings = sys.argv[1:]
cores = len(os.sched_getaffinity(0))  # what nproc counts: the cores this process may run on
text = open(source).read()
text = re.sub(r"(\b(?:cpu_core|master_core):\s*)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) % cores}", text)
for setting in settings:
    key, value = setting.split("=", 1)
    text = re.sub(rf"(\b{re.escape(key)}:\s*)\d+", rf"\g<1>{value}", text)
open(destination, "w").write(text)
