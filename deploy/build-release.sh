#!/usr/bin/env bash
# Build a release bundle on the developer's machine: the probboard wheel, a wheelhouse of
# every dependency (the VM needs no package index), and the files a release runs from.
# Prints the bundle's path. The VM must run the same Python minor version and architecture
# (binary wheels such as gevent and psycopg are built for them).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
version="$(date -u +%Y%m%d%H%M%S)-$(git rev-parse --short HEAD 2>/dev/null || echo local)"
stage="dist/stage/$version"
rm -rf "$stage"
mkdir -p "$stage/wheels"
"$PYTHON" -m pip wheel --quiet --wheel-dir "$stage/wheels" . >&2
cp wsgi.py gunicorn.conf.py "$stage/"
cp -r migrations deploy "$stage/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
echo "$version" >"$stage/VERSION"
tar -C dist/stage -czf "dist/probboard-$version.tar.gz" "$version"
rm -rf "$stage"
echo "dist/probboard-$version.tar.gz"
