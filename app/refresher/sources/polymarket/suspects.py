"""Upstream input that was not believed: counted always, logged at most once per kind per interval.

A hostile or broken upstream can send thousands of bad points or error frames a second. Each
is counted (``probboard_upstream_suspect_total{feed, kind}``, ``kind`` from a fixed
vocabulary so the series stay bounded) and the log gets one line per kind per
``LOG_EVERY_S``: the first detail seen, and how many more were dropped since the last line.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from app.metrics.refresher import UPSTREAM_SUSPECT
from app.refresher import clocks

log = logging.getLogger(__name__)

LOG_EVERY_S = 60.0
DETAIL_CHARS = 200

# The kinds of suspect input (metric labels: a fixed set).
KINDS = frozenset(
    {
        "error_frame",  # the upstream answered an error frame
        "future_stamp",  # a point stamped ahead of our clock by more than the skew allowed
        "old_stamp",  # a point stamped before the history kept (a stamp in seconds, say)
        "out_of_range",  # not a finite positive number, or outside what the market allows
        "jump",  # too far from what the same feed said a moment ago
        "disagrees",  # too far from another input (the spot, the price to beat)
        "wrong_market",  # an answer about another window, or with unusable tokens
        "junk_book",  # a book whose levels are all unreadable
        "failed",  # a request that failed, or whose answer could not be read at all
    }
)


class Suspects:
    """Counts and rate-limited log lines of one feed's suspect input."""

    def __init__(
        self,
        feed: str,
        every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = clocks.monotonic,
    ) -> None:
        self.feed = feed
        self._every_s = every_s
        self._clock = clock
        self._logged_at: dict[str, float] = {}
        self._dropped: dict[str, int] = {}
        self._lock = threading.Lock()

    def note(self, kind: str, detail: str) -> None:
        """Count one suspect input of ``kind`` (one of ``KINDS``); log it unless a line of
        the same kind was written less than ``every_s`` ago."""
        if kind not in KINDS:
            raise ValueError(f"unknown suspect kind {kind!r}")
        UPSTREAM_SUSPECT.labels(self.feed, kind).inc()
        now = self._clock()
        with self._lock:
            last = self._logged_at.get(kind)
            if last is not None and now - last < self._every_s:
                self._dropped[kind] = self._dropped.get(kind, 0) + 1
                return
            self._logged_at[kind] = now
            dropped = self._dropped.pop(kind, 0)
        more = f" ({dropped} more of this kind not logged)" if dropped else ""
        log.warning("%s: %s: %s%s", self.feed, kind, detail[:DETAIL_CHARS], more)
