#!/usr/bin/env bash
# A venv with DAQIRI's Python module `daqiri` (gateway/python-daqiri, built
# by maturin with the test profile, which reuses the suite's engine build),
# pytest and PyYAML; prints its python. Used by run.sh and by
# tests/capi/daqiri_programs.sh (DAQIRI's Python example).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/python-daqiri-venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv" >&2
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install --quiet --disable-pip-version-check \
    pytest pyyaml ./gateway/python-daqiri >&2
echo "$PWD/$venv/bin/python"
