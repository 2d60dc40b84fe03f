"""scripts/audit_lock.py: an unreachable advisory service is a stated skip, never a pass.

The service is a loopback HTTP server answering as a mirror without per-release JSON does
(404), or not listening at all. The audit itself (pip-audit against pypi.org) needs the
internet and runs in ``make test`` wherever pypi.org answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.processes import ROOT, free_port

SCRIPT = ROOT / "scripts" / "audit_lock.py"


class _NoReleaseJson(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def mirror() -> Iterator[str]:
    """A loopback index that answers 404 to every per-release JSON."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoReleaseJson)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    finally:
        server.shutdown()
        server.server_close()


def run_audit(probe: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT)],
        env={**os.environ, "AUDIT_PROBE_URL": probe, **env},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_mirror_without_release_json_is_a_stated_skip(mirror: str) -> None:
    done = run_audit(mirror)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("audit: SKIPPED, the advisory service cannot be reached: ")
    assert f"{mirror}/alembic/" in done.stdout and "HTTP 404" in done.stdout


def test_nothing_listening_is_a_stated_skip() -> None:
    done = run_audit(f"http://127.0.0.1:{free_port()}/pypi")
    assert done.returncode == 0, done.stderr
    assert "SKIPPED" in done.stdout and "could not be read" in done.stdout


def test_audit_require_makes_the_skip_an_error(mirror: str) -> None:
    done = run_audit(mirror, AUDIT="require")
    assert done.returncode == 2
    assert done.stderr.startswith("audit: FAILED, the advisory service cannot be reached")
    assert "SKIPPED" not in done.stdout
