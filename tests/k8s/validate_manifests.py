#!/usr/bin/env python3
"""Validates rendered Kubernetes manifests (stdin, multi-document YAML).

- Built-in kinds and CRDs: kubernetes-validate against the real schemas of
  the given Kubernetes version, strict (unknown fields are errors).
- Our custom resources (kind DaqiriPort / DaqiriFlow, from samples): the
  openAPIV3Schema of the CRDs in the same input, with jsonschema.
- ServiceMonitor (no schema offline): every endpoint port exists on a
  Service its selector matches.

Prints one line per object; exits 1 on the first class of failure found.
"""
import sys

import jsonschema
import kubernetes_validate
import yaml

version = sys.argv[1]
extra = sys.argv[2:]  # files of custom resources to check against the CRDs
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
failed = False


def fail(what, why):
    global failed
    failed = True
    print(f"FAIL {what}: {why}")


crds = {}
for doc in docs:
    what = f"{doc['kind']}/{doc['metadata']['name']}"
    if doc["kind"] == "CustomResourceDefinition":
        for v in doc["spec"]["versions"]:
            crds[(doc["spec"]["group"] + "/" + v["name"], doc["spec"]["names"]["kind"])] = v["schema"]["openAPIV3Schema"]
    if doc["apiVersion"].startswith("monitoring.coreos.com/"):
        continue
    try:
        kubernetes_validate.validate(doc, version, strict=True)
        print(f"ok   {what}")
    except kubernetes_validate.ValidationError as e:
        fail(what, f"{'.'.join(str(p) for p in e.path)}: {e.message}")

services = [d for d in docs if d["kind"] == "Service"]
for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
    wanted = monitor["spec"]["selector"]["matchLabels"]
    matched = [s for s in services if wanted.items() <= s["metadata"].get("labels", {}).items()]
    ports = {p["name"] for s in matched for p in s["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        if endpoint["port"] not in ports:
            fail(f"ServiceMonitor/{monitor['metadata']['name']}", f"port {endpoint['port']} is on no selected Service ({sorted(ports)})")
    if matched:
        print(f"ok   ServiceMonitor/{monitor['metadata']['name']} ({len(matched)} services)")

for path in extra:
    with open(path) as f:
        for doc in (d for d in yaml.safe_load_all(f) if d):
            schema = crds.get((doc["apiVersion"], doc["kind"]))
            what = f"{path}: {doc['kind']}/{doc['metadata']['name']}"
            if schema is None:
                fail(what, "no CRD for it in the rendered chart")
                continue
            try:
                jsonschema.validate(doc, schema)
                print(f"ok   {what}")
            except jsonschema.ValidationError as e:
                fail(what, f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}")

sys.exit(1 if failed else 0)
