#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for the end-to-end suite: etcd, kube-apiserver,
# kube-scheduler and kube-controller-manager, plus kubectl and helm for tests and for people.
#
#   scripts/control-plane.sh build   # build the pinned binaries once into the cache (idempotent)
#   scripts/control-plane.sh start   # generate certificates, start all four, wait until ready,
#                                    # print the kubeconfig path
#   scripts/control-plane.sh stop    # stop exactly the processes `start` started, by PID
#   scripts/control-plane.sh env     # print `export KUBECONFIG=…` and PATH for a shell
#   scripts/control-plane.sh status  # which components run
#   scripts/control-plane.sh restart COMPONENT  # stop one component and start it again with the
#                                    # same command line and state (etcd keeps its data)
#   scripts/control-plane.sh freeze|thaw COMPONENT  # SIGSTOP / SIGCONT one component
#   scripts/control-plane.sh compact # compact etcd's history at its current revision
#
# The end-to-end fault tests (operator/tests/e2e/faults.rs) use the last three.
#
# Everything is built with the machine's `go` from the Go module proxy:
# - k8s.io/kubernetes as served has no staging/ directory and its go.mod replaces every
#   k8s.io/<staging> module with ./staging/…, so `go install k8s.io/kubernetes/cmd/…` is refused.
#   A small wrapper module requires k8s.io/kubernetes and replaces each staging module with
#   its published v0.<minor>.<patch> instead.
# - go.etcd.io/etcd/server/v3 has replace directives too; a wrapper module that requires it builds.
# - helm has none and installs with `go install`.
#
# Binaries are cached outside the clone, in $KARPENTER_E2E_CACHE
# (default ~/.cache/karpenter-rs/control-plane), keyed by version, so later runs on the same
# machine reuse them. A fresh machine builds them (about 15 minutes on 2 cores).
#
# Environment: KARPENTER_E2E_CACHE, KARPENTER_E2E_DIR (state: certificates, etcd data, logs,
# PIDs; default <repo>/target/control-plane), KARPENTER_E2E_API_PORT (default 16443),
# KARPENTER_E2E_ETCD_PORT (default 12379; the peer port is one above).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="1.36.3"
ETCD_VERSION="3.6.16"
HELM_VERSION="3.22.0"
CACHE="${KARPENTER_E2E_CACHE:-$HOME/.cache/karpenter-rs/control-plane}"
BIN="$CACHE/bin-k8s$K8S_VERSION-etcd$ETCD_VERSION-helm$HELM_VERSION"
STATE="${KARPENTER_E2E_DIR:-$ROOT/target/control-plane}"
API_PORT="${KARPENTER_E2E_API_PORT:-16443}"
ETCD_PORT="${KARPENTER_E2E_ETCD_PORT:-12379}"
ETCD_PEER_PORT=$((ETCD_PORT + 1))
COMPONENTS=(etcd kube-apiserver kube-scheduler kube-controller-manager)

log() { echo "control-plane: $*" >&2; }

built() {
  local b
  for b in etcd kube-apiserver kube-scheduler kube-controller-manager kubectl helm; do
    [[ -x "$BIN/$b" ]] || return 1
  done
}

build_kubernetes() {
  local src="$CACHE/src/kubernetes-$K8S_VERSION" staging_version="v0.${K8S_VERSION#1.}"
  mkdir -p "$src"
  local gomod
  gomod="$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  {
    echo "module karpenter-rs.local/control-plane"
    echo
    echo "go $(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    # Every module the kubernetes go.mod points at ./staging/… gets its published version.
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*$#\t\1 => \1 '"$staging_version"'#p' "$gomod"
    echo ")"
  } >"$src/go.mod"
  # A main package is needed so that `go mod tidy` keeps the commands' dependencies.
  cat >"$src/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)
EOF
  local ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*}"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=${K8S_VERSION%%.*}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  (
    cd "$src"
    GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
    local cmd
    for cmd in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
      log "building $cmd v$K8S_VERSION"
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" \
        -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
      mv "$BIN/$cmd.tmp" "$BIN/$cmd"
    done
  )
}

build_etcd() {
  local src="$CACHE/src/etcd-$ETCD_VERSION"
  mkdir -p "$src"
  cat >"$src/go.mod" <<EOF
module karpenter-rs.local/etcd

go 1.24

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
EOF
  cat >"$src/tools.go" <<'EOF'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3/etcdmain"
EOF
  (
    cd "$src"
    GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
    log "building etcd v$ETCD_VERSION"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
      -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$BIN/etcd.tmp" "$BIN/etcd"
  )
}

build_helm() {
  log "building helm v$HELM_VERSION"
  local gobin="$CACHE/src/helm-$HELM_VERSION"
  mkdir -p "$gobin"
  CGO_ENABLED=0 GOBIN="$gobin" go install -trimpath -ldflags "-s -w" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  mv "$gobin/helm" "$BIN/helm"
}

build() {
  if built; then
    return 0
  fi
  command -v go >/dev/null || { log "go is not installed"; exit 1; }
  mkdir -p "$BIN"
  # One build at a time per cache: CI starts one in the background early, and the test
  # script's own `build` then waits for it and finds the binaries there.
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    log "another build is running; waiting for it"
    flock 9
  fi
  if built; then
    return 0
  fi
  local t0=$SECONDS
  [[ -x "$BIN/etcd" ]] || build_etcd
  [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-scheduler" && -x "$BIN/kube-controller-manager" \
    && -x "$BIN/kubectl" ]] || build_kubernetes
  [[ -x "$BIN/helm" ]] || build_helm
  log "built in $((SECONDS - t0)) s into $BIN"
}

pid_of() { cat "$STATE/$1.pid" 2>/dev/null || true; }

running() {
  local pid
  pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

# Certificates: one CA; a serving certificate for 127.0.0.1 and the in-cluster names; an admin
# client certificate (system:masters); the service-account signing key pair.
certificates() {
  local pki="$STATE/pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=karpenter-rs-e2e-ca" 2>/dev/null
    cat >server.ext <<'EOF'
subjectAltName = IP:127.0.0.1, IP:10.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage = serverAuth
EOF
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt 2>/dev/null
    echo "extendedKeyUsage = clientAuth" >client.ext
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
      -subj "/O=system:masters/CN=karpenter-rs-e2e-admin" 2>/dev/null
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile client.ext -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  local b64="base64 -w0"
  cat >"$STATE/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $($b64 <"$pki/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $($b64 <"$pki/admin.crt")
    client-key-data: $($b64 <"$pki/admin.key")
contexts:
- name: e2e
  context:
    cluster: e2e
    user: admin
current-context: e2e
EOF
  cat >"$STATE/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
EOF
}

spawn() {
  local name="$1"
  shift
  # The command line is kept so that `restart` starts the component exactly as `start` did.
  printf '%s\0' "$@" >"$STATE/$name.cmd"
  "$@" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

wait_for() {
  local what="$1" tries="$2"
  shift 2
  local i
  for ((i = 0; i < tries; i++)); do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  log "$what did not become ready; logs in $STATE"
  return 1
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }

start() {
  build
  local c
  for c in "${COMPONENTS[@]}"; do
    if running "$c"; then
      log "$c is already running (PID $(pid_of "$c")); run 'stop' first"
      exit 1
    fi
  done
  rm -rf "$STATE"
  mkdir -p "$STATE"
  certificates
  local pki="$STATE/pki"

  spawn etcd "$BIN/etcd" --name e2e --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

  spawn kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$pki/server.crt" --tls-private-key-file "$pki/server.key" \
    --client-ca-file "$pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode Node,RBAC \
    --audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$STATE/audit.log" \
    --audit-log-format json --audit-log-mode blocking \
    --cert-dir "$STATE/apiserver-certs"
  wait_for kube-apiserver 240 kubectl_ get --raw /readyz

  spawn kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$STATE/admin.kubeconfig" --leader-elect=false --secure-port 0 \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=false --controllers '*'
  # -v=2 logs each pod's failed attempts and bindings, which a timed-out end-to-end wait
  # quotes (operator/tests/e2e/harness.rs, `describe`).
  spawn kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig "$STATE/admin.kubeconfig" --leader-elect=false --secure-port 0 -v=2
  # The default ServiceAccount is written by the controller-manager: pods can be created
  # only after it exists.
  wait_for kube-controller-manager 240 kubectl_ -n default get serviceaccount default
  for c in "${COMPONENTS[@]}"; do
    running "$c" || { log "$c exited; see $STATE/$c.log"; stop; exit 1; }
  done
  echo "$STATE/admin.kubeconfig"
}

stop_one() {
  local c="$1" pid
  pid="$(pid_of "$c")"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    # A frozen process only handles SIGTERM once it runs again.
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/$c.pid"
}

stop() {
  local i
  # Reverse order: clients before the API server, the API server before etcd.
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    stop_one "${COMPONENTS[$i]}"
  done
}

component() {
  local c
  for c in "${COMPONENTS[@]}"; do
    [[ "$c" == "${1:-}" ]] && return 0
  done
  log "unknown component '${1:-}'; one of: ${COMPONENTS[*]}"
  exit 2
}

# Stops one component and starts it again with the command line `start` recorded, on the same
# state: etcd keeps its data directory, the API server its certificates. Waits until the API
# server answers /readyz again (which also checks etcd).
restart() {
  local c="$1" cmd
  component "$c"
  [[ -f "$STATE/$c.cmd" ]] || { log "$c was not started by this script (no $STATE/$c.cmd)"; exit 1; }
  mapfile -d '' cmd <"$STATE/$c.cmd"
  stop_one "$c"
  "${cmd[@]}" >>"$STATE/$c.log" 2>&1 &
  echo $! >"$STATE/$c.pid"
  case "$c" in
    etcd | kube-apiserver) wait_for "$c" 240 kubectl_ get --raw /readyz ;;
    *) sleep 1 ;;
  esac
  running "$c" || { log "$c exited after the restart; see $STATE/$c.log"; exit 1; }
}

signal_one() {
  local c="$2" pid
  component "$c"
  pid="$(pid_of "$c")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || { log "$c is not running"; exit 1; }
  kill "-$1" "$pid"
}

# Compacts etcd's history at its current revision, through its gRPC gateway: a watch or list
# from any older resourceVersion that reaches etcd then fails with 410 Gone.
compact() {
  local url cmd i revision
  [[ -f "$STATE/etcd.cmd" ]] || { log "etcd was not started by this script"; exit 1; }
  mapfile -d '' cmd <"$STATE/etcd.cmd"
  for ((i = 0; i < ${#cmd[@]}; i++)); do
    [[ "${cmd[$i]}" == --advertise-client-urls ]] && url="${cmd[$((i + 1))]}"
  done
  revision="$(curl -fsS -X POST "$url/v3/kv/range" -d '{"key":"AA=="}' |
    sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')"
  [[ -n "$revision" ]] || { log "could not read etcd's revision from $url"; exit 1; }
  curl -fsS -X POST "$url/v3/kv/compaction" -d "{\"revision\":\"$revision\",\"physical\":true}" >/dev/null
  echo "$revision"
}

status() {
  local c
  for c in "${COMPONENTS[@]}"; do
    if running "$c"; then echo "$c running (PID $(pid_of "$c"))"; else echo "$c stopped"; fi
  done
}

case "${1:-}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  restart) restart "${2:-}" ;;
  freeze) signal_one STOP "${2:-}" ;;
  thaw) signal_one CONT "${2:-}" ;;
  compact) compact ;;
  bin) echo "$BIN" ;;
  env)
    echo "export KUBECONFIG=$STATE/admin.kubeconfig"
    echo "export PATH=$BIN:\$PATH"
    ;;
  *) echo "usage: $0 build|start|stop|status|env|bin|restart C|freeze C|thaw C|compact" >&2; exit 2 ;;
esac
