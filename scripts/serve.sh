#!/usr/bin/env bash
# The production shape on one machine: the refresher, the alerts program and its worker, and
# gunicorn as separate processes. Stops the others when gunicorn exits (Ctrl-C included), and
# gunicorn too when this script is told to stop (SIGTERM or SIGINT to it alone).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
: "${REDIS_URL:?set REDIS_URL=redis://host:port/db}"

# A bad setting: its one line and status 2 once, before either program starts.
"$BIN/python" -m app.config || exit

"$BIN/python" -m app.refresher &
refresher=$!
# The alerts program and one delivery worker (issue 51; ALERTS=false: they exit at once).
"$BIN/python" -m app.alerts &
alerts=$!
"$BIN/python" -m app.alerts worker &
worker=$!
trap 'kill "$refresher" "$alerts" "$worker" 2>/dev/null || true; wait "$refresher" "$alerts" "$worker" 2>/dev/null || true' EXIT
echo "Probboard (gunicorn + refresher + alerts, $REDIS_URL) on http://${HOST:-127.0.0.1}:${PORT:-8000}"
"$BIN/gunicorn" -c gunicorn.conf.py wsgi:app &
web=$!
# A signal to this script alone (a supervisor's stop) is gunicorn's graceful stop too; a
# Ctrl-C reaches gunicorn itself as well, which is the same stop.
trap 'kill -TERM "$web" 2>/dev/null || true' TERM INT
status=0
wait "$web" || status=$?
# A trapped signal ends the first wait early: wait for gunicorn itself.
if kill -0 "$web" 2>/dev/null; then
  wait "$web" || status=$?
fi
exit "$status"
