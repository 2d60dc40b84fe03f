"""A strict test client for the Server-Sent Events stream, over a raw socket.

``StreamConnection`` speaks HTTP/1.1 (and then insists on a well-formed chunked body) or
HTTP/1.0 (the body runs until the server closes). A reader thread decodes the transfer
encoding, keeps every body byte, and feeds an SSE parser written from the WHATWG rules
(``SseParser``); parsed items go to a queue, so a test reads them with a timeout and never
blocks the server by not reading. ``naive_boards`` is the other kind of client: it splits the
body on newlines and JSON-parses each ``data:`` line on its own. The items, the parser and
``naive_boards`` live in ``harness.sse``, the chunked decoding in ``harness.chunked``.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping

from harness.chunked import ProtocolError, read_chunked
from harness.sse import (
    Closed,
    Comment,
    Event,
    Item,
    ResponseEnd,
    Retry,
    SseParser,
    naive_boards,
    summarize,
)

STREAM = "/api/probboard/stream"

# Re-exported: the tests import the stream's items and parser from here.
__all__ = [
    "STREAM",
    "Closed",
    "Comment",
    "Event",
    "Item",
    "ProtocolError",
    "ResponseEnd",
    "Retry",
    "SseParser",
    "StreamConnection",
    "naive_boards",
    "summarize",
]


class StreamConnection:
    """One request to the stream (or any path) over a raw socket.

    ``read=False`` never reads the body (a stalled client); ``rcvbuf`` sets SO_RCVBUF before
    connecting. The status line and headers are read at once; for a 200 answer a reader
    thread then parses the body into ``items`` (a queue).
    """

    def __init__(
        self,
        port: int,
        headers: Mapping[str, str] | None = None,
        *,
        http10: bool = False,
        path: str = STREAM,
        read: bool = True,
        rcvbuf: int | None = None,
        timeout: float = 20.0,
    ) -> None:
        self.port = port
        self.http10 = http10
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.local_port: int = self.sock.getsockname()[1]
        version = "HTTP/1.0" if http10 else "HTTP/1.1"
        lines = [f"GET {path} {version}", f"Host: 127.0.0.1:{port}", "Accept: text/event-stream"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        self.items: queue.Queue[Item] = queue.Queue()
        self.body = bytearray()  # the decoded body (no chunk framing)
        self.raw = bytearray()  # every byte after the header block, as received
        self.parser = SseParser()
        self.history: list[Item] = []
        self.status, self.reason, self.header_list = self._read_head()
        self.headers = {name.lower(): value for name, value in self.header_list}
        self.chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.status != 200:
            self._read_fixed_body()
            self.sock.close()
        elif read:
            self._thread = threading.Thread(target=self._reader, daemon=True)
            self._thread.start()

    # -- head and fixed bodies -------------------------------------------------------

    def _recv(self, size: int = 65536) -> bytes:
        return self.sock.recv(size)

    def _read_head(self) -> tuple[int, str, list[tuple[str, str]]]:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            data = self._recv()
            if not data:
                raise ProtocolError(f"connection closed before the headers: {buffer!r}")
            buffer += data
        head, _, rest = buffer.partition(b"\r\n\r\n")
        self._pending = rest
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        version, status, reason = [*status_line.split(" ", 2), ""][:3]
        if not version.startswith("HTTP/1."):
            raise ProtocolError(f"bad status line {status_line!r}")
        parsed = []
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon:
                raise ProtocolError(f"bad header line {line!r}")
            parsed.append((name.strip(), value.strip()))
        return int(status), reason, parsed

    def _read_fixed_body(self) -> None:
        length = self.headers.get("content-length")
        data = self._pending
        if length is not None:
            while len(data) < int(length):
                more = self._recv()
                if not more:
                    break
                data += more
            self.body += data[: int(length)]
        else:
            self.body += data

    # -- the reader thread -----------------------------------------------------------

    def _reader(self) -> None:
        try:
            if self.chunked:
                self._read_chunked()
            else:
                self._read_until_close()
        except ProtocolError as exc:
            self._put(Closed(f"protocol error: {exc}"))
        except OSError as exc:
            self._put(Closed(f"{type(exc).__name__}: {exc}"))
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()

    def _put(self, item: Item) -> None:
        self.history.append(item)
        self.items.put(item)

    def _body(self, data: bytes) -> None:
        self.body += data
        for item in self.parser.feed(data):
            self._put(item)

    def _more(self) -> bytes:
        """Next bytes from the socket; b'' at EOF; polls the stop flag."""
        if self._pending:
            data, self._pending = self._pending, b""
            self.raw += data
            return data
        self.sock.settimeout(0.25)
        while not self._stop.is_set():
            try:
                data = self._recv()
            except TimeoutError:
                continue
            self.raw += data
            return data
        raise OSError("closed by the test")

    def _read_until_close(self) -> None:
        while True:
            data = self._more()
            if not data:
                self._put(ResponseEnd())
                self._put(Closed())
                return
            self._body(data)

    def _read_chunked(self) -> None:
        read_chunked(self._more, self._body, lambda: self._put(ResponseEnd()))
        self._put(Closed())

    # -- reading ---------------------------------------------------------------------

    def next_item(self, timeout: float) -> Item | None:
        """The next parsed item, or None if none came within ``timeout`` seconds."""
        try:
            return self.items.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_for(
        self, predicate: Callable[[Item], bool], timeout: float, what: str = "an item"
    ) -> tuple[Item, list[Item]]:
        """Read until an item matches; returns it and everything read before it.

        Fails on timeout, and on the end of the stream unless that is what is awaited.
        """
        deadline = time.monotonic() + timeout
        before: list[Item] = []
        while True:
            left = deadline - time.monotonic()
            item = self.next_item(max(left, 0.0)) if left > 0 else self.next_item(0)
            if item is None:
                raise AssertionError(
                    f"no {what} within {timeout} s on stream :{self.local_port}; "
                    f"read meanwhile: {summarize(before)}"
                )
            if predicate(item):
                return item, before
            if isinstance(item, Closed):
                raise AssertionError(
                    f"stream :{self.local_port} closed ({item.error}) while waiting for "
                    f"{what}; read: {summarize(before)}"
                )
            before.append(item)

    def wait_event(
        self,
        timeout: float,
        what: str = "an event",
        predicate: Callable[[Event], bool] = lambda e: True,
    ) -> tuple[Event, list[Item]]:
        """The next event that matches, and everything read before it."""
        item, before = self.wait_for(lambda i: isinstance(i, Event) and predicate(i), timeout, what)
        assert isinstance(item, Event)
        return item, before

    def next_event(self, timeout: float, what: str = "an event") -> Event:
        """The next dispatched event (comments, retry fields are skipped)."""
        return self.wait_event(timeout, what)[0]

    def drain(self) -> list[Item]:
        """Everything parsed and not yet read."""
        found: list[Item] = []
        while True:
            try:
                found.append(self.items.get_nowait())
            except queue.Empty:
                return found

    def close(self) -> None:
        """Stop reading and close the socket (the client going away)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with contextlib.suppress(OSError):
            self.sock.close()

    def abort(self) -> None:
        """Close with a reset (SO_LINGER 0): the server's next write to it fails at once."""
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    def __enter__(self) -> StreamConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
