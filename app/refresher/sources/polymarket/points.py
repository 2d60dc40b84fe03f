"""The believed points of one topic, in time order: the store a ``PriceSeries`` judges into.

It knows nothing of how a point is judged (``price_series.py``): it keeps what was believed,
answers the questions the row, the price to beat and the witnesses ask of it (the newest
point, the points around an instant, means over a span, whether a span is covered), and
keeps two facts about the feed itself: the spans a reconnect may have missed (until a
history snapshot or the next point closes them), and how late the newest points arrived
after their stamps (their information's age, ``information_ms``).
"""

from __future__ import annotations

import bisect
import collections
import math
import threading
import time
from collections.abc import Callable

# A series never holds more points than this (4 h of the spot at 1 Hz is 14,400): a flood of
# points (a huge history frame) drops the oldest, so memory is bounded by points, not time.
MAX_POINTS = 20_000
# A price's age counts from its own stamp plus the feed's normal arrival lag, measured live
# (the median of the last LAG_SAMPLES newest points' lags, each to when RTDS sent it where
# its message says so, else to our receipt) but never more than this: real
# Chainlink points arrive 1.3-1.6 s after their stamp, p95 about 2 s. A feed later than this
# is as old as its information: a steady 9 s lag makes the row stale at the stale threshold.
MAX_NORMAL_LAG_MS = 2_000
LAG_SAMPLES = 31
SENT_KEPT = 128  # send stamps remembered (points waiting for a witness: MAX_PENDING, 64)
MEAN_GAP_MS = 3_000  # a mean the TWAP witness compares covers its span with no longer gap
MAX_GAP_MS = 3000  # consecutive Chainlink points (about 1 Hz) further apart: a hole
GAPS_KEPT = 8  # spans a reconnect may have missed, remembered at most


def newest_in_second(times_ms: list[int], values: list[float], second: int) -> float | None:
    """Of points in time order, the value of the newest stamped within whole ``second``."""
    i = bisect.bisect_right(times_ms, second * 1000 + 999)
    return values[i - 1] if i and times_ms[i - 1] >= second * 1000 else None


class Points:
    """Believed points of one topic, in time order, and the spans the feed may have missed."""

    def __init__(self, history_s: int, clock: Callable[[], float] = time.time) -> None:
        self._times: list[int] = []
        self._values: list[float] = []
        self._history_ms = history_s * 1000
        self._clock = clock  # the source's wall clock (tape time in a replay)
        # When (on ``clock``) the NEWEST point was received (-inf: none yet), and how late
        # the recent newest points arrived after their stamps (ms): the feed's normal lag.
        self.received_at = -math.inf
        self._lags_ms: collections.deque[int] = collections.deque(maxlen=LAG_SAMPLES)
        # Stamp -> when the upstream sent the point (its message's own ``timestamp``), for
        # the last points offered live: their lag is the upstream's, not our own delay.
        self._sent_ms: dict[int, int] = {}
        # The stamp of the first believed point carrying the newest value, and whether it is
        # frozen (the judge saw the world move since): then as old as that first point.
        self._same_since = 0
        self._frozen = False
        self._version = 0
        # Spans the feed may have missed (a reconnect): [last point before, first after or
        # None]; a history snapshot that spans one repairs it.
        self._gaps: list[tuple[int, int | None]] = []
        self._lock = threading.Lock()

    def connection_lost(self) -> None:
        """The feed reconnected: points after the newest one may have been missed."""
        with self._lock:
            if self._times:
                self._gaps = [*self._gaps[1 - GAPS_KEPT :], (self._times[-1], None)]

    def _repair(self, first_ms: int, last_ms: int) -> None:
        """A history snapshot from ``first_ms`` to ``last_ms`` arrived: the spans it covers
        are no longer missed."""
        with self._lock:
            self._gaps = [
                (start, end)
                for start, end in self._gaps
                if not (first_ms <= start and last_ms >= (start if end is None else end))
            ]

    def has_gap(self, start_ms: int, end_ms: int) -> bool:
        """True when a span the feed may have missed meets (start, end)."""
        with self._lock:
            return any(
                start < end_ms and (end is None or end > start_ms) for start, end in self._gaps
            )

    @property
    def version(self) -> int:
        """Grows with every point taken in."""
        return self._version

    def add(self, ts_ms: int, value: float) -> None:
        """Merge a believed point in time order (a duplicate timestamp keeps the first value;
        past ``MAX_POINTS`` the oldest go)."""
        with self._lock:
            self._add(ts_ms, value)

    def note_sent(self, ts_ms: int, sent_ms: int) -> None:
        """The upstream sent the point stamped ``ts_ms`` at ``sent_ms`` (its live message's
        own stamp): once believed, its lag counts to then, not to our receipt (the lower of
        the two). The last ``SENT_KEPT`` are remembered."""
        with self._lock:
            self._sent_ms[ts_ms] = sent_ms
            if len(self._sent_ms) > SENT_KEPT:
                del self._sent_ms[next(iter(self._sent_ms))]

    def _add(self, ts_ms: int, value: float) -> None:
        """``add`` (the caller holds the lock)."""
        # The first point after a reconnect closes its span.
        self._gaps = [
            (start, ts_ms if end is None and ts_ms > start else end) for start, end in self._gaps
        ]
        i = bisect.bisect_left(self._times, ts_ms)
        if i < len(self._times) and self._times[i] == ts_ms:
            return
        if self._times and ts_ms < self._times[-1] - self._history_ms:
            return  # older than the history kept
        newest = i == len(self._times)
        if newest and not (self._values and self._values[-1] == value):
            self._same_since, self._frozen = ts_ms, False  # a new value: not frozen
        self._times.insert(i, ts_ms)
        self._values.insert(i, value)
        if newest:
            self.received_at = self._clock()
            lag_ms = int(self.received_at * 1000) - ts_ms
            sent_ms = self._sent_ms.get(ts_ms)
            # Our own delay (a busy refresher, a point waiting for its witness) is no lag of
            # the feed's: forgiving it would show an older price as fresh.
            self._lags_ms.append(lag_ms if sent_ms is None else min(lag_ms, sent_ms - ts_ms))
        self._version += 1
        cut = bisect.bisect_left(self._times, self._times[-1] - self._history_ms)
        cut = max(cut, len(self._times) - MAX_POINTS)
        if cut:
            del self._times[:cut], self._values[:cut]

    def nearest(self, ts_ms: int) -> tuple[int, float] | None:
        """The believed point nearest in time to ``ts_ms``."""
        with self._lock:
            return self._nearest(ts_ms)

    def _nearest(self, ts_ms: int) -> tuple[int, float] | None:
        """The believed point nearest in time to ``ts_ms`` (the caller holds the lock)."""
        i = bisect.bisect_left(self._times, ts_ms)
        candidates = [j for j in (i - 1, i) if 0 <= j < len(self._times)]
        if not candidates:
            return None
        j = min(candidates, key=lambda k: abs(self._times[k] - ts_ms))
        return self._times[j], self._values[j]

    def latest(self) -> tuple[int, float] | None:
        """The newest (ts_ms, value)."""
        with self._lock:
            return (self._times[-1], self._values[-1]) if self._times else None

    def at(self, ts_ms: int, tolerance_ms: int) -> float | None:
        """The value in force at ``ts_ms``: the last point at or before it, else the first after
        it, within ``tolerance_ms``."""
        with self._lock:
            i = bisect.bisect_right(self._times, ts_ms)
            if i and ts_ms - self._times[i - 1] <= tolerance_ms:
                return self._values[i - 1]
            if i < len(self._times) and self._times[i] - ts_ms <= tolerance_ms:
                return self._values[i]
            return None

    def in_second(self, second: int) -> float | None:
        """The value of the newest point stamped within whole second ``second``."""
        with self._lock:
            return newest_in_second(self._times, self._values, second)

    def around(self, ts_ms: int) -> tuple[tuple[int, float] | None, tuple[int, float] | None]:
        """(the last point at or before ``ts_ms``, the first point after it)."""
        with self._lock:
            i = bisect.bisect_right(self._times, ts_ms)
            before = (self._times[i - 1], self._values[i - 1]) if i else None
            after = (self._times[i], self._values[i]) if i < len(self._times) else None
            return before, after

    def covered(self, start_ms: int, end_ms: int, max_gap_ms: int) -> bool:
        """True when the points leave no gap longer than ``max_gap_ms`` from ``start_ms`` up to a
        point at or after ``end_ms`` (so no point in between can still be missing), and no
        reconnect left a span unrepaired there."""
        if self.has_gap(start_ms - max_gap_ms, end_ms):
            return False
        with self._lock:
            i = bisect.bisect_right(self._times, start_ms - max_gap_ms)
            if i == len(self._times) or self._times[i] > start_ms + max_gap_ms:
                return False
            previous = self._times[i]
            for t in self._times[i:]:
                if t - previous > max_gap_ms:
                    return False
                if t >= end_ms:
                    return True
                previous = t
            return False

    def mean(self, after_ms: int, until_ms: int) -> float | None:
        """The mean of the points with ``after_ms < ts <= until_ms`` (None when there are none)."""
        with self._lock:
            i = bisect.bisect_right(self._times, after_ms)
            j = bisect.bisect_right(self._times, until_ms)
            if j <= i:
                return None
            return math.fsum(self._values[i:j]) / (j - i)

    def covered_mean(self, after_ms: int, until_ms: int) -> float | None:
        """The mean over the whole seconds of (after, until] of each second's price (its last
        believed point at or before ``until``, a second without one carrying the last
        before, as the settlement's own average does); None when a second has no point
        within ``MEAN_GAP_MS`` before it."""
        found = self.mean_and_carry(after_ms, until_ms)
        return None if found is None else found[0]

    def mean_and_carry(self, after_ms: int, until_ms: int) -> tuple[float, float] | None:
        """``covered_mean`` and how uncertain the carried seconds make it, in 1-second
        volatilities: ``sum sqrt(k) / N`` over the seconds carried from a point ``k`` seconds
        before them (0 when every second has its own point). A settlement feed leaves about
        2 % of its seconds without a point: the true mean differs from ours by about that."""
        first_s, last_s = after_ms // 1000 + 1, until_ms // 1000
        if last_s < first_s:
            return None
        with self._lock:
            i = bisect.bisect_left(self._times, first_s * 1000 - MEAN_GAP_MS)
            j = bisect.bisect_right(self._times, until_ms)
            points = list(zip(self._times[i:j], self._values[i:j], strict=True))
        by_second: dict[int, tuple[int, float]] = {}
        for ts_ms, value in points:  # in time order: the last of each second stays
            by_second[ts_ms // 1000] = (ts_ms, value)
        before = [p for p in points if p[0] < first_s * 1000]
        carried = before[-1] if before else None
        total = carry = 0.0
        for second in range(first_s, last_s + 1):
            carried = by_second.get(second, carried)
            if carried is None or second * 1000 - carried[0] > MEAN_GAP_MS:
                return None
            total += carried[1]
            carry += math.sqrt(second - carried[0] // 1000)
        count = last_s - first_s + 1
        return total / count, carry / count

    def frozen_since_ms(self) -> int | None:
        """The stamp of the first point carrying the newest value, when that value is frozen
        (repeated while the witness moved); None otherwise."""
        with self._lock:
            return self._same_since if self._frozen and self._times else None

    def information_ms(self, stamp_ms: int | None = None) -> int | None:
        """When the newest point's information (or that of the point stamped ``stamp_ms``,
        the one a row shows) was true, for its age: its own stamp plus the
        feed's normal arrival lag (the median of the recent newest points' lags, at most
        ``MAX_NORMAL_LAG_MS``), never later than its receipt on our clock (a stamp from the
        future cannot keep a row fresh). None before the first point.

        A feed that stamps and sends its points 9 s late is 9 s old however freshly each point
        arrives: only the lag a healthy feed shows is forgiven. A value repeated while the
        witness moved is frozen: as old as the first point that carried it."""
        with self._lock:
            if not self._times:
                return None
            lags = sorted(self._lags_ms)
            normal = min(max(0, lags[len(lags) // 2]), MAX_NORMAL_LAG_MS) if lags else 0
            stamp = self._times[-1] if stamp_ms is None else min(stamp_ms, self._times[-1])
            if self._frozen:
                stamp = min(stamp, self._same_since)
            return min(int(self.received_at * 1000), stamp + normal)
