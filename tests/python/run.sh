#!/usr/bin/env bash
# The Python client's tests: installs the daqiri_gateway module (PyO3) the
# consumer image ships (its wheel, built by the image's maturin in release and
# kept by the sources' hash: tests/k8s/image.sh wheel) with numpy and pytest
# into a venv of its own, and runs tests/python against the gateway binary
# built by cargo.
#   tests/python/run.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/python-venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    "$(tests/k8s/image.sh wheel)"
"$venv/bin/pip" install --quiet --disable-pip-version-check numpy pytest
cargo build --quiet -p daqiri-gateway --bin daqiri-gateway
DAQIRI_GATEWAY=$PWD/target/debug/daqiri-gateway "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"
