#!/usr/bin/env bash
# The Python client's tests: installs the daqiri_gateway module (PyO3,
# built by maturin from gateway/python) with numpy and pytest into a venv of
# its own, and runs tests/python against the gateway binary built by cargo.
#   tests/python/run.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/python-venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check numpy pytest ./gateway/python
cargo build --quiet -p daqiri-gateway --bin daqiri-gateway
DAQIRI_GATEWAY=$PWD/target/debug/daqiri-gateway "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"
