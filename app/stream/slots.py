"""How many streams a key holds open, counted across every worker and machine (Redis).

Each stream holds a lease in a sorted set per key (member: connection id, score: lease end).
Opening one removes expired leases and adds a lease only if fewer than the maximum remain,
atomically in one script. The lease an open writes is short (``FIRST_LEASE_S``): an open
the caller gave up on (Redis hung, the command applied when it woke up) leaves a lease that
is already over, or soon is. Live streams renew their leases to ``LEASE_S`` right after they
open and then every few seconds; a closed stream removes its own; a worker killed outright
leaves leases that expire within ``LEASE_S``. So counts never leak. The set itself expires
``KEY_TTL_S`` after its last write (relative to Redis's own clock, so a late write can
never delete it). If Redis cannot be reached, each worker counts its own streams instead
(fail open: paying customers keep streaming through a Redis outage). A worker that is
merely busy (no pooled connection free in time) is not an outage: the open is refused
with ``SlotsBusyError`` and the client retries.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from app.redis_pool import DEFAULT_POOL_SIZE, PoolBusyError, RedisFallback, redis_client

LEASE_S = 15.0
FIRST_LEASE_S = 3.0
KEY_TTL_S = 2 * LEASE_S
KEY_PREFIX = "probboard:streams:"
PROBE_S = 1.0  # while Redis is away, one slot call a second tries it again

_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""


class SlotsBusyError(Exception):
    """The slot count could not be read in time because this worker is busy (not an outage)."""


class StreamSlots(Protocol):
    """Concurrent-stream accounting per key."""

    def acquire(self, key_id: int, conn_id: str, limit: int) -> bool:
        """Take a slot for ``conn_id`` unless ``key_id`` already holds ``limit`` streams."""

    def renew(self, leases: Iterable[tuple[int, str]]) -> bool:
        """Extend the leases of live streams; False when they could not be written."""

    def release(self, key_id: int, conn_id: str) -> None:
        """Give the slot back."""


class MemorySlots:
    """Per-process counting (the embedded mode, and the fallback when Redis is away)."""

    def __init__(self) -> None:
        self._held: defaultdict[int, set[str]] = defaultdict(set)
        self._lock = threading.Lock()

    def acquire(self, key_id: int, conn_id: str, limit: int) -> bool:
        """Take a slot if the key holds fewer than ``limit`` here."""
        with self._lock:
            held = self._held[key_id]
            if len(held) >= limit:
                return False
            held.add(conn_id)
            return True

    def renew(self, leases: Iterable[tuple[int, str]]) -> bool:
        """Nothing expires in memory."""
        return True

    def release(self, key_id: int, conn_id: str) -> None:
        """Give the slot back."""
        with self._lock:
            held = self._held.get(key_id)
            if held is not None:
                held.discard(conn_id)
                if not held:
                    del self._held[key_id]


class RedisSlots:
    """Leases in Redis, shared by every worker and machine; memory when Redis is away."""

    def __init__(self, url: str, pool_size: int = DEFAULT_POOL_SIZE) -> None:
        self._client = redis_client(url, timeout_s=1.0, size=pool_size)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._redis = RedisFallback("stream slots", "counting per worker", probe_s=PROBE_S)
        self._fallback = MemorySlots()
        self._in_fallback: set[str] = set()

    def acquire(self, key_id: int, conn_id: str, limit: int) -> bool:
        """Take a lease unless the key already holds ``limit`` live ones."""

        def in_redis() -> bool:
            now = time.time()
            taken = self._acquire(
                keys=[f"{KEY_PREFIX}{key_id}"],
                args=[now, now + FIRST_LEASE_S, limit, conn_id, int(KEY_TTL_S * 1000)],
            )
            return bool(taken)

        def here() -> bool:
            if self._fallback.acquire(key_id, conn_id, limit):
                self._in_fallback.add(conn_id)
                return True
            return False

        def busy(exc: PoolBusyError) -> bool:
            raise SlotsBusyError(str(exc)) from exc

        return self._redis.call(in_redis, here, on_busy=busy)

    def renew(self, leases: Iterable[tuple[int, str]]) -> bool:
        """Write the leases of live streams again (one pipeline for all); False on failure.

        Writing, not just extending, matters: after Redis restarts empty, or for streams
        admitted while it was away, this is what puts their leases (back) in Redis.
        """
        until = time.time() + LEASE_S
        pipe = self._client.pipeline(transaction=False)
        renewed = list(leases)
        for key_id, conn_id in renewed:
            pipe.zadd(f"{KEY_PREFIX}{key_id}", {conn_id: until})
            pipe.pexpire(f"{KEY_PREFIX}{key_id}", int(KEY_TTL_S * 1000))
        if not renewed:
            return True

        def written() -> bool:
            pipe.execute()
            return True

        if not self._redis.call(written, lambda: False, on_busy=lambda exc: False):
            return False  # tried again shortly (busy or away)
        for key_id, conn_id in renewed:
            if conn_id in self._in_fallback:  # counted in Redis from now on
                self._in_fallback.discard(conn_id)
                self._fallback.release(key_id, conn_id)
        return True

    def release(self, key_id: int, conn_id: str) -> None:
        """Remove the lease (or the fallback slot)."""
        if conn_id in self._in_fallback:
            self._in_fallback.discard(conn_id)
            self._fallback.release(key_id, conn_id)
            # Its open may have reached Redis after all (applied when a hung server woke):
            # remove that lease too rather than wait for it to lapse.
        # Away or busy: the lease expires by itself.
        self._redis.call(
            lambda: self._client.zrem(f"{KEY_PREFIX}{key_id}", conn_id),
            lambda: 0,
            on_busy=lambda exc: 0,
        )
