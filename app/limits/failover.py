"""Rate-limit storage that survives Redis outages: Redis when it answers, memory when not.

flask-limiter's own fallback switches only the request that first notices an outage;
requests already in flight at that moment fail, go uncounted and log a traceback each.
This storage (scheme ``probboard+redis://``) makes the switch itself, for every call: any
Redis error sends that call, and the following ones, to a per-process memory storage
(logged once per outage); every ``PROBE_S`` seconds one call tries Redis again and, when
it answers, counting goes back to Redis (logged once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from limits.storage import MemoryStorage, RedisStorage
from limits.storage.base import SlidingWindowCounterSupport, Storage

log = logging.getLogger(__name__)

SCHEME = "probboard+redis"
PROBE_S = 2.0
T = TypeVar("T")


class FailoverStorage(Storage, SlidingWindowCounterSupport):
    """Redis storage with a per-process memory fallback; see the module docstring."""

    STORAGE_SCHEME = [SCHEME, SCHEME.replace("redis", "rediss")]  # noqa: RUF012 - limits API

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self.redis = RedisStorage(uri.replace("probboard+", "", 1), **options)
        self.memory = MemoryStorage()
        self._down = False
        self._next_probe = 0.0
        self._lock = threading.Lock()

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """Nothing escapes: every Redis failure is answered from memory."""
        return ()

    @property
    def in_fallback(self) -> bool:
        """True while counting in memory."""
        return self._down

    def _call(self, redis_call: Callable[[], T], memory_call: Callable[[], T]) -> T:
        if self._down:
            now = time.monotonic()
            with self._lock:
                probe = now >= self._next_probe
                if probe:
                    self._next_probe = now + PROBE_S
            if not probe:
                return memory_call()
        try:
            result = redis_call()
        except Exception as exc:  # any failure of the Redis path: count in memory instead
            with self._lock:
                if not self._down:
                    log.warning(
                        "rate-limit storage unreachable (%s): counting in memory in this worker",
                        type(exc).__name__,
                    )
                    self._down = True
                self._next_probe = time.monotonic() + PROBE_S
            return memory_call()
        if self._down:
            with self._lock:
                if self._down:
                    log.info("rate-limit storage reachable again: counting in Redis")
                    self._down = False
        return result

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

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Count a hit in the sliding window unless over ``limit``."""
        return self._call(
            lambda: self.redis.acquire_sliding_window_entry(key, limit, expiry, amount),
            lambda: self.memory.acquire_sliding_window_entry(key, limit, expiry, amount),
        )

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """The previous and current window counts and their expiries."""
        return self._call(
            lambda: self.redis.get_sliding_window(key, expiry),
            lambda: self.memory.get_sliding_window(key, expiry),
        )

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Clear a sliding window in both storages."""
        self.memory.clear_sliding_window(key, expiry)
        self._call(lambda: self.redis.clear_sliding_window(key, expiry), lambda: None)
