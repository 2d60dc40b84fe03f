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

import queue
from typing import Any

import redis

POOL_WAIT_S = 1.0
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


def bounded_pool(url: str, timeout_s: float, size: int = DEFAULT_POOL_SIZE) -> BoundedPool:
    """A pool for ``url`` with ``timeout_s`` to connect and to answer; opens nothing yet."""
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
