#!/usr/bin/env bash
# Build a release bundle on the developer's machine: the probboard wheel, a wheelhouse of
# every dependency at the exact versions of requirements.lock, hashes checked (the VM needs no
# package index, and installs what the tests passed with), and the files a release runs from.
# Prints the bundle's path. The VM must run the same Python minor version and architecture
# (binary wheels such as gevent and psycopg are built for them).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
version="$(date -u +%Y%m%d%H%M%S)-$(git rev-parse --short HEAD 2>/dev/null || echo local)"
stage="dist/stage/$version"
rm -rf "$stage"
mkdir -p "$stage/wheels"
# Every wheel of the lock (its hashes checked) and the package's own, in a scratch
# wheelhouse; then, from that alone (no index), the package and what it needs at run time:
# one version of each, the lock's, so the VM's install cannot pick another, and none of the
# development tools.
locked="$(mktemp -d)"
trap 'rm -rf "$locked" "$stage"' EXIT
"$PYTHON" -m pip wheel --quiet --require-hashes --wheel-dir "$locked" -r requirements.lock >&2
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$locked" . >&2
"$PYTHON" -m pip wheel --quiet --no-index --find-links "$locked" --wheel-dir "$stage/wheels" probboard >&2
cp requirements.lock "$stage/"
cp wsgi.py gunicorn.conf.py "$stage/"
cp -r migrations deploy "$stage/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
echo "$version" >"$stage/VERSION"
tar -C dist/stage -czf "dist/probboard-$version.tar.gz" "$version"
rm -rf "$stage"
echo "dist/probboard-$version.tar.gz"
