#!/usr/bin/env python3
"""Config acceptance, differential: DAQIRI 2026.7's own parser (through
config_check, built by tests/reference/build.sh) against the gateway's
`check --lenient` (2026.7 warns on nothing and reads what it knows, as
`--lenient` does), on DAQIRI's example configs, ours, and configs derived
from them by seeded mutations (a key removed, a value of another type, an
unknown key added, a number out of range).

Every disagreement is either explained by a known difference (KNOWN below:
what each side does and why, also in docs/configs.md) or printed as
unexplained, which fails the run.

    tests/reference/config_diff.py [--mutants N] [--seed S] [--show N]

Prints the counts (agreements, known differences by kind, unexplained) and
exits 1 when any disagreement is unexplained, 3 (skipped, saying why) when
the reference cannot be built here for want of its sources.
"""

import argparse
import copy
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


# The exit status that says the reference cannot be built here (no sources).
SKIPPED = 3


def reference_build(what):
    """The folder tests/reference/build.sh prints; its log goes to our stderr.
    Without the reference's sources this run is skipped (exit 3), saying why."""
    out = subprocess.run([ROOT / "tests/reference/build.sh", what], stdout=subprocess.PIPE, text=True)
    if out.returncode == SKIPPED:
        print(f"config_diff: SKIPPED: the reference cannot be built here ({what}: no sources)", file=sys.stderr)
        sys.exit(SKIPPED)
    if out.returncode != 0:
        sys.exit(f"config_diff: tests/reference/build.sh {what} failed (exit {out.returncode})")
    return pathlib.Path(out.stdout.strip())


# Known differences, each also in docs/configs.md ("Against DAQIRI's own
# parser"): (name, why, who refuses, where to look, pattern). "who refuses"
# is the side that calls the config invalid; the pattern is searched in the
# gateway's error lines ("ours"), in DAQIRI's log ("theirs"), or in what the
# mutation did ("mutation": only derived configs, never a shipped one).
KNOWN = [
    ("typed-scalars", "DAQIRI 2026.7 reads scalars through yaml-cpp, which gives any scalar as a string where a "
     "string goes and skips a section that is not a map; the gateway, as DAQIRI's current main (#302, #315), "
     "refuses a value of the wrong type", "gateway", "ours",
     r"invalid type: |invalid value: |unknown variant|is not a core index|is not a port or port range"),
    ("unknown-key-that-steers", "even --lenient refuses an unknown key in a queue, a flow's match or action, or a "
     "reorder config, where ignoring it would change what lands where; DAQIRI 2026.7 ignores every unknown key",
     "gateway", "ours", r"unknown key in a (queue|reorder config|flow's action|flow's match)"),
    ("ranges", "ranges the gateway checks before start and DAQIRI's parser does not (ports, cores, sizes, "
     "regions' total)", "gateway", "ours", r"out of range|is too large|is negative|add up to"),
    ("references", "what the gateway checks across sections before start and DAQIRI's parser does not: every "
     "region and queue named exists, there is an interface, only socket workers go unpinned, addresses parse, "
     "a plan's batches fit its queue's bursts",
     "gateway", "ours",
     r"is not defined|no interfaces are defined|does not exist on this interface|an unpinned worker|not an IP address"
     r"|fewer than the plan's"),
    ("version", "the gateway refuses a config version other than 1, the only one DAQIRI has defined; DAQIRI "
     "2026.7 reads the key and checks nothing", "gateway", "ours", r"version \d+ is not supported"),
    ("queue-cores", "the gateway refuses an indirect queue without cpu_core (its worker would have no core); "
     "DAQIRI 2026.7 holds cpu_core as a string and reads null as an empty one", "gateway", "ours",
     r"indirect queues need cpu_core"),
    ("required-by-daqiri", "DAQIRI 2026.7 requires master_core, stream_type, each interface's address, each "
     "region's affinity, each reorder config's payload_byte_offset (and roce_config with a roce:// endpoint); "
     "the gateway has defaults for them",
     "daqiri", "theirs",
     r'first invalid key: "(master_core|affinity|address|payload_byte_offset)"'
     r"|Missing required field .stream_type.|Missing .roce_config."),
    ("null-is-absent", "the gateway reads `key: null` as the key left out (its default); DAQIRI 2026.7 refuses a "
     "null where it wants a number", "daqiri", "mutation", r" = null$"),
    ("wider-integers", "the gateway holds affinity and bit offsets in 32 bits, DAQIRI 2026.7 in 16, so 65536 "
     "parses here and not there", "daqiri", "mutation", r"\.(affinity|bit_offset) = 65536$"),
    ("direct-socket-queues", "configs/socket_udp_direct.yaml is our extension (a socket queue polled directly, "
     "with no cpu_core); DAQIRI 2026.7 does not load it, nor what is derived from it", "daqiri", "mutation",
     r"^socket_udp_direct\.yaml: "),
]


def explain(our_valid, our_lines, their_log, what):
    """The known difference behind a disagreement, or None."""
    for name, _, refuser, where, pattern in KNOWN:
        if (refuser == "gateway") != (not our_valid):
            continue
        text = {"ours": "\n".join(our_lines[:1]), "theirs": their_log, "mutation": what}[where]
        if re.search(pattern, text, re.MULTILINE):
            return name
    return None


def mutate(config, rng):
    """One seeded change somewhere under daqiri.cfg; returns (mutant, what)."""
    mutant = copy.deepcopy(config)
    cfg = mutant.get("daqiri", {}).get("cfg", mutant)
    # Every (container, key) pair under cfg.
    places = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                places.append((node, key, f"{path}.{key}"))
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                places.append((node, index, f"{path}[{index}]"))
                walk(value, f"{path}[{index}]")

    walk(cfg, "daqiri.cfg")
    container, key, path = rng.choice(places)
    kind = rng.choice(["remove", "retype", "unknown", "range", "negative"])
    if kind == "remove":
        del container[key]
        return mutant, f"removed {path}"
    if kind == "unknown":
        target = container if isinstance(container, dict) else container[key]
        if isinstance(target, dict):
            target["bogus_key"] = 1
            return mutant, f"unknown key beside {path}"
        kind = "retype"
    if kind == "retype":
        value = rng.choice(["text", 1.5, True, [], {}, None])
        container[key] = value
        return mutant, f"{path} = {json.dumps(value)}"
    if kind == "range":
        container[key] = rng.choice([2**16, 2**32, 2**40])
        return mutant, f"{path} = {container[key]}"
    container[key] = -1
    return mutant, f"{path} = -1"


def daqiri_verdicts(check, files):
    """{file: (valid, log)} from DAQIRI's parser, one process per file
    (a crash or abort is a verdict too)."""
    env = dict(os.environ)
    if subprocess.run(["sh", "-c", "ldconfig -p | grep -q 'libcuda.so.1 '"]).returncode != 0:
        env["LD_LIBRARY_PATH"] = str(reference_build("cuda") / "lib/stubs")
    verdicts = {}
    for file in files:
        run = subprocess.run([check, file], capture_output=True, text=True, env=env, timeout=30)
        if run.returncode < 0:
            verdicts[file] = (False, f"killed by signal {-run.returncode}: {run.stderr[-300:]}")
        else:
            verdicts[file] = ("\tvalid" in run.stdout, run.stderr)
    return verdicts


def our_verdicts(gateway, files):
    """{file: (valid, ["path: message", ...])} from `check --json --lenient`."""
    verdicts = {}
    for start in range(0, len(files), 200):
        chunk = files[start : start + 200]
        run = subprocess.run([gateway, "check", "--json", "--lenient", *chunk], capture_output=True, text=True)
        for line in run.stdout.splitlines():
            found = json.loads(line)
            lines = [
                f"{d.get('path', '')}: {d.get('message', '')}"
                for d in found["diagnostics"]
                if d.get("severity", "error") == "error"
            ]
            verdicts[found["file"]] = (found["valid"], lines)
    return verdicts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--show", type=int, default=5, help="examples shown per kind")
    parser.add_argument("--gateway", default=str(ROOT / "target/release/daqiri-gateway"))
    args = parser.parse_args()

    daqiri = reference_build("daqiri")
    check = reference_build("config-check")
    seeds = sorted((daqiri / "bin").glob("*.yaml")) + sorted((ROOT / "configs").glob("*.yaml"))
    work = pathlib.Path(tempfile.mkdtemp(prefix="config-diff-"))
    files, origin = [], {}
    for seed in seeds:
        files.append(str(seed))
        origin[str(seed)] = f"{seed.name}: as shipped"
    rng = random.Random(args.seed)
    parsed = [(seed, yaml.safe_load(seed.read_text())) for seed in seeds]
    for n in range(args.mutants):
        seed, config = rng.choice(parsed)
        mutant, what = mutate(config, rng)
        path = work / f"{n:05d}-{seed.stem}.yaml"
        path.write_text(yaml.safe_dump(mutant, sort_keys=False))
        files.append(str(path))
        origin[str(path)] = f"{seed.name}: {what}"

    theirs = daqiri_verdicts(check / "daqiri_config_check", files)
    ours = our_verdicts(args.gateway, files)
    agree, known, unexplained = 0, {}, []
    for file in files:
        ov, our_lines = ours[file]
        dv, their_log = theirs[file]
        if ov == dv:
            agree += 1
            continue
        name = explain(ov, our_lines, their_log, origin[file])
        if name:
            known.setdefault(name, []).append(file)
        else:
            unexplained.append(file)

    def show(file):
        ov, our_lines = ours[file]
        dv, their_log = theirs[file]
        reason = [line for line in their_log.splitlines() if "ERROR" in line or "signal" in line][-1:]
        print(f"  {origin[file]} ({file})")
        print(f"    gateway: {'valid' if ov else 'invalid: ' + '; '.join(our_lines)[:300]}")
        print(f"    DAQIRI:  {'valid' if dv else 'invalid: ' + ' '.join(reason)[-300:]}")

    print(f"{len(files)} configs ({len(seeds)} shipped, {args.mutants} mutants, seed {args.seed}): {agree} agree")
    for name, why, *_ in KNOWN:
        print(f"{len(known.get(name, []))} known difference '{name}': {why}")
        for file in known.get(name, [])[: args.show]:
            show(file)
    print(f"{len(unexplained)} unexplained")
    for file in unexplained:
        show(file)
    if not unexplained:
        shutil.rmtree(work)
        return 0
    print(f"the derived configs stay in {work}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
