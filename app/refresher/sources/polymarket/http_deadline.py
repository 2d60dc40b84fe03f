"""One deadline for each HTTP exchange with an upstream, not only one per read.

httpx's timeouts bound each phase and each read: an answer trickled a byte a second never
trips a 3 s read timeout, and held the one upkeep thread for 90 s. ``DeadlineTransport``
gives the whole exchange (connect, TLS, request, headers, body) ``DEADLINE_S`` from its
start. It owns an httpcore connection pool whose network backend
(``app.network_deadline``, shared with the alerts' calls) clamps every connect, read and
write timeout to the time left, and raises the timeout error once none is left. The
body is read inside the exchange (our answers are small), so the deadline covers it too.
Not covered: the name lookup before a connection (``getaddrinfo`` takes no timeout).

Errors come out as httpx's (a passed deadline is ``httpx.ReadTimeout``, ``ConnectTimeout``
or ``WriteTimeout``), so callers' ``except httpx.HTTPError`` keeps working, and
``RecordingTransport`` can wrap this transport as it wraps any other.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpcore
import httpx

from app.network_deadline import DeadlineBackend, within

DEADLINE_S = 5.0  # the most one exchange may take, whatever the upstream trickles

# httpcore's errors as httpx's, the most specific first (what httpx's own transport raises).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)
_CORE_ERRORS = tuple(ours for ours, _ in _ERRORS)
# What the response keeps of httpcore's extensions (its network stream is closed by then).
_KEPT_EXTENSIONS = ("http_version", "reason_phrase")


@contextmanager
def _httpx_errors(request: httpx.Request) -> Iterator[None]:
    """Raise httpcore's errors as the httpx errors callers catch."""
    try:
        yield
    except _CORE_ERRORS as exc:
        httpx_error = next(theirs for ours, theirs in _ERRORS if isinstance(exc, ours))
        raise httpx_error(str(exc), request=request) from exc


class DeadlineTransport(httpx.BaseTransport):
    """HTTP/1.1 over a pool of its own, each exchange done within ``deadline_s``.

    The client's own timeouts still apply within it (a read that waits 3 s fails first).
    Unlike httpx's default transport it reads no proxy settings from the environment.
    """

    def __init__(
        self, deadline_s: float = DEADLINE_S, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.deadline_s = deadline_s
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(),
            # httpx's default limits.
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=DeadlineBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """The whole exchange, body included, within the deadline (or an httpx timeout)."""
        if not isinstance(request.stream, httpx.SyncByteStream):
            raise TypeError("DeadlineTransport sends synchronous requests only")
        timeouts = dict(request.extensions.get("timeout", {}))
        pool = timeouts.get("pool")
        # Waiting for a free connection is a wait too: no longer than the whole exchange.
        timeouts["pool"] = self.deadline_s if pool is None else min(pool, self.deadline_s)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions={**request.extensions, "timeout": timeouts},
        )
        with within(time.monotonic() + self.deadline_s), _httpx_errors(request):
            response = self._pool.handle_request(core_request)
            try:
                body = response.read()
            finally:
                response.close()
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=httpx.ByteStream(body),
            extensions={k: v for k, v in response.extensions.items() if k in _KEPT_EXTENSIONS},
        )

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()
