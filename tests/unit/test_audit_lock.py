"""scripts/audit_lock.py: an advisory service that is not there is a stated skip, never a
pass; one that is there but failing is an error.

The service is a loopback HTTP server answering as a mirror without per-release JSON does
(404), with a page that is not the JSON API, with garbage, with server errors, or nothing
listening at all. The audit itself (pip-audit against pypi.org) needs the internet and runs
in ``make test`` wherever pypi.org answers.
"""

from __future__ import annotations

import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.processes import ROOT, free_port
from tests.support.lock import locked

SCRIPT = ROOT / "scripts" / "audit_lock.py"


def _handler(
    status: int, body: bytes, asked: list[str] | None = None
) -> type[BaseHTTPRequestHandler]:
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if asked is not None:
                asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    return Answer


class _Garbage(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.rfile.readline()
        self.wfile.write(b"this is not HTTP at all\r\n\r\n")


def _serve(server: socketserver.TCPServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def mirror() -> Iterator[str]:
    """A loopback index that answers 404 to every per-release JSON."""
    yield from _serve(ThreadingHTTPServer(("127.0.0.1", 0), _handler(404, b"")))


def run_audit(probe: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT)],
        env={**os.environ, "AUDIT_PROBE_URL": probe, **env},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def skipped(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("audit: SKIPPED, the advisory service cannot be reached: ")
    return done.stdout


def test_a_mirror_without_release_json_is_a_stated_skip(mirror: str) -> None:
    name, version = next(iter(locked().items()))
    out = skipped(run_audit(mirror))
    assert f"{mirror}/" in out and f"/{version}/json" in out and "HTTP 404" in out, (name, out)


def test_nothing_listening_is_a_stated_skip() -> None:
    assert "could not be read" in skipped(run_audit(f"http://127.0.0.1:{free_port()}/pypi"))


@pytest.mark.parametrize(
    ("body", "said"),
    [(b"<html>an index page</html>", "could not be read"),
     (b'{"info": {}}', "without a vulnerabilities list"),
     (b"[1, 2]", "without a vulnerabilities list")],
)  # fmt: skip
def test_an_answer_that_is_not_the_json_api_is_a_stated_skip(body: bytes, said: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(200, body))
    for url in _serve(server):
        assert said in skipped(run_audit(url))


def test_a_garbled_answer_is_a_stated_skip_not_a_crash() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Garbage)
    for url in _serve(server):
        assert "could not be read" in skipped(run_audit(url))


def test_a_failing_service_is_an_error_not_a_skip() -> None:
    """Asked three times (the pauses between, 1 s and 3 s, shortened: their length is not
    the subject), then an error."""
    asked: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(503, b"", asked))
    for url in _serve(server):
        done = run_audit(url, AUDIT_RETRY_PAUSES_S="0.01,0.01")
    assert len(asked) == 3, asked
    assert done.returncode == 2
    assert done.stderr.startswith("audit: FAILED, the advisory service keeps failing: ")
    assert "HTTP 503" in done.stderr and "SKIPPED" not in done.stdout


def test_audit_require_makes_the_skip_an_error(mirror: str) -> None:
    done = run_audit(mirror, AUDIT="require")
    assert done.returncode == 2
    assert done.stderr.startswith("audit: FAILED, the advisory service cannot be reached")
    assert "SKIPPED" not in done.stdout
