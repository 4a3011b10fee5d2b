#!/usr/bin/env bash
# The moto AWS emulator (EC2, SSM, SQS, IAM) for karpenter-cloudprovider-aws's tests.
#
#   scripts/aws-emulator.sh install   # python3 -m venv .venv && pip install 'moto[server]' (idempotent)
#   scripts/aws-emulator.sh start     # start on 127.0.0.1:$PORT, wait until ready, print the endpoint
#   scripts/aws-emulator.sh stop      # stop the server started by `start` (by its recorded PID)
#   scripts/aws-emulator.sh endpoint  # print the endpoint
#
# Environment: AWS_EMULATOR_PORT (default 5055), AWS_EMULATOR_VENV (default <repo>/.venv),
# AWS_EMULATOR_DIR (PID and log files; default <repo>/target/aws-emulator).
# Tests read the endpoint from KARPENTER_AWS_TEST_ENDPOINT:
#   export KARPENTER_AWS_TEST_ENDPOINT=$(scripts/aws-emulator.sh start)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${AWS_EMULATOR_PORT:-5055}"
VENV="${AWS_EMULATOR_VENV:-$ROOT/.venv}"
STATE_DIR="${AWS_EMULATOR_DIR:-$ROOT/target/aws-emulator}"
PID_FILE="$STATE_DIR/moto.pid"
LOG_FILE="$STATE_DIR/moto.log"
ENDPOINT="http://127.0.0.1:$PORT"

install() {
  if [[ -x "$VENV/bin/moto_server" ]]; then
    return 0
  fi
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'moto[server]>=5.2,<6' >&2
}

running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

ready() {
  python3 - "$ENDPOINT" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1)
PY
}

start() {
  install
  mkdir -p "$STATE_DIR"
  if running && ready; then
    echo "$ENDPOINT"
    return 0
  fi
  "$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" >"$LOG_FILE" 2>&1 &
  echo $! >"$PID_FILE"
  for _ in $(seq 1 120); do
    if ready; then
      echo "$ENDPOINT"
      return 0
    fi
    if ! running; then
      echo "moto_server exited; see $LOG_FILE" >&2
      exit 1
    fi
    sleep 0.25
  done
  echo "moto_server did not become ready on $ENDPOINT; see $LOG_FILE" >&2
  exit 1
}

stop() {
  if running; then
    kill "$(cat "$PID_FILE")"
  fi
  rm -f "$PID_FILE"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  endpoint) echo "$ENDPOINT" ;;
  *) echo "usage: $0 install|start|stop|endpoint" >&2; exit 2 ;;
esac
