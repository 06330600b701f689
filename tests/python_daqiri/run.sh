#!/usr/bin/env bash
# DAQIRI's Python API (`import daqiri`, gateway/python-daqiri) in-process
# on our engine: tests/python_daqiri/test_daqiri.py, in a network namespace
# of its own where this may (root; the tests use fixed loopback ports), but
# the S3 writer's, which uploads to the suite's S3 server (tests/s3/server.sh).
#   tests/python_daqiri/run.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
python=$(tests/python_daqiri/venv.sh)
run=("$python" -m pytest -q -p no:cacheprovider tests/python_daqiri "$@")
if [[ $EUID == 0 ]]; then
    unshare --net bash -c 'ip link set lo up && "$@"' run "${run[@]}" -k "not s3_writer"
    # The S3 writer's test reaches the suite's S3 server on this namespace's loopback.
    "${run[@]}" -k s3_writer
else
    "${run[@]}"
fi
