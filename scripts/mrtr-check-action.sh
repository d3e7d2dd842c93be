#!/usr/bin/env bash
# The script of the `mrtr check` GitHub Action (action.yml) and the GitLab CI snippet
# (docs/check.md): start the server under test, wait until its port answers, run `mrtr check`
# writing SARIF (and JUnit), stop the server, exit with the check's code.
#
# Environment (all optional but one of MRTR_CHECK_URL / MRTR_CHECK_STDIO):
#   MRTR_CHECK_SERVER_COMMAND  command starting the HTTP server under test (run in background)
#   MRTR_CHECK_URL             its MCP endpoint, e.g. http://127.0.0.1:8000/mcp
#   MRTR_CHECK_STDIO           or: a stdio server command (no server is started then)
#   MRTR_CHECK_ARGS            extra `mrtr check` arguments (default: --call-tools)
#   MRTR_CHECK_SARIF           SARIF file to write (default: mrtr-check.sarif)
#   MRTR_CHECK_JUNIT           JUnit XML file to write (default: none)
#   MRTR_CHECK_WAIT            seconds to wait for the server's port (default: 30)
#   MRTR_CHECK_MRTR            how to run mrtr (default: mrtr)
#   MRTR_CHECK_PYTHON          a Python for the port wait (default: python3)
# Exit status: the check's (0 pass, 1 a FAIL, 2 usage, 3 unreachable); 4 when the server
# command exited or its port never answered.
set -uo pipefail

url="${MRTR_CHECK_URL:-}"
stdio="${MRTR_CHECK_STDIO:-}"
sarif="${MRTR_CHECK_SARIF:-mrtr-check.sarif}"
junit="${MRTR_CHECK_JUNIT:-}"
wait_seconds="${MRTR_CHECK_WAIT:-30}"
mrtr="${MRTR_CHECK_MRTR:-mrtr}"
python="${MRTR_CHECK_PYTHON:-python3}"
read -r -a extra <<< "${MRTR_CHECK_ARGS:---call-tools}"

if [[ -z "$url" && -z "$stdio" ]]; then
  echo "mrtr-check-action: set MRTR_CHECK_URL (with MRTR_CHECK_SERVER_COMMAND) or MRTR_CHECK_STDIO" >&2
  exit 2
fi

server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM -- "-$server_pid" 2>/dev/null || kill -TERM "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
}
trap stop_server EXIT

if [[ -n "${MRTR_CHECK_SERVER_COMMAND:-}" && -z "$stdio" ]]; then
  set -m  # its own process group, so the whole server tree is stopped
  bash -c "$MRTR_CHECK_SERVER_COMMAND" &
  server_pid=$!
  set +m
  if ! "$python" - "$url" "$wait_seconds" "$server_pid" <<'PY'
import os, socket, sys, time
from urllib.parse import urlsplit
parts = urlsplit(sys.argv[1])
port = parts.port or (443 if parts.scheme == "https" else 80)
deadline, pid = time.monotonic() + float(sys.argv[2]), int(sys.argv[3])
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("mrtr-check-action: the server command exited")
    try:
        socket.create_connection((parts.hostname, port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(f"mrtr-check-action: nothing answered on {parts.hostname}:{port}")
PY
  then
    exit 4
  fi
fi

outputs=(--format sarif --output "$sarif")
if [[ -n "$junit" ]]; then
  outputs+=(--junit "$junit")
fi
if [[ -n "$stdio" ]]; then
  $mrtr check --stdio "$stdio" "${extra[@]}" "${outputs[@]}"
else
  $mrtr check "$url" "${extra[@]}" "${outputs[@]}"
fi
code=$?
echo "exit-code=$code" >> "${GITHUB_OUTPUT:-/dev/null}"
exit "$code"
