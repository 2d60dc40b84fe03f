"""Failed key attempts per client address (``AUTH_FAILURE_LIMIT``), at no cost to good keys.

The address is what ``app.limits.addresses`` counts: an IPv4 address, an IPv6 one's /64.

A request that presents a key and is answered 401 counts one failure, in the shared
sliding-window storage (Redis when it answers). When a failure finds the address at its
limit, this worker blocks the address until the window has room again: from then on every
request from it that presents a key, good or bad, gets 429 at once. Good keys must be
refused too, or a blocked guesser would still learn which key is right.

Only failures reach the storage; a request with a good key costs a lookup in this
worker's (usually empty) table of blocked addresses and no round trip. Another worker
learns of a block at its own first failure from that address, which a guesser, whose
attempts are nearly all failures, meets at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time

from limits import RateLimitItem, parse_many
from limits.storage import Storage

from app.errors import ApiError, too_many_requests
from app.limits.sliding import SlidingWindowCounter

log = logging.getLogger(__name__)

SCOPE = "auth-failures"


def too_many_failures(retry_after_ms: int) -> ApiError:
    """The 429 for an address over its failed-attempt limit."""
    return too_many_requests(
        "Too many failed key attempts from this address; retry after the delay given.",
        retry_after_ms,
    )


class FailureThrottle:
    """Counts failed key attempts per address and blocks an address over its limit."""

    def __init__(self, storage: Storage, limit: str, key_prefix: str) -> None:
        self._items: list[RateLimitItem] = sorted(parse_many(limit))
        self._strategy = SlidingWindowCounter(storage)
        self._prefix = key_prefix
        self._limit_text = limit
        self._blocked: dict[str, float] = {}  # address -> time.time() the block ends
        self._lock = threading.Lock()

    @property
    def blocking(self) -> bool:
        """True when this worker blocks any address (ended blocks linger until checked)."""
        return bool(self._blocked)

    def check(self, address: str) -> None:
        """Raise the 429 when ``address`` is blocked in this worker."""
        if not self._blocked:
            return
        with self._lock:
            until = self._blocked.get(address)
            if until is None:
                return
            left = until - time.time()
            if left <= 0:
                del self._blocked[address]
                return
        raise too_many_failures(math.ceil(left * 1000))

    def failed(self, address: str) -> ApiError | None:
        """Count a failed attempt from ``address``; the 429 to answer instead when it was
        already over the limit (the address is then blocked here too)."""
        identifiers = (self._prefix, SCOPE, address)
        refused = False
        full_until: float | None = None
        for item in self._items:
            counted = self._strategy.hit(item, *identifiers)
            stats = self._strategy.get_window_stats(item, *identifiers)
            refused = refused or not counted
            if not counted or stats.remaining <= 0:
                full_until = max(full_until or 0.0, stats.reset_time)
        if full_until is None:
            return None
        with self._lock:
            self._blocked[address] = full_until
            self._forget_ended()
        log.info("failed key attempts from %s exceeded %s", address, self._limit_text)
        if not refused:
            return None  # the attempt that reached the limit is answered as it was
        return too_many_failures(max(1, math.ceil((full_until - time.time()) * 1000)))

    def _forget_ended(self) -> None:
        now = time.time()
        for address in [a for a, until in self._blocked.items() if until <= now]:
            del self._blocked[address]
