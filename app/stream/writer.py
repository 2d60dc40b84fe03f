"""Direct socket writes for streams served by gunicorn's gevent workers.

Waking one greenlet per client per board and pushing every event through gunicorn's
response writer costs more CPU than the data. Instead, once gunicorn has sent a stream's
headers and first event, the broker writes each new event straight to the client's socket
with one non-blocking ``os.write`` per client, in a single loop. A client whose socket
buffer is full becomes "slow": its unsent bytes go to its own greenlet, which finishes
them with a timeout, while the broker only keeps the NEWEST event for it (a latest-value
slot). HTTP/1.1 responses are chunked by gunicorn, so direct writes carry the same framing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

from app.metrics.web import STREAM_DROPS


def chunk(data: bytes) -> bytes:
    """``data`` as one HTTP/1.1 chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class DirectWriter:
    """Non-blocking writes to one client's socket, with a slow path in its own greenlet."""

    def __init__(self, sock: socket.socket, chunked: bool) -> None:
        self.sock = sock
        self.chunked = chunked
        self._fd = sock.fileno()
        self.pending: bytes | None = None  # unsent tail of a partial write
        self.latest: bytes | None = None  # newest event that arrived while pending
        self.dead = False
        self.last_write = time.monotonic()
        self.wake = threading.Event()

    def offer(self, data: bytes) -> None:
        """Write ``data`` now if the socket takes it; else leave it to the slow path."""
        if self.dead:
            return
        if self.pending is not None:
            self.latest = data  # skip to the newest: never queue
            return
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            self._drop("gone")
            return
        self.last_write = time.monotonic()
        if written < len(data):
            self.pending = data[written:]
            self.wake.set()

    def drain(self) -> None:
        """Slow path, in the client's greenlet: send what is pending (socket timeout applies)."""
        while self.pending is not None and not self.dead:
            data, self.pending = self.pending, None
            try:
                self.sock.sendall(data)
            except OSError as exc:  # the write timeout (too slow), or the client is gone
                self._drop("slow" if isinstance(exc, TimeoutError) else "gone")
                return
            self.last_write = time.monotonic()
            if self.latest is not None:
                self.pending, self.latest = self.latest, None

    def _drop(self, reason: str) -> None:
        """The client is gone or too slow: end the connection here and now.

        Shutting the socket down makes gunicorn's own last write (the closing chunk) fail
        with a broken pipe, which it treats as a client that left, instead of waiting out
        the write timeout again and logging the timeout as a socket error with a traceback.
        """
        self.dead = True
        STREAM_DROPS.labels(reason).inc()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.wake.set()
