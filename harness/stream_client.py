"""A strict test client for the Server-Sent Events stream, over a raw socket.

``StreamConnection`` speaks HTTP/1.1 (and then insists on a well-formed chunked body) or
HTTP/1.0 (the body runs until the server closes). A reader thread decodes the transfer
encoding, keeps every body byte, and feeds an SSE parser written from the WHATWG rules
(``SseParser``); parsed items go to a queue, so a test reads them with a timeout and never
blocks the server by not reading. ``naive_boards`` is the other kind of client: it splits the
body on newlines and JSON-parses each ``data:`` line on its own.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

STREAM = "/api/probboard/stream"


# -- parsed items -------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A dispatched SSE event: its type, its data (lines joined by LF) and the last event id."""

    type: str
    data: str
    id: str


@dataclass(frozen=True)
class Comment:
    """A comment line (``: text``), without the colon."""

    text: str


@dataclass(frozen=True)
class Retry:
    """A valid ``retry:`` field."""

    ms: int


@dataclass(frozen=True)
class ResponseEnd:
    """The end of the response body (the last chunk; for HTTP/1.0 the server's close)."""


@dataclass(frozen=True)
class Closed:
    """The server closed the connection (or reset it: ``error`` says so)."""

    error: str | None = None


Item = Event | Comment | Retry | ResponseEnd | Closed


class SseParser:
    """Incremental event-stream parser per the HTML standard ("Interpreting an event stream").

    Lines end in CRLF, LF or CR; an empty line dispatches; ``:`` starts a comment; one space
    after the field's colon is dropped; ``data`` lines are joined by LF; ``id`` without NUL
    sets the last event id; ``retry`` counts only when it is all ASCII digits; an event with
    no data is not dispatched; the event type defaults to ``message``.
    """

    def __init__(self) -> None:
        self._decoder_buffer = b""
        self._text = ""
        self._started = False
        self._data: list[str] = []
        self._type = ""
        self._last_id = ""
        self.unknown_fields: list[str] = []

    def feed(self, data: bytes) -> list[Item]:
        """Parse ``data`` (any split of the body); the items completed by it."""
        self._decoder_buffer += data
        try:
            text = self._decoder_buffer.decode("utf-8")
            self._decoder_buffer = b""
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data":
                raise
            text = self._decoder_buffer[: exc.start].decode("utf-8")
            self._decoder_buffer = self._decoder_buffer[exc.start :]
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        self._text += text
        items: list[Item] = []
        while True:
            cut = self._line_end()
            if cut is None:
                return items
            line, rest_at = cut
            self._text = self._text[rest_at:]
            item = self._line(line)
            if item is not None:
                items.append(item)

    def _line_end(self) -> tuple[str, int] | None:
        text = self._text
        for index, char in enumerate(text):
            if char == "\n":
                return text[:index], index + 1
            if char == "\r":
                if index + 1 == len(text):
                    return None  # CR at the end: wait to see whether LF follows
                if text[index + 1] == "\n":
                    return text[:index], index + 2
                return text[:index], index + 1
        return None

    def _line(self, line: str) -> Item | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return Comment(line[1:].removeprefix(" "))
        field, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry":
            if value and all("0" <= c <= "9" for c in value):
                return Retry(int(value))
        else:
            self.unknown_fields.append(field)
        return None

    def _dispatch(self) -> Event | None:
        data, event_type = self._data, self._type
        self._data, self._type = [], ""
        if not data:
            return None
        return Event(event_type or "message", "\n".join(data), self._last_id)


def naive_boards(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """What a simple client gets: every ``data:`` line JSON-parsed on its own, with the
    ``id:`` line seen before it (None if none). Only lines of boards (``event: board``)."""
    boards: list[tuple[str | None, dict[str, Any]]] = []
    last_id: str | None = None
    event_type = ""
    for line in body.decode("utf-8").split("\n"):
        if line.startswith("id:"):
            last_id = line[3:].strip()
        elif line.startswith("event:"):
            event_type = line[6:].strip()
        elif line.startswith("data:"):
            if event_type == "board":
                boards.append((last_id, json.loads(line[5:])))
        elif line.strip() == "":
            event_type = ""
    return boards


# -- the connection -----------------------------------------------------------------------


class ProtocolError(AssertionError):
    """The server broke HTTP framing."""


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
        buffer = b""

        def need(size: int) -> None:
            nonlocal buffer
            while len(buffer) < size:
                data = self._more()
                if not data:
                    raise ProtocolError(f"EOF inside a chunk (have {len(buffer)}/{size})")
                buffer += data

        def line() -> bytes:
            nonlocal buffer
            while b"\r\n" not in buffer:
                data = self._more()
                if not data:
                    raise ProtocolError(f"EOF inside a chunk header: {buffer!r}")
                buffer += data
            found, _, buffer = buffer.partition(b"\r\n")
            return found

        while True:
            size_line = line()
            size_text = size_line.split(b";", 1)[0].strip()
            if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                raise ProtocolError(f"bad chunk size line {size_line!r}")
            size = int(size_text, 16)
            if size == 0:
                while line() != b"":
                    pass  # trailers
                self._put(ResponseEnd())
                break
            need(size + 2)
            data, crlf, buffer = buffer[:size], buffer[size : size + 2], buffer[size + 2 :]
            if crlf != b"\r\n":
                raise ProtocolError(f"chunk of {size} bytes not followed by CRLF: {crlf!r}")
            self._body(data)
        # After the last chunk the server may keep the connection for another request.
        extra = buffer
        while True:
            data = self._more()
            if not data:
                break
            extra += data
        if extra:
            raise ProtocolError(f"bytes after the last chunk: {extra[:200]!r}")
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


def summarize(items: Iterable[Item]) -> list[str]:
    """A short description of items, for assertion messages."""
    out = []
    for item in items:
        if isinstance(item, Event):
            out.append(f"Event({item.type}, id={item.id}, {len(item.data)} chars)")
        else:
            out.append(repr(item))
    return out[-30:]
