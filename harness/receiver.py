"""A webhook receiver on loopback for the alerts' tests and benchmarks (issue 51).

``Receiver`` is a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1, a free port) that
keeps every POST it gets (arrival time, headers, raw body) and answers with ``status``; its
faults: ``hang_s`` (sleep before answering), ``drip_s`` (the answer one byte at a time, this
far apart), ``close`` (drop the connection unanswered) and ``redirect_to`` (a 307 to that
URL). With ``tls`` (a server context) it speaks https and keeps the name each client asked
for (``server_names``).
"""

from __future__ import annotations

import http.server
import ssl
import threading
import time
from dataclasses import dataclass
from types import TracebackType


@dataclass(frozen=True)
class Received:
    """One call as the receiver got it."""

    at: float  # time.time() when the body was read
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """See the module docstring; a context manager that starts and always stops it."""

    def __init__(self, status: int = 200, tls: ssl.SSLContext | None = None) -> None:
        self.status = status
        self.server_names: list[str | None] = []  # the TLS name (SNI) of each handshake
        self.hang_s = 0.0
        self.drip_s = 0.0
        self.close = False
        self.redirect_to: str | None = None
        self.calls: list[Received] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # Connections kept between calls, as a production endpoint keeps them: HTTP/1.0
            # would make every call open its own.
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._arrived:
                    receiver.calls.append(
                        Received(time.time(), self.path, dict(self.headers.items()), body)
                    )
                    receiver._arrived.notify_all()
                if receiver.hang_s:
                    time.sleep(receiver.hang_s)
                if receiver.close:
                    self.close_connection = True
                    return
                if receiver.drip_s:  # the answer a byte at a time, its status line first
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(receiver.drip_s)
                    return
                self.send_response(receiver.status if receiver.redirect_to is None else 307)
                if receiver.redirect_to is not None:
                    self.send_header("Location", receiver.redirect_to)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        scheme = "http"
        if tls is not None:  # https: each connection's handshake in its own thread
            tls.sni_callback = lambda sock, name, context: self.server_names.append(name)
            self._server.socket = tls.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=True
            )
            scheme = "https"
        self.port = self._server.server_address[1]
        self.url = f"{scheme}://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait(self, count: int, timeout_s: float = 10.0) -> list[Received]:
        """The calls once ``count`` have come (or what came within ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while len(self.calls) < count and time.monotonic() < deadline:
                self._arrived.wait(deadline - time.monotonic())
            return list(self.calls)
