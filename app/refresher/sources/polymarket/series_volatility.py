"""One price series' volatility estimate and what it keeps between estimates (for
``PriceSeries.volatility``): the estimate until a point arrives, what the whole history says
(scale, jumps, inflation) measured at most every ``SCALE_EVERY_S`` (at once when the history
has grown a lot: a snapshot has just arrived), the settlement factors every
``FACTORS_EVERY_S``, and the estimate's grid of seconds.

Nothing measured while a history snapshot is half merged is kept (``partial``): a row built
while the feed's thread merges a snapshot point by point would otherwise keep a scale of
part of it for a minute, and the tape's replay, which handles the frame whole between two
rows, would disagree.
"""

from __future__ import annotations

import bisect
import math
import threading

from app.refresher import clocks, volatility

SCALE_EVERY_S = 60.0  # the scale is about hours of data: recomputing it once a minute is plenty
# The settlement factors (volatility.settlement_factors) move over hours and cost as much as
# the rest of the history: measured again every 5 minutes (at once when a snapshot arrives
# after a start whose history was too short for them).
FACTORS_EVERY_S = 300.0


class SeriesVolatility:
    """See the module docstring; the series calls ``cached``, ``points`` under its lock and
    ``measure`` outside it."""

    def __init__(self, windows: tuple[int, ...]) -> None:
        # The window lengths served (seconds; the shortest kind's horizons are measured
        # whatever is served): the settlement factors' horizons reach the longest's, and its
        # factors need the longest history.
        self._windows = windows
        measured = (volatility.SHORTEST.seconds, *windows)
        self._factor_history_s = max(volatility.factor_history_s(w) for w in measured)
        self._version = -1
        self._estimate: volatility.Volatility | None = None
        self._history = volatility.History()
        self._grid = volatility.SecondGrid()  # the estimate's grid, only new seconds computed
        self._scale_at = -math.inf
        self._scale_points = 0  # how many points the scale was measured on
        self._factors_at = -math.inf

    def cached(self, version: int) -> tuple[bool, volatility.Volatility | None]:
        """(whether the estimate kept is that of the series' ``version``, the estimate)."""
        return self._version == version, self._estimate

    def points(
        self, times: list[int], values: list[float]
    ) -> tuple[bool, bool, list[int], list[float]]:
        """(whether the whole history is measured again, whether it has grown a lot, the
        points to measure on: all of them then, else the last ``SIGMA_WINDOW_S`` seconds and
        the point in force before them), read from the series' own lists under its lock."""
        grown = len(times) > 2 * self._scale_points + 60
        again = grown or clocks.monotonic() - self._scale_at >= SCALE_EVERY_S
        if again:
            return True, grown, list(times), list(values)
        newest = times[-1] if times else 0
        edge = newest - (volatility.SIGMA_WINDOW_S + 2) * 1000
        start = max(0, bisect.bisect_left(times, edge) - 1)
        return False, grown, times[start:], values[start:]

    def measure(
        self,
        whole: tuple[bool, bool, list[int], list[float]],
        version: int,
        partial: bool,
        lock: threading.Lock,
    ) -> volatility.Volatility | None:
        """The estimate on ``points``'s answer ``whole``, kept as the one of ``version``
        (under the series' ``lock``) unless ``partial``."""
        again, grown, times, values = whole
        history = self._history
        if again:
            now = clocks.monotonic()
            # A snapshot that has just arrived makes them worth measuring at once only if
            # the last ones rested on too short a history to be measured at all.
            short = self._history.history_s < self._factor_history_s
            factors = (grown and short) or now - self._factors_at >= FACTORS_EVERY_S
            kept = None if factors else self._history.factors
            history = volatility.history(times, values, self._windows, kept)
            if not partial:
                self._history = history
                self._scale_at, self._scale_points = now, len(times)
                if factors:
                    self._factors_at = now
        estimate = volatility.estimate(times, values, history, self._grid)
        if not partial:
            with lock:
                self._estimate, self._version = estimate, version
        return estimate
