#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine. Installs and starts what the tests need first:
# - the moto AWS emulator (EC2, SSM, SQS) on 127.0.0.1 for karpenter-cloudprovider-aws;
# - a real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
#   kube-controller-manager) on 127.0.0.1 for the operator's end-to-end suite, built once
#   from the Go module proxy and cached outside the clone (scripts/control-plane.sh);
# - the `karpenter` binary the end-to-end suite runs, built the way the README builds it;
# - Chromium from the Debian packages, in which simulator/tests/html_report.rs opens the HTML
#   report of `karpenter simulate --report` (KARPENTER_CHROMIUM).
# Both servers are stopped again by their PIDs when the tests end.
#
# KARPENTER_E2E_SKIP=1 leaves the control plane out (the end-to-end tests then skip); it is
# refused under CI=true, where a missing control plane is a failure. Likewise a Chromium that
# cannot be installed fails the run under CI=true, and only skips the browser test locally.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
start=$(date +%s)
step() { echo "==> test.sh: $* ($(( $(date +%s) - start ))s)"; }
# Property tests draw new random cases on every local run, to keep finding bugs; under CI
# they replay one fixed seed so a result can be reproduced exactly (failures found locally
# are kept in the *.proptest-regressions files, which every run replays first).
if [[ "${CI:-}" == "true" ]]; then
    export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}"
    if [[ -n "${KARPENTER_E2E_SKIP:-}" ]]; then
        echo "KARPENTER_E2E_SKIP is not allowed under CI=true" >&2
        exit 1
    fi
fi

# Debian's chromium at /usr/bin/chromium, installed when missing; the package lists are
# fetched first only when they do not offer it (a fresh container has none).
install_chromium() {
    [[ -x /usr/bin/chromium ]] && return 0
    local sudo=()
    [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
    if ! apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        "${sudo[@]}" apt-get update
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends chromium
}

cleanup() {
    scripts/aws-emulator.sh stop || true
    [[ -n "${KARPENTER_E2E_SKIP:-}" ]] || scripts/control-plane.sh stop || true
}
trap cleanup EXIT

step "Chromium (the HTML report's browser test)"
if install_chromium; then
    export KARPENTER_CHROMIUM=/usr/bin/chromium
elif [[ "${CI:-}" == "true" ]]; then
    echo "cannot install chromium, which the HTML report's test needs under CI=true" >&2
    exit 1
else
    echo "WARNING: chromium could not be installed: the HTML report's browser test will skip" >&2
fi

step "AWS emulator"
scripts/aws-emulator.sh install
KARPENTER_AWS_TEST_ENDPOINT="$(scripts/aws-emulator.sh start)"
export KARPENTER_AWS_TEST_ENDPOINT

if [[ -z "${KARPENTER_E2E_SKIP:-}" ]]; then
    step "control plane: build (cached in ~/.cache/karpenter-rs) and start"
    scripts/control-plane.sh build
    # The binary under test, built as the README's `cargo run --release` builds it (the
    # workspace's default members, without the AWS SDK).
    step "karpenter binary (cargo build --release)"
    cargo build --release --locked
    export KARPENTER_E2E_BIN="$PWD/target/release/karpenter"
    KARPENTER_E2E_KUBECONFIG="$(scripts/control-plane.sh start)"
    export KARPENTER_E2E_KUBECONFIG
    KARPENTER_E2E_STATE="$(dirname "$KARPENTER_E2E_KUBECONFIG")"
    export KARPENTER_E2E_STATE
    KARPENTER_E2E_TOOLS="$(scripts/control-plane.sh bin)"
    export KARPENTER_E2E_TOOLS
    rm -f target/e2e/timings.tsv
fi

step "cargo test"
cargo test --workspace --all-features --locked "$@"
if [[ -f target/e2e/timings.tsv ]]; then
    echo "end-to-end timings:"
    column -t -s $'\t' target/e2e/timings.tsv || cat target/e2e/timings.tsv
fi
step "done"
