#!/usr/bin/env bash
# Upstream Karpenter as a test peer: its kwok controller (sigs.k8s.io/karpenter, the `kwok`
# cloud provider) and kwok (sigs.k8s.io/kwok, which plays the kubelet of the Nodes it
# launches), built from the Go module proxy with the ordinary `go` client and run against the
# project's control plane (scripts/control-plane.sh).
#
#   scripts/upstream-karpenter.sh build    # build both once into the cache (idempotent)
#   scripts/upstream-karpenter.sh start    # install upstream's CRDs and a KWOKNodeClass, start
#                                          # kwok and the controller; prints the controller's PID
#   scripts/upstream-karpenter.sh stop     # stop exactly what `start` started, by PID
#   scripts/upstream-karpenter.sh status   # which of the two run
#   scripts/upstream-karpenter.sh pids     # "controller <pid>" and "kwok <pid>" lines
#
# Nothing of upstream's source is in this repository: `build` runs `go install` on the
# published modules, and copies upstream's CRDs and kwok's stage definitions from the module
# cache into the cache directory, next to the binaries. The cache is keyed by both versions,
# in $KARPENTER_UPSTREAM_CACHE (default ~/.cache/karpenter-rs/upstream). Upstream's go.mod asks
# for a newer Go than some machines have; GOTOOLCHAIN=auto lets `go` fetch that toolchain
# (itself a module on the proxy).
#
# `start` needs the control plane's admin kubeconfig ($KUBECONFIG, default the one
# scripts/control-plane.sh writes) and:
#   INSTANCE_TYPES_FILE_PATH  the controller's catalogue in the kwok provider's format
#                             (default: upstream's embedded one). The peer benchmark writes
#                             ours there (`peer_bench kwok-catalogue`), so both controllers
#                             choose from the same types at the same prices.
#   KWOK_KUBECONFIG           kwok's credentials (default: the controller's)
#   KARPENTER_UPSTREAM_DIR    state: logs, PIDs, kwok's configuration (default
#                             <repo>/target/upstream-karpenter)
#   KARPENTER_UPSTREAM_METRICS_PORT, KARPENTER_UPSTREAM_HEALTH_PORT (defaults 18080, 18081)
#   KARPENTER_UPSTREAM_KWOK_PORT (default 18247)
# Any other Karpenter setting passes through the environment (BATCH_MAX_DURATION,
# KUBE_CLIENT_QPS, FEATURE_GATES, ...), as in upstream's chart.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KARPENTER_VERSION="1.15.0"
KWOK_VERSION="0.8.0"
CACHE="${KARPENTER_UPSTREAM_CACHE:-$HOME/.cache/karpenter-rs/upstream}"
OUT="$CACHE/karpenter-v$KARPENTER_VERSION-kwok-v$KWOK_VERSION"
STATE="${KARPENTER_UPSTREAM_DIR:-$ROOT/target/upstream-karpenter}"
METRICS_PORT="${KARPENTER_UPSTREAM_METRICS_PORT:-18080}"
HEALTH_PORT="${KARPENTER_UPSTREAM_HEALTH_PORT:-18081}"
KWOK_PORT="${KARPENTER_UPSTREAM_KWOK_PORT:-18247}"
# The annotation upstream's kwok provider puts on every Node it creates, and kwok's selector.
KWOK_SELECTOR="kwok.x-k8s.io/node=fake"

log() { echo "upstream-karpenter: $*" >&2; }

built() {
  [[ -x "$OUT/bin/karpenter-kwok" && -x "$OUT/bin/kwok" && -f "$OUT/crds/.complete" \
    && -f "$OUT/stages/.complete" ]]
}

# Module directory in the Go module cache (downloads it when missing).
module_dir() {
  (cd "$CACHE" && GOTOOLCHAIN=auto GOFLAGS=-mod=mod go mod download -json "$1" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

build() {
  if built; then
    return 0
  fi
  command -v go >/dev/null || { log "go is not installed"; exit 1; }
  mkdir -p "$OUT/bin" "$OUT/crds" "$OUT/stages"
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    log "another build is running; waiting for it"
    flock 9
  fi
  if built; then
    return 0
  fi
  local t0=$SECONDS gobin="$CACHE/gobin"
  mkdir -p "$gobin"
  if [[ ! -x "$OUT/bin/karpenter-kwok" ]]; then
    log "building sigs.k8s.io/karpenter/kwok v$KARPENTER_VERSION"
    GOTOOLCHAIN=auto CGO_ENABLED=0 GOBIN="$gobin" go install -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=v$KARPENTER_VERSION" \
      "sigs.k8s.io/karpenter/kwok@v$KARPENTER_VERSION"
    mv "$gobin/kwok" "$OUT/bin/karpenter-kwok"
  fi
  if [[ ! -x "$OUT/bin/kwok" ]]; then
    log "building sigs.k8s.io/kwok/cmd/kwok v$KWOK_VERSION"
    GOTOOLCHAIN=auto CGO_ENABLED=0 GOBIN="$gobin" go install -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION" \
      "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
    mv "$gobin/kwok" "$OUT/bin/kwok"
  fi
  local karpenter kwok
  karpenter="$(module_dir "sigs.k8s.io/karpenter@v$KARPENTER_VERSION")"
  kwok="$(module_dir "sigs.k8s.io/kwok@v$KWOK_VERSION")"
  # The CRDs the kwok chart installs (NodePool, NodeClaim, NodeOverlay, CapacityBuffer) and
  # the KWOKNodeClass.
  cp "$karpenter"/kwok/charts/crds/*.yaml "$karpenter"/kwok/apis/crds/*.yaml "$OUT/crds/"
  chmod u+w "$OUT"/crds/*.yaml
  touch "$OUT/crds/.complete"
  # kwok's stages as upstream's install (hack/install-kwok.sh) applies them: kwok's
  # `stage-fast` set (node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete,
  # pod-delete), then Karpenter's own, which replace those of the same name.
  local f name
  for f in "$kwok"/kustomize/stage/node/fast/node-initialize.yaml \
    "$kwok"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$kwok"/kustomize/stage/pod/fast/*.yaml "$karpenter"/hack/kwok/stages/*.yaml; do
    name="$(basename "$f")"
    [[ "$name" == kustomization.yaml ]] && continue
    cp "$f" "$OUT/stages/$name"
    chmod u+w "$OUT/stages/$name"
  done
  touch "$OUT/stages/.complete"
  log "built in $((SECONDS - t0)) s into $OUT"
}

pid_of() { cat "$STATE/$1.pid" 2>/dev/null || true; }

running() {
  local pid
  pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

kubeconfig() {
  echo "${KUBECONFIG:-$ROOT/target/control-plane/admin.kubeconfig}"
}

kubectl_() {
  "$("$ROOT/scripts/control-plane.sh" bin)/kubectl" --kubeconfig "$(kubeconfig)" "$@"
}

# kwok's configuration: the options upstream's manifests set, and the stages inline (kwok
# reads Stage documents from its configuration file when the Stage CRD is not enabled).
kwok_config() {
  {
    cat <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  enablePodsOnNodeSyncStreamWatch: true
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  cidr: 10.0.0.0/16
  nodeLeaseDurationSeconds: 40
EOF
    local f
    for f in "$OUT"/stages/*.yaml; do
      echo "---"
      cat "$f"
      echo
    done
  } >"$STATE/kwok.yaml"
}

start() {
  build
  local c
  for c in kwok controller; do
    if running "$c"; then
      log "$c is already running (PID $(pid_of "$c")); run 'stop' first"
      exit 1
    fi
  done
  local kc
  kc="$(kubeconfig)"
  [[ -f "$kc" ]] || { log "no kubeconfig at $kc (start scripts/control-plane.sh first)"; exit 1; }
  mkdir -p "$STATE"
  kubectl_ apply --server-side --force-conflicts -f "$OUT/crds/" >/dev/null
  kubectl_ wait --for condition=Established --timeout 60s -f "$OUT/crds/" >/dev/null
  kubectl_ create namespace karpenter --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
  kubectl_ apply -f - >/dev/null <<'EOF'
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
EOF
  kwok_config
  "$OUT/bin/kwok" --config "$STATE/kwok.yaml" --kubeconfig "${KWOK_KUBECONFIG:-$kc}" \
    --manage-nodes-with-annotation-selector "$KWOK_SELECTOR" \
    --server-address "127.0.0.1:$KWOK_PORT" --node-port "$KWOK_PORT" \
    >"$STATE/kwok.log" 2>&1 &
  echo $! >"$STATE/kwok.pid"
  KUBECONFIG="$kc" SYSTEM_NAMESPACE=karpenter DISABLE_LEADER_ELECTION="${DISABLE_LEADER_ELECTION:-true}" \
    METRICS_PORT="$METRICS_PORT" HEALTH_PROBE_PORT="$HEALTH_PORT" \
    LOG_LEVEL="${LOG_LEVEL:-info}" \
    "$OUT/bin/karpenter-kwok" >"$STATE/controller.log" 2>&1 &
  echo $! >"$STATE/controller.pid"
  local i
  for ((i = 0; i < 240; i++)); do
    for c in kwok controller; do
      running "$c" || { log "$c exited; see $STATE/$c.log"; stop; exit 1; }
    done
    if curl -fsS "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null 2>&1; then
      pid_of controller
      return 0
    fi
    sleep 0.5
  done
  log "the controller did not become ready; see $STATE/controller.log"
  stop
  exit 1
}

stop() {
  local c pid
  for c in controller kwok; do
    pid="$(pid_of "$c")"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE/$c.pid"
  done
}

status() {
  local c
  for c in controller kwok; do
    if running "$c"; then echo "$c running (PID $(pid_of "$c"))"; else echo "$c stopped"; fi
  done
}

case "${1:-}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  pids) for c in controller kwok; do echo "$c $(pid_of "$c")"; done ;;
  dir) echo "$OUT" ;;
  *) echo "usage: $0 build|start|stop|status|pids|dir" >&2; exit 2 ;;
esac
