"""The sliding-window-counter strategy every limit here counts with, its reset time mended.

The ``limits`` library reports when a window has room again as the current counter's time
to live modulo the window. A counter is made with two windows to live, so right after the
hit that creates it (reported by that same hit, with no time gone) the modulo is 0 and the
window "ends now": a window that its first hit fills, such as one failed key a day, was
reported as over at once, and the failed-key throttle then blocked nobody. Here that window
ends one window later, when the counter becomes the previous one.
"""

from __future__ import annotations

import time
from math import floor, inf
from typing import cast

from limits import RateLimitItem
from limits.storage import SlidingWindowCounterSupport
from limits.strategies import SlidingWindowCounterRateLimiter
from limits.util import WindowStats


class SlidingWindowCounter(SlidingWindowCounterRateLimiter):
    """The library's sliding window counter, with a window that its first hit fills ending
    one window after that hit rather than at once."""

    def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats:
        """When the window has room again, and how much room it has now."""
        storage = cast(SlidingWindowCounterSupport, self.storage)
        window = storage.get_sliding_window(item.key_for(*identifiers), item.get_expiry())
        return window_stats(item, *window)


def window_stats(
    item: RateLimitItem,
    previous_count: int,
    previous_expires_in: float,
    current_count: int,
    current_expires_in: float,
) -> WindowStats:
    """The reset time and remaining room of ``item`` from its two counters (as
    ``get_sliding_window`` reports them), as the library computes them but for a counter
    with exactly two windows to live, whose window ends in one window, not now."""
    expiry = item.get_expiry()
    weighted = previous_count * previous_expires_in / expiry + current_count
    remaining = max(0, item.amount - floor(weighted))
    now = time.time()
    previous_reset_in = current_reset_in = inf
    if previous_count:
        step = expiry / previous_count  # the previous counter frees a slot every step
        previous_reset_in = previous_expires_in % step or step
    if current_count:
        current_reset_in = current_expires_in % expiry or expiry
    if previous_reset_in == current_reset_in == inf:
        return WindowStats(now, remaining)
    return WindowStats(now + min(previous_reset_in, current_reset_in), remaining)
