"""Valid-key checks on ``/api/keys/verify``, per account (``VERIFY_RATE_LIMIT``).

A failed key is the failed-key throttle's (``failures.py``, per address); this limit counts
the checks that succeeded, per account, so one account's keys cannot be verified in a loop
(each check is a store lookup and a last-use write). Counted in the shared sliding window
(Redis when it answers, the same storage as the accounts' ``/latest`` limits) under a key of
its own, ``probboard/account:<id>/verify``: a board read never spends a check, nor a check a
board read. Over it: the 429 with ``Retry-After`` and the ``X-RateLimit-*`` of the full
window, as an admitted check carries them. Cost on Redis: one round trip per limit in
``VERIFY_RATE_LIMIT`` per check (one with the default; a refusal stops at the full limit):
the hit is one script that also reports its window, and the stats read right after it take
that window instead of asking again (``fallback_storage``).
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse_many
from limits.storage import Storage

from app.errors import ApiError, too_many_requests
from app.limits.per_account import Quota
from app.limits.sliding import SlidingWindowCounter

SCOPE = "verify"


def too_many_checks(item: RateLimitItem, retry_after_ms: int, what: str = "key checks") -> ApiError:
    """The 429 for an account over its key checks (or over its ``what``)."""
    return too_many_requests(
        f"Too many {what} for this account ({item}); retry after the delay given.",
        retry_after_ms,
    )


class VerifyLimit:
    """Counts an account's calls of one kind under a counter of their own (``scope``): its
    valid-key checks (429 over ``VERIFY_RATE_LIMIT``), or its ``/api/alerts`` requests
    (``scope="alerts"``, over ``ALERTS_RATE_LIMIT``)."""

    def __init__(
        self,
        storage: Storage,
        limit: str,
        key_prefix: str,
        scope: str = SCOPE,
        what: str = "key checks",
    ) -> None:
        self._items: list[RateLimitItem] = sorted(parse_many(limit))
        self._strategy = SlidingWindowCounter(storage)
        self._prefix = key_prefix
        self._scope = scope  # the counter's own key: ``verify``, ``alerts``
        self._what = what

    def admit(self, account_id: int) -> Quota | None:
        """Count one call of the account: the tightest window for the headers (None without
        a limit); raises the 429 when any limit is full."""
        identifiers = (self._prefix, f"account:{account_id}", self._scope)
        shown: Quota | None = None
        for item in self._items:
            if not self._strategy.hit(item, *identifiers):
                stats = self._strategy.get_window_stats(item, *identifiers)
                retry_ms = max(1, math.ceil((stats.reset_time - time.time()) * 1000))
                refusal = too_many_checks(item, retry_ms, self._what)
                refusal.headers.update(Quota(item.amount, 0, stats.reset_time).headers())
                raise refusal
            stats = self._strategy.get_window_stats(item, *identifiers)
            if shown is None or stats.remaining < shown.remaining:
                shown = Quota(item.amount, stats.remaining, stats.reset_time)
        return shown
