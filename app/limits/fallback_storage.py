"""Rate-limit storage that survives Redis outages: Redis when it answers, memory when not.

A fallback that switches only the request that first notices an outage (flask-limiter's)
lets requests already in flight at that moment fail, go uncounted and log a traceback each.
This storage (scheme ``probboard+redis://``) makes the switch itself, for every call: any
Redis error sends that call, and the following ones, to a per-process memory storage
(logged once per outage); every ``PROBE_S`` seconds (``app.redis_pool``) one call tries
Redis again and, when it answers, counting goes back to Redis (logged once). A worker
that is only busy (no pooled connection free within the pool's wait, ``PoolBusyError``)
counts that one call in memory and stays on Redis: busy is not an outage.

In Redis, a sliding-window hit is one Lua script (``sliding_window.lua``) that also reports
the window, sent through a ``ScriptBatcher`` with the hits of concurrent requests. The
window it reports is kept for the request (a context variable: per thread, per greenlet)
so the X-RateLimit headers read right after the hit need no second round trip.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from importlib import resources
from typing import Any, TypeVar, cast

from limits.storage import MemoryStorage, RedisStorage, SlidingWindowCounterSupport, Storage
from redis import Redis

from app.limits.batching import ScriptBatcher
from app.redis_pool import DEFAULT_POOL_SIZE, RedisFallback, bounded_pool

SCHEME = "probboard+redis"
T = TypeVar("T")
Window = tuple[int, float, int, float]
# How long a window reported by a hit may stand in for reading it again (same request).
REPORTED_WINDOW_S = 1.0
_reported: ContextVar[tuple[str, float, Window] | None] = ContextVar(
    "probboard_reported_window", default=None
)


class FailoverStorage(Storage, SlidingWindowCounterSupport):
    """Redis storage with a per-process memory fallback; see the module docstring."""

    # One per REDIS_URL scheme, behind "probboard+" (see app.limits._storage_uri).
    STORAGE_SCHEME = [SCHEME, SCHEME + "s", SCHEME + "+sentinel", "probboard+unix"]  # noqa: RUF012

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        redis_uri = uri.replace("probboard+", "", 1)
        size = int(options.pop("pool_size", DEFAULT_POOL_SIZE))
        # Timeouts come from the URI's query (see app.limits._storage_uri).
        pool = bounded_pool(redis_uri, timeout_s=1.0, size=size)
        self.redis = RedisStorage(redis_uri, connection_pool=pool, **options)
        script = resources.files("app.limits").joinpath("sliding_window.lua").read_text()
        # limits builds a redis-py client for redis:// URIs (typed as its own protocol).
        client = cast(Redis, self.redis.get_connection())
        self._sliding_window = ScriptBatcher(client, script)
        self.memory = MemoryStorage()
        self._fallback = RedisFallback(
            "rate-limit storage", "counting in memory in this worker", errors=(Exception,)
        )

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """Nothing escapes: every Redis failure is answered from memory."""
        return ()

    @property
    def in_fallback(self) -> bool:
        """True while counting in memory."""
        return self._fallback.down

    def _call(self, redis_call: Callable[[], T], memory_call: Callable[[], T]) -> T:
        # Any failure of the Redis path (the limits library raises its own errors too).
        return self._fallback.call(redis_call, memory_call)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Increment a fixed-window counter."""
        return self._call(
            lambda: self.redis.incr(key, expiry, amount),
            lambda: self.memory.incr(key, expiry, amount),
        )

    def get(self, key: str) -> int:
        """A counter's value."""
        return self._call(lambda: self.redis.get(key), lambda: self.memory.get(key))

    def get_expiry(self, key: str) -> float:
        """When a counter expires."""
        return self._call(lambda: self.redis.get_expiry(key), lambda: self.memory.get_expiry(key))

    def check(self) -> bool:
        """Always usable: memory stands in for Redis."""
        return True

    def reset(self) -> int | None:
        """Clear both storages."""
        self.memory.reset()
        try:
            return self.redis.reset()
        except Exception:
            return None

    def clear(self, key: str) -> None:
        """Clear one key in both storages."""
        self.memory.clear(key)
        self._call(lambda: self.redis.clear(key), lambda: None)

    def _window_keys(self, key: str) -> list[str]:
        current = self.redis.prefixed_key(f"{{{key}}}")
        return [f"{current}/previous", current]

    def _redis_window(self, key: str, limit: int, expiry: int, amount: int) -> tuple[bool, Window]:
        taken, previous, previous_ttl, current, current_ttl = self._sliding_window(
            self._window_keys(key), [limit, expiry, amount]
        )
        window = (int(previous), int(previous_ttl) / 1000, int(current), int(current_ttl) / 1000)
        return bool(taken), window

    def _redis_acquire(self, key: str, limit: int, expiry: int, amount: int) -> bool:
        taken, window = self._redis_window(key, limit, expiry, amount)
        _reported.set((key, time.monotonic() + REPORTED_WINDOW_S, window))
        return taken

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Count a hit in the sliding window unless over ``limit``."""
        return self._call(
            lambda: self._redis_acquire(key, limit, expiry, amount),
            lambda: self.memory.acquire_sliding_window_entry(key, limit, expiry, amount),
        )

    def get_sliding_window(self, key: str, expiry: int) -> Window:
        """The previous and current window counts and their expiries.

        Right after a hit on ``key`` in this request, the window that hit reported.
        """
        reported = _reported.get()
        if reported is not None and reported[0] == key:
            _reported.set(None)
            if time.monotonic() < reported[1] and not self._fallback.down:
                return reported[2]
        return self._call(
            lambda: self._redis_window(key, 0, expiry, 0)[1],
            lambda: self.memory.get_sliding_window(key, expiry),
        )

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Clear a sliding window in both storages."""
        self.memory.clear_sliding_window(key, expiry)
        keys = self._window_keys(key)
        self._call(lambda: self.redis.get_connection().delete(*keys), lambda: 0)
