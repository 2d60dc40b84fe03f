"""One deadline for a whole HTTP exchange over httpcore, not only one per read.

httpcore times each connect, read and write on its own: an answer trickled a byte at a time
never trips a read timeout, and holds its thread as long as the peer likes (h11 reads up to
16 KB of headers). ``DeadlineBackend`` is httpcore's socket backend whose streams clamp every
wait to what is left of the exchange under way in the calling thread (``within``), and raise
httpcore's timeout error once none is left; outside ``within`` it is the plain backend.

Used by the refresher's upstream client (``DeadlineTransport``) and the alerts' calls.
Not covered: the name lookup before a connection (``getaddrinfo`` takes no timeout).
"""

from __future__ import annotations

import ssl
import time
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import httpcore

# The deadline of the exchange under way in this thread: a pooled connection outlives the
# exchange that opened it, so its stream reads the deadline of whoever uses it now.
_deadline: ContextVar[float | None] = ContextVar("probboard_http_deadline", default=None)


@contextmanager
def within(deadline: float) -> Iterator[None]:
    """Bound this thread's exchanges over ``DeadlineBackend`` by ``deadline``
    (``time.monotonic``)."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def _time_left(error: type[httpcore.TimeoutException], timeout: float | None) -> float | None:
    """``timeout`` clamped to what is left of this thread's exchange (unchanged outside one);
    raises ``error`` once the deadline has passed."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:  # never 0 below: a zero socket timeout means non-blocking, not "expired"
        raise error("the deadline of the exchange has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every wait ends by the deadline of the exchange."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Read, waiting no longer than the time left."""
        return self._inner.read(max_bytes, _time_left(httpcore.ReadTimeout, timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write, waiting no longer than the time left."""
        self._inner.write(buffer, _time_left(httpcore.WriteTimeout, timeout))

    def close(self) -> None:
        """Close the stream below."""
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        """The TLS handshake, within the time left; the TLS stream keeps the deadline."""
        left = _time_left(httpcore.ConnectTimeout, timeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> typing.Any:
        """As the stream below (the pool asks whether an idle connection is readable)."""
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, its connections opened within the time left."""

    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Connect within the time left."""
        left = _time_left(httpcore.ConnectTimeout, timeout)
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, left, local_address, socket_options)
        )

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Connect within the time left."""
        left = _time_left(httpcore.ConnectTimeout, timeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        """As the backend below (retries between connection attempts)."""
        self._inner.sleep(seconds)
