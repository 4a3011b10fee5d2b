#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine. Installs what the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
cargo test --workspace --all-features --locked "$@"
