#!/usr/bin/env bash
# Builds the tests the VM test bed runs (tests/vm/suite.sh), here, and
# writes what nextest needs to run them there without cargo.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p target/vm
tests=(-p daqiri --features dpdk,af_xdp,rdma --test conformance --test vm --test vm_rdma)
cargo nextest list --cargo-quiet "${tests[@]}" --list-type binaries-only --message-format json >target/vm/binaries.json
cargo metadata --format-version 1 >target/vm/cargo-metadata.json
