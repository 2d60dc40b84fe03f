"""What every HTTP stand-in (Gamma, the CLOB's REST API, the site) is built on: a
``ThreadingHTTPServer`` on a free loopback port that records each request (``hits``) and
hands it to the stand-in's ``route``.

The switches every HTTP fake has: ``mode = "error"`` answers 500, ``mode = "hang"`` never
answers (``HANG_S``: longer than the client's 3 s timeout), and ``hang_prefix = "/markets/"``
the same for the paths under it only. A fault of value:
``trickle_bps > 0`` writes each answer (status line, headers and body) at that many bytes a
second; ``trickles`` records each such exchange and whether the client abandoned it
(``Trickle``). An exchange under way keeps trickling after the switch is off.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HANG_S = 8.0  # a hung request: well past the client's 3 s timeout


class _Handler(BaseHTTPRequestHandler):
    fake: _HttpFake

    def do_GET(self) -> None:
        """Hand the request to the fake."""
        self.fake.serve(self, "GET")

    def do_POST(self) -> None:
        """Hand the request to the fake."""
        self.fake.serve(self, "POST")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@dataclass
class Hit:
    """One request a fake received."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)  # when it arrived (monotonic s)


@dataclass
class Trickle:
    """One answer written slowly (``trickle_bps``): when it began and how it ended."""

    path: str
    started: float  # monotonic s
    ended: float | None = None  # monotonic s; None while still trickling
    outcome: str = "trickling"  # then "abandoned" (the client closed), "sent" or "stopped"
    sent_bytes: int = 0

    @property
    def lasted_s(self) -> float:
        """How long the exchange has lasted (so far, while it is still trickling)."""
        return (self.ended if self.ended is not None else time.monotonic()) - self.started


TRICKLE_POLL_S = 0.05  # how often a trickling answer looks whether the client has gone


class _HttpFake:
    """A ThreadingHTTPServer; ``mode`` is ``ok``, ``error`` (500) or ``hang``."""

    def __init__(self) -> None:
        # The wall clock the fake stamps its answers with (the world's: ``running(clock=...)``).
        self.clock: Callable[[], float] = time.time
        self.mode = "ok"
        self.hang_prefix: str | None = None  # requests under this path are never answered
        self.trickle_bps = 0.0  # > 0: answers written at this many bytes a second
        self.trickles: list[Trickle] = []
        self.hits: list[Hit] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def now_ms(self) -> int:
        """Epoch milliseconds on the fake's wall clock."""
        return int(self.clock() * 1000)

    def start(self) -> None:
        """Listen on a free port."""
        handler = type("Handler", (_Handler,), {"fake": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop listening; hung requests are let go."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def requests_to(self, path_prefix: str) -> list[Hit]:
        """The requests received so far whose path starts with ``path_prefix``."""
        return [hit for hit in list(self.hits) if hit.path.startswith(path_prefix)]

    def serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        """Record the request, then answer it as ``mode`` says (or never, when hung)."""
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.hits.append(Hit(method, parts.path, query, body))
        hangs = self.hang_prefix is not None and parts.path.startswith(self.hang_prefix)
        if self.mode == "hang" or hangs:
            deadline = time.monotonic() + HANG_S
            while time.monotonic() < deadline and not self._stopping.is_set():
                time.sleep(0.05)
            handler.close_connection = True
            return  # never answered
        if self.mode == "error":
            status, payload = 500, {"error": "internal server error"}
        else:
            status, payload = self.route(method, parts.path, query, body)
        data = json.dumps(payload).encode()
        rate = self.trickle_rate(parts.path, query)
        if rate > 0:
            self._trickle(handler, parts.path, status, data, rate)
            return
        with contextlib.suppress(OSError):
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """(status, JSON payload) for a request; each fake its own routes."""
        raise NotImplementedError

    def trickle_rate(self, path: str, query: dict[str, str]) -> float:
        """Bytes a second to write this request's answer at (0: all at once)."""
        return self.trickle_bps

    def _trickle(
        self, handler: BaseHTTPRequestHandler, path: str, status: int, data: bytes, rate: float
    ) -> None:
        """Write the whole answer, status line and headers included, ``rate`` bytes a second,
        until it is sent, the client closes the connection or the fake stops."""
        head = (
            f"{handler.protocol_version} {status} {handler.responses[status][0]}\r\n"
            f"Server: {handler.version_string()}\r\n"
            f"Date: {handler.date_time_string()}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        )
        raw = head.encode() + data
        record = Trickle(path, time.monotonic())
        self.trickles.append(record)
        handler.close_connection = True
        outcome = "sent"
        for i in range(len(raw)):
            due = record.started + i / rate
            while time.monotonic() < due and outcome == "sent":
                if self._stopping.is_set():
                    outcome = "stopped"
                elif _client_gone(handler.connection):
                    outcome = "abandoned"
                else:
                    time.sleep(min(TRICKLE_POLL_S, max(0.0, due - time.monotonic())))
            if outcome != "sent":
                break
            try:
                handler.wfile.write(raw[i : i + 1])
            except OSError:
                outcome = "abandoned"
                break
            record.sent_bytes = i + 1
        record.outcome, record.ended = outcome, time.monotonic()


def _client_gone(connection: socket.socket) -> bool:
    """Whether the client has closed its end (readable, and nothing to read: EOF). A client
    waiting for its answer sends nothing more, so readable means it has gone."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
