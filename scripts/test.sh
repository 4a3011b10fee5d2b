#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine. Installs and starts what the tests need first:
# the moto AWS emulator (EC2, SSM, SQS) on 127.0.0.1 for karpenter-cloudprovider-aws, stopped
# again by its PID when the tests end.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Property tests draw new random cases on every local run, to keep finding bugs; under CI
# they replay one fixed seed so a result can be reproduced exactly (failures found locally
# are kept in the *.proptest-regressions files, which every run replays first).
if [[ "${CI:-}" == "true" ]]; then
    export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}"
fi

scripts/aws-emulator.sh install
KARPENTER_AWS_TEST_ENDPOINT="$(scripts/aws-emulator.sh start)"
export KARPENTER_AWS_TEST_ENDPOINT
trap 'scripts/aws-emulator.sh stop' EXIT

cargo test --workspace --all-features --locked "$@"
