#!/usr/bin/env bash
# Side by side with upstream Karpenter: the same waves of pods on a fresh control plane, once
# with upstream Karpenter's kwok build (scripts/upstream-karpenter.sh) and once with
# `karpenter controller --cloud-provider fake`, then one comparison table.
#
#   scripts/peer-bench.sh                      # the full run (hours)
#   scripts/peer-bench.sh --quick              # a tenth of the pods, shorter quiet windows
#   scripts/peer-bench.sh --only basic,scale   # some scenarios (see docs/benchmarks.md)
#   scripts/peer-bench.sh --peers karpenter-rs # one controller only
#   scripts/peer-bench.sh --suite controller-scale --peers karpenter-rs
#                                              # our controller from 1,000 to 10,000 pods
#
# Results go to target/peer-bench/<suite>[-quick]/ (override with --out DIR): one JSON per
# controller, the controllers' and control plane's logs, and table.md, which is also printed.
# The control plane uses KARPENTER_E2E_API_PORT / KARPENTER_E2E_ETCD_PORT like the tests.
# Everything this script starts is stopped again by PID when it exits.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

QUICK=()
ONLY=()
PEERS="upstream,karpenter-rs"
SUITE=peers
OUT=""
KEEP_AUDIT=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=(--quick) ;;
    --only) ONLY=(--only "$2"); shift ;;
    --peers) PEERS="$2"; shift ;;
    --suite) SUITE="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --keep-audit) KEEP_AUDIT=true ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "peer-bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$ROOT/target/peer-bench/$SUITE${QUICK:+-quick}}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
QPS="${KUBE_CLIENT_QPS:-200}"
BURST="${KUBE_CLIENT_BURST:-300}"
METRICS_PORT="${KARPENTER_BENCH_METRICS_PORT:-18531}"
HEALTH_PORT="${KARPENTER_BENCH_HEALTH_PORT:-18532}"
CONTROLLER_USER="system:serviceaccount:karpenter:karpenter"
KWOK_USER="system:serviceaccount:karpenter:kwok"

log() { echo "peer-bench: $*" >&2; }

OURS_PID=""
cleanup() {
  if [[ -n "$OURS_PID" ]] && kill -0 "$OURS_PID" 2>/dev/null; then
    kill "$OURS_PID" 2>/dev/null || true
    wait "$OURS_PID" 2>/dev/null || true
  fi
  KARPENTER_UPSTREAM_DIR="$OUT/upstream/controller" scripts/upstream-karpenter.sh stop || true
  for peer in upstream karpenter-rs; do
    KARPENTER_E2E_DIR="$OUT/$peer/control-plane" scripts/control-plane.sh stop || true
  done
}
trap cleanup EXIT

log "building (control plane, the karpenter binary, the benchmark)"
scripts/control-plane.sh build
if [[ ",$PEERS," == *",upstream,"* ]]; then
  scripts/upstream-karpenter.sh build
fi
cargo build --release --locked -p karpenter-operator --bin karpenter --example peer_bench
BIN="$ROOT/target/release/karpenter"
BENCH="$ROOT/target/release/examples/peer_bench"
KUBECTL="$(scripts/control-plane.sh bin)/kubectl"
"$BENCH" kwok-catalogue --out "$OUT/kwok-instance-types.json"

# A ServiceAccount bound to cluster-admin and a kubeconfig with its token: each controller
# (and kwok) shows up in the audit log under its own name.
identity() {
  local admin="$1" name="$2" out="$3"
  local k=("$KUBECTL" --kubeconfig "$admin")
  "${k[@]}" create namespace karpenter --dry-run=client -o yaml | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" -n karpenter create serviceaccount "$name" --dry-run=client -o yaml |
    "${k[@]}" apply -f - >/dev/null
  "${k[@]}" create clusterrolebinding "peer-bench-$name" --clusterrole cluster-admin \
    --serviceaccount "karpenter:$name" --dry-run=client -o yaml | "${k[@]}" apply -f - >/dev/null
  local token server ca
  token="$("${k[@]}" -n karpenter create token "$name" --duration 48h)"
  server="$("${k[@]}" config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$("${k[@]}" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: $name
  user: {token: "$token"}
contexts:
- name: bench
  context: {cluster: bench, user: $name}
current-context: bench
EOF
}

wait_ready() {
  local url="$1" pid="$2" what="$3" i
  for ((i = 0; i < 240; i++)); do
    kill -0 "$pid" 2>/dev/null || { log "$what exited"; return 1; }
    curl -fsS "$url" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  log "$what did not become ready"
  return 1
}

run_peer() {
  local peer="$1" dir="$OUT/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  export KARPENTER_E2E_DIR="$dir/control-plane"
  scripts/control-plane.sh stop || true
  local admin
  admin="$(scripts/control-plane.sh start)"
  identity "$admin" karpenter "$dir/controller.kubeconfig"
  local pids=() actors=(--actor "controller=$CONTROLLER_USER")
  if [[ "$peer" == upstream ]]; then
    identity "$admin" kwok "$dir/kwok.kubeconfig"
    actors+=(--actor "kwok=$KWOK_USER")
    local pid
    pid="$(KUBECONFIG="$dir/controller.kubeconfig" KWOK_KUBECONFIG="$dir/kwok.kubeconfig" \
      KARPENTER_UPSTREAM_DIR="$dir/controller" \
      KARPENTER_UPSTREAM_METRICS_PORT="$METRICS_PORT" KARPENTER_UPSTREAM_HEALTH_PORT="$HEALTH_PORT" \
      INSTANCE_TYPES_FILE_PATH="$OUT/kwok-instance-types.json" \
      KUBE_CLIENT_QPS="$QPS" KUBE_CLIENT_BURST="$BURST" \
      scripts/upstream-karpenter.sh start)"
    pids+=(--pid "controller=$pid")
    pids+=(--pid "kwok=$(KARPENTER_UPSTREAM_DIR="$dir/controller" scripts/upstream-karpenter.sh pids | sed -n 's/^kwok //p')")
  else
    "$BIN" crds | "$KUBECTL" --kubeconfig "$admin" apply --server-side -f - >/dev/null
    "$KUBECTL" --kubeconfig "$admin" wait --for condition=Established --timeout 60s \
      crd/nodepools.karpenter.sh crd/nodeclaims.karpenter.sh >/dev/null
    KUBECONFIG="$dir/controller.kubeconfig" "$BIN" controller --cloud-provider fake \
      --cluster-name peer-bench --disable-leader-election true --system-namespace karpenter \
      --log-format json --metrics-port "$METRICS_PORT" --health-probe-port "$HEALTH_PORT" \
      --kube-client-qps "$QPS" --kube-client-burst "$BURST" \
      >"$dir/controller.log" 2>&1 &
    OURS_PID=$!
    wait_ready "http://127.0.0.1:$HEALTH_PORT/readyz" "$OURS_PID" "karpenter controller"
    pids+=(--pid "controller=$OURS_PID")
  fi
  log "$peer: running the $SUITE suite ${QUICK[*]} ${ONLY[*]}"
  "$BENCH" run --peer "$peer" --suite "$SUITE" "${QUICK[@]}" "${ONLY[@]}" \
    --kubeconfig "$admin" --audit-log "$KARPENTER_E2E_DIR/audit.log" \
    "${pids[@]}" "${actors[@]}" --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" \
    --qps "$QPS" --burst "$BURST" --out "$OUT/$peer.json" | tee "$dir/table.md"
  if [[ "$peer" == upstream ]]; then
    KARPENTER_UPSTREAM_DIR="$dir/controller" scripts/upstream-karpenter.sh stop
  else
    kill "$OURS_PID" 2>/dev/null || true
    wait "$OURS_PID" 2>/dev/null || true
    OURS_PID=""
  fi
  scripts/control-plane.sh stop
  # The audit log of a full run takes gigabytes; its counts are in the JSON now.
  $KEEP_AUDIT || rm -f "$KARPENTER_E2E_DIR/audit.log"
}

IFS=',' read -r -a PEER_LIST <<<"$PEERS"
results=()
for peer in "${PEER_LIST[@]}"; do
  case "$peer" in
    upstream|karpenter-rs) ;;
    *) log "--peers: unknown controller $peer"; exit 2 ;;
  esac
  run_peer "$peer"
  results+=("$OUT/$peer.json")
done
"$BENCH" table "${results[@]}" | tee "$OUT/table.md"
