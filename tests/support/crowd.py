"""A crowd of simultaneous HTTP requests from one process (asyncio raw sockets).

``fire(port, requests, timeout)`` opens one connection per request (up to a few thousand),
waits until every connection is established (a start barrier), then writes every request in
the same instant and reads each answer under its own ``timeout``: the status, the headers,
the first bytes of the body (de-chunked) and the seconds from the request's write to its
complete head. A request that got no answer in time, or whose connection failed, says so in
``error``.

Streams (``Request(..., stream=True)``) are read until the first ``event: board`` (or the
body timeout) and are kept open until every request of the crowd has its answer, so the
streams the server admitted still hold their slots while it answers the others; then all are
closed. ``open_streams`` is the shorthand for N simultaneous stream opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STREAM_PATH = "/api/probboard/stream"
MAX_BODY = 64 * 1024


def raise_nofile_limit(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE toward ``wanted`` (at most the hard limit); the new soft."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


@dataclass(frozen=True)
class Request:
    """One request of the crowd; ``stream`` reads it as an event stream and keeps it open."""

    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "GET"
    stream: bool = False

    def encode(self, port: int) -> bytes:
        """The request's bytes (HTTP/1.1, ``Connection: close`` unless it is a stream)."""
        lines = [f"{self.method} {self.path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
        if self.stream:
            lines.append("Accept: text/event-stream")
        else:
            lines.append("Connection: close")
        lines += [f"{name}: {value}" for name, value in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Answer:
    """What one request got; ``status`` is None when no complete head came in time."""

    request: Request
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    seconds: float | None = None
    error: str | None = None

    def json(self) -> Any:
        """The body parsed as JSON (None when it is not JSON)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def code(self) -> str | None:
        """The ErrorResponse ``code`` of the body, if any."""
        body = self.json()
        return body.get("code") if isinstance(body, dict) else None

    @property
    def stream_started(self) -> bool:
        """A 200 that opened an event stream (its ``retry:`` field arrived)."""
        return self.status == 200 and b"retry:" in self.body

    @property
    def has_board(self) -> bool:
        """The stream carried an ``event: board``."""
        return b"event: board" in self.body

    def outcome(self) -> str:
        """A short label: ``200``, ``429 too_many_streams``, ``timeout``..."""
        if self.status is None:
            return self.error or "no answer"
        code = self.code
        return f"{self.status} {code}" if code else str(self.status)


def tally(answers: Sequence[Answer]) -> Counter[str]:
    """How many answers of each outcome."""
    return Counter(answer.outcome() for answer in answers)


def dechunk(raw: bytes) -> bytes:
    """The data of a (possibly incomplete) chunked body."""
    out = bytearray()
    rest = raw
    while True:
        line_end = rest.find(b"\r\n")
        if line_end < 0:
            return bytes(out)
        try:
            size = int(rest[:line_end].split(b";", 1)[0].strip() or b"0", 16)
        except ValueError:
            return bytes(out)
        if size == 0:
            return bytes(out)
        start = line_end + 2
        out += rest[start : start + size]
        if len(rest) < start + size + 2:
            return bytes(out)
        rest = rest[start + size + 2 :]


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status and the headers (names lower-cased) of a response head."""
    status_line, *lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


class _Crowd:
    """The shared state of one ``fire``."""

    def __init__(self, port: int, requests: Sequence[Request], timeout: float, body_timeout: float):
        """The crowd's requests, bounds and barriers."""
        self.port = port
        self.requests = requests
        self.timeout = timeout
        self.body_timeout = body_timeout
        self.go = asyncio.Event()
        self.all_answered = asyncio.Event()
        self.connected = 0
        self.answered = 0

    def _one_answered(self) -> None:
        """Count an answered request; the last one releases the held streams."""
        self.answered += 1
        if self.answered == len(self.requests):
            self.all_answered.set()

    async def one(self, request: Request, connect_timeout: float) -> Answer:
        """Connect, wait for the barrier, send, read the answer; hold an admitted stream."""
        answer = Answer(request)
        writer: asyncio.StreamWriter | None = None
        try:
            try:
                async with asyncio.timeout(connect_timeout):
                    reader, writer = await asyncio.open_connection(
                        "127.0.0.1", self.port, limit=MAX_BODY * 2
                    )
            except (OSError, TimeoutError) as exc:
                answer.error = f"connect: {type(exc).__name__}"
            finally:
                self.connected += 1
                if self.connected == len(self.requests):
                    self.go.set()
            await self.go.wait()
            if writer is None:
                self._one_answered()
                return answer
            await self._exchange(request, reader, writer, answer)
            self._one_answered()
            if request.stream and answer.status == 200:
                await self.all_answered.wait()  # hold the stream while the others are answered
            return answer
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _exchange(
        self,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        answer: Answer,
    ) -> None:
        """Send the request and read its answer into ``answer`` within the timeout."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                writer.write(request.encode(self.port))
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                answer.status, answer.headers = _parse_head(head[:-4])
                answer.seconds = time.monotonic() - started
                if not request.stream or answer.status != 200:
                    answer.body = await self._fixed_body(reader, answer.headers)
        except TimeoutError:
            answer.error = "timeout"
            return
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            answer.error = f"{type(exc).__name__}"
            return
        if request.stream and answer.status == 200:
            answer.body = await self._stream_start(reader, answer.headers)

    async def _fixed_body(self, reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
        """The body's first bytes: Content-Length, else until EOF (de-chunked)."""
        length = headers.get("content-length")
        if length is not None:
            return await reader.readexactly(min(int(length), MAX_BODY))
        raw = bytearray()
        while len(raw) < MAX_BODY:
            data = await reader.read(MAX_BODY)
            if not data:
                break
            raw += data
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return dechunk(bytes(raw))
        return bytes(raw)

    async def _stream_start(
        self, reader: asyncio.StreamReader, headers: Mapping[str, str]
    ) -> bytes:
        """The stream's first bytes, up to its first board (or ``body_timeout``)."""
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        raw = bytearray()
        body = b""
        with contextlib.suppress(TimeoutError, OSError, asyncio.IncompleteReadError):
            async with asyncio.timeout(self.body_timeout):
                while b"event: board" not in body and len(raw) < MAX_BODY:
                    data = await reader.read(MAX_BODY)
                    if not data:
                        break
                    raw += data
                    body = dechunk(bytes(raw)) if chunked else bytes(raw)
        return dechunk(bytes(raw)) if chunked else bytes(raw)


async def _fire(
    port: int,
    requests: Sequence[Request],
    timeout: float,
    body_timeout: float,
    connect_timeout: float,
) -> list[Answer]:
    """Every request of the crowd at once, in one event loop."""
    crowd = _Crowd(port, requests, timeout, body_timeout)
    return list(await asyncio.gather(*(crowd.one(r, connect_timeout) for r in requests)))


def fire(
    port: int,
    requests: Sequence[Request],
    timeout: float,
    *,
    body_timeout: float = 10.0,
    connect_timeout: float = 30.0,
) -> list[Answer]:
    """Send every request at once to 127.0.0.1:``port``; one ``Answer`` per request, in order.

    ``timeout`` bounds each request from its write to the end of its answer (a stream's
    head); ``body_timeout`` bounds the wait for a stream's first board after its head.
    """
    raise_nofile_limit(len(requests) * 2 + 256)
    return asyncio.run(_fire(port, requests, timeout, body_timeout, connect_timeout))


def open_streams(
    port: int, count: int, headers: Mapping[str, str], timeout: float, body_timeout: float = 10.0
) -> list[Answer]:
    """``count`` simultaneous stream opens with ``headers``; all are closed when it returns."""
    request = Request(STREAM_PATH, headers, stream=True)
    return fire(port, [request] * count, timeout, body_timeout=body_timeout)
