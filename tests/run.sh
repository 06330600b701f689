#!/usr/bin/env bash
# The whole test suite, as README.md and .ci/run call it.
set -euo pipefail
cd "$(dirname "$0")/.."
ignored=$(tests/setup.sh)
cargo nextest run --workspace --no-fail-fast "$ignored"
cargo test --workspace --doc
