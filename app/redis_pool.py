"""Redis clients with bounded pools: waiting for a connection is bounded, and is not an outage.

redis-py's default pool opens up to 2**31 connections, or, when capped, raises "Too many
connections" (a ``ConnectionError``) the moment the cap is reached, which callers cannot
tell from Redis being down. A busy gevent worker (hundreds of simultaneous requests) hits
that cap in bursts. Here every client draws from a ``BoundedPool``: at most
``REDIS_POOL_SIZE`` connections per pool, a caller waits for a free one at most
``POOL_WAIT_S``, and if none frees up it gets ``PoolBusyError``, which is NOT a
``ConnectionError``: callers answer "busy, retry" (or count that one call locally) instead
of switching to their outage behaviour.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from app.metrics.common import REDIS_ERRORS, REDIS_FALLBACK, component_label
from app.redis_urls import is_sentinel_url, parse_sentinel_url

POOL_WAIT_S = 1.0
PROBE_S = 2.0  # while Redis is away, how often one call tries it again
T = TypeVar("T")

log = logging.getLogger(__name__)
DEFAULT_POOL_SIZE = 64


class PoolBusyError(redis.RedisError):
    """No pooled connection came free in time: this process is busy, Redis is not down."""


class BoundedPool(redis.BlockingConnectionPool):
    """A blocking pool whose exhaustion raises ``PoolBusyError``."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        """A connection, waiting at most the pool's timeout for one to come free."""
        try:
            return super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except redis.ConnectionError as exc:
            # redis-py raises a plain ConnectionError from inside its ``except Empty``.
            if isinstance(exc.__context__, queue.Empty):
                raise PoolBusyError(
                    f"all {self.max_connections} pooled Redis connections are in use"
                ) from exc
            raise


class BoundedSentinelPool(SentinelConnectionPool, BoundedPool):
    """A bounded pool whose connections go to the primary the sentinels name.

    Each new connection asks the sentinels where the primary is; when that changed, the idle
    connections are dropped, and a connection still on a demoted primary is dropped at its
    first write (redis-py's sentinel-managed connections). So after a failover every client
    follows the new primary by itself.
    """


def _sentinel_pool(url: str, timeout_s: float, size: int) -> BoundedSentinelPool:
    target = parse_sentinel_url(url)
    timeouts = {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s}
    timeouts.update(dict(target.timeouts))
    sentinels = Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels),
        # Each sentinel asked once per lookup (discovery goes on to the next one): redis-py's
        # default for a client of its own is 3 retries with up to 10 s of backoff, which held
        # a lookup, the publish waiting on it and a stop for many times the timeout.
        sentinel_kwargs={
            **timeouts,
            "password": target.sentinel_password,
            "retry": Retry(NoBackoff(), 0),
        },
    )
    return BoundedSentinelPool(  # type: ignore[no-untyped-call]
        target.service,
        sentinels,
        max_connections=size,
        timeout=POOL_WAIT_S,
        db=target.db,
        username=target.username,
        password=target.password,
        socket_keepalive=True,
        retry_on_timeout=False,
        **timeouts,
    )


def bounded_pool(url: str, timeout_s: float, size: int = DEFAULT_POOL_SIZE) -> BoundedPool:
    """A pool for ``url`` (``redis://`` or ``redis+sentinel://``) with ``timeout_s`` to connect
    and to answer (unless the URL's query sets them); opens nothing yet."""
    if is_sentinel_url(url):
        return _sentinel_pool(url, timeout_s, size)
    pool: BoundedPool = BoundedPool.from_url(
        url,
        max_connections=size,
        timeout=POOL_WAIT_S,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        socket_keepalive=True,
        retry_on_timeout=False,
    )
    return pool


def redis_client(url: str, timeout_s: float = 2.0, size: int = DEFAULT_POOL_SIZE) -> redis.Redis:
    """A client on a bounded pool of its own, with short timeouts; opens no connection."""
    return redis.Redis(connection_pool=bounded_pool(url, timeout_s, size))


class RedisFallback:
    """The one "Redis is away" pattern: Redis when it answers, a local stand-in when not.

    A Redis error sends that call, and the following ones, to the local stand-in (logged
    once per outage); while down, one call every ``probe_s`` tries Redis again, and the
    first that succeeds ends the outage (logged once). A busy pool (``PoolBusyError``) is
    not an outage: ``on_busy`` decides what that one call gets (by default the stand-in).
    """

    def __init__(
        self,
        what: str,
        stand_in: str,
        probe_s: float = PROBE_S,
        errors: tuple[type[Exception], ...] = (redis.RedisError, OSError),
    ) -> None:
        self._what = what
        self._stand_in = stand_in
        self._errors = errors
        self._probe_s = probe_s
        self._down = False
        self._next_probe = 0.0
        self._lock = threading.Lock()
        self._errors_total = REDIS_ERRORS.labels(component_label(what))
        self._fallback = REDIS_FALLBACK.labels(component_label(what))
        self._fallback.set(0)

    @property
    def down(self) -> bool:
        """True while calls go to the stand-in."""
        return self._down

    def call(
        self,
        redis_call: Callable[[], T],
        local_call: Callable[[], T],
        on_busy: Callable[[PoolBusyError], T] | None = None,
    ) -> T:
        """``redis_call()``, or ``local_call()`` while Redis is away (see the class)."""
        if self._down:
            now = time.monotonic()
            with self._lock:
                probe = now >= self._next_probe
                if probe:
                    self._next_probe = now + self._probe_s
            if not probe:
                return local_call()
        try:
            result = redis_call()
        except PoolBusyError as busy:
            return on_busy(busy) if on_busy is not None else local_call()
        except self._errors as exc:
            self._errors_total.inc()
            with self._lock:
                if not self._down:
                    log.warning(
                        "%s unreachable (%s): %s", self._what, type(exc).__name__, self._stand_in
                    )
                    self._down = True
                    self._fallback.set(1)
                self._next_probe = time.monotonic() + self._probe_s
            return local_call()
        if self._down:
            with self._lock:
                if self._down:
                    log.info("%s reachable again: back on Redis", self._what)
                    self._down = False
                    self._fallback.set(0)
        return result
