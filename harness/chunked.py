"""HTTP/1.1's chunked transfer coding, decoded strictly: a bad size line, a chunk not closed
by CRLF, an EOF inside a chunk or a byte after the last one is a ``ProtocolError``."""

from __future__ import annotations

from collections.abc import Callable


class ProtocolError(AssertionError):
    """The server broke HTTP framing."""


def read_chunked(
    more: Callable[[], bytes], body: Callable[[bytes], None], ended: Callable[[], None]
) -> None:
    """Decode a chunked body read by ``more`` (b'' at EOF): each chunk's data to ``body``,
    ``ended`` at the last chunk; then insist that nothing follows until the server closes."""
    buffer = b""

    def need(size: int) -> None:
        nonlocal buffer
        while len(buffer) < size:
            data = more()
            if not data:
                raise ProtocolError(f"EOF inside a chunk (have {len(buffer)}/{size})")
            buffer += data

    def line() -> bytes:
        nonlocal buffer
        while b"\r\n" not in buffer:
            data = more()
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
            ended()
            break
        need(size + 2)
        data, crlf, buffer = buffer[:size], buffer[size : size + 2], buffer[size + 2 :]
        if crlf != b"\r\n":
            raise ProtocolError(f"chunk of {size} bytes not followed by CRLF: {crlf!r}")
        body(data)
    # After the last chunk the server may keep the connection for another request.
    extra = buffer
    while True:
        data = more()
        if not data:
            break
        extra += data
    if extra:
        raise ProtocolError(f"bytes after the last chunk: {extra[:200]!r}")
