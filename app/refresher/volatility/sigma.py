"""The 1-second grid of log prices, sigma over its last ``SIGMA_WINDOW_S`` and the measured
scale of a longer horizon against it (``app.refresher.volatility`` tells the whole story)."""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Sequence

SIGMA_WINDOW_S = 900  # the last 15 minutes of 1-second returns
MIN_RETURNS = 60  # fewer than this: no estimate (the board shows no probability)
HORIZON_S = 300
PRIOR_HORIZONS = 24.0  # two hours' worth of belief that the scale is 1
SCALE_BOUNDS = (0.25, 4.0)  # a measured ratio outside this is a broken feed, not a market


def second_grid(times_ms: Sequence[int], values: Sequence[float], start_s: int) -> list[float]:
    """Log prices in force at each whole second from ``start_s`` to the last point's second
    (points in time order; seconds before the first point are skipped)."""
    if not times_ms:
        return []
    last_s = times_ms[-1] // 1000
    i = bisect.bisect_right(times_ms, start_s * 1000) - 1
    if i < 0:
        start_s = -(-times_ms[0] // 1000)  # the first whole second at or after the first point
        i = bisect.bisect_right(times_ms, start_s * 1000) - 1
    grid: list[float] = []
    _extend(grid, times_ms, values, i, start_s, last_s)
    return grid


def _extend(
    grid: list[float],
    times_ms: Sequence[int],
    values: Sequence[float],
    i: int,
    first_s: int,
    last_s: int,
) -> None:
    """Append to ``grid`` the log prices in force at each second from ``first_s`` to
    ``last_s``, ``i`` the index of the point in force at ``first_s``."""
    n = len(times_ms)
    for second in range(first_s, last_s + 1):
        edge = second * 1000
        while i + 1 < n and times_ms[i + 1] <= edge:
            i += 1
        grid.append(math.log(values[i]))


class SecondGrid:
    """``second_grid`` for one growing series, remembering its last grid: when the new points
    up to the last call's newest are exactly the points the last grid rested on (from the
    one in force at the new start), that grid's seconds are reused and only the newer
    seconds computed. The same list of numbers as ``second_grid`` (the same logs of the same
    points); anything else (a point inserted late, a start moved back) is computed whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: list[int] = []  # the points the grid rests on (the first in force)
        self._values: list[float] = []
        self._start_s = 0
        self._grid: list[float] = []

    def __call__(
        self, times_ms: Sequence[int], values: Sequence[float], start_s: int
    ) -> list[float]:
        """``second_grid(times_ms, values, start_s)``."""
        if not times_ms:
            return []
        i = bisect.bisect_right(times_ms, start_s * 1000) - 1
        if i < 0:  # as second_grid: from the first whole second at or after the first point
            start_s = -(-times_ms[0] // 1000)
            i = bisect.bisect_right(times_ms, start_s * 1000) - 1
        last_s = times_ms[-1] // 1000
        with self._lock:
            grid = self._reused(times_ms, values, i, start_s)
            if grid is None:
                grid = []
                _extend(grid, times_ms, values, i, start_s, last_s)
            else:
                known_s = self._times[-1] // 1000  # the last second the old grid holds
                k = bisect.bisect_right(times_ms, self._times[-1]) - 1
                _extend(grid, times_ms, values, k, known_s + 1, last_s)
            self._times, self._values = list(times_ms[i:]), list(values[i:])
            self._start_s, self._grid = start_s, grid
            return list(grid)

    def _reused(
        self, times_ms: Sequence[int], values: Sequence[float], i: int, start_s: int
    ) -> list[float] | None:
        """The old grid's seconds from ``start_s`` on, when they hold for the new points."""
        old_times = self._times
        if not old_times:
            return None
        newest = old_times[-1]
        if not self._start_s <= start_s <= newest // 1000:
            return None
        k = bisect.bisect_right(times_ms, newest)  # the new points up to the old newest
        j = len(old_times) - (k - i)  # where the new point in force at start_s must be
        if k <= i or j < 0:
            return None
        # Points later than the old newest only reach seconds after its own.
        if old_times[j:] != list(times_ms[i:k]) or self._values[j:] != list(values[i:k]):
            return None
        return self._grid[start_s - self._start_s :]


def _mean_square(grid: Sequence[float], lag: int) -> tuple[float, int]:
    total, count = 0.0, 0
    for k in range(lag, len(grid)):
        change = grid[k] - grid[k - lag]
        total += change * change
        count += 1
    return total, count


def sigma_one_second(times_ms: Sequence[int], values: Sequence[float]) -> tuple[float, int]:
    """(sigma per sqrt-second over the last ``SIGMA_WINDOW_S``, how many returns)."""
    if not times_ms:
        return 0.0, 0
    start = times_ms[-1] // 1000 - SIGMA_WINDOW_S
    total, count = _mean_square(second_grid(times_ms, values, start), 1)
    return (math.sqrt(total / count) if count else 0.0), count


def horizon_scale(times_ms: Sequence[int], values: Sequence[float]) -> tuple[float, int]:
    """(the shrunk variance scale for ``HORIZON_S``, seconds of history it rests on)."""
    if not times_ms:
        return 1.0, 0
    return scale_of(second_grid(times_ms, values, times_ms[0] // 1000))


def scale_of(
    grid: Sequence[float], horizon_s: int = HORIZON_S, prior: float = 1.0
) -> tuple[float, int]:
    """(the variance ratio at ``horizon_s``, shrunk toward ``prior`` by ``PRIOR_HORIZONS``
    5-minute intervals' worth, within ``SCALE_BOUNDS``; the grid's seconds). The prior is in
    seconds, the same at every horizon: a shorter horizon has more intervals in the same
    history, but they overlap in what they say (and on a short history the 60 s ratio was
    noise enough to move a Brownian board's P(up) by 3 points)."""
    short_total, short_count = _mean_square(grid, 1)
    long_total, long_count = _mean_square(grid, horizon_s)
    history_s = len(grid)
    if not short_count or not long_count or short_total <= 0:
        return prior, history_s
    ratio = (long_total / (long_count * horizon_s)) / (short_total / short_count)
    prior_s = PRIOR_HORIZONS * HORIZON_S
    scale = (history_s * ratio + prior_s * prior) / (history_s + prior_s)
    return min(SCALE_BOUNDS[1], max(SCALE_BOUNDS[0], scale)), history_s


def one_second_returns(grid: Sequence[float]) -> list[float]:
    """The 1-second log returns of ``grid``."""
    return [grid[k] - grid[k - 1] for k in range(1, len(grid))]
