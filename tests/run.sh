#!/usr/bin/env bash
# The whole test suite, as README.md and .ci/run call it.
set -euo pipefail
cd "$(dirname "$0")/.."
ignored=$(tests/setup.sh)
cargo nextest run --workspace --no-fail-fast "$ignored"
cargo test --workspace --doc
# The DPDK backend on DPDK's virtual devices (setup.sh installed DPDK).
# The engine's unit tests with it (the rte_flow translation among them) and
# its tests on virtual devices.
cargo nextest run -p daqiri --features dpdk --lib --test dpdk --no-fail-fast "$ignored"
# GPU tests: built with the cuda feature, run where a GPU is, else each
# reported as skipped (tests/gpu/run.sh on the GPU machine runs them).
tests/gpu/build.sh >/dev/null
target/gpu-tests/run.sh
