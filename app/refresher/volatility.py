"""The spot's volatility per sqrt-second, and the horizon scale measured on the feed itself.

``sigma_1s`` is the realised volatility of the last ``SIGMA_WINDOW_S`` seconds of 1-second log
returns (on a 1-second grid, the price in force at each whole second, so a point that arrives
late or out of order is simply part of the grid next time).

Whether 1-second variance, times the seconds left, is the variance over a 5-minute horizon
depends on how the returns are autocorrelated (microstructure, the oracle's update rule). So
the scale is measured: the ratio of the realised variance of overlapping ``HORIZON_S`` returns
(per second) to that of 1-second returns, over the whole history kept (hours). With little
history that ratio is noise, so it is shrunk toward 1 as if ``PRIOR_HORIZONS`` intervals of
ratio 1 had been seen: ``scale = (m * ratio + k) / (m + k)``, ``m`` the history's length in
horizons. On a Brownian path the true scale is exactly 1.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

SIGMA_WINDOW_S = 900  # the last 15 minutes of 1-second returns
MIN_RETURNS = 60  # fewer than this: no estimate (the board shows no probability)
HORIZON_S = 300
PRIOR_HORIZONS = 24.0  # two hours' worth of belief that the scale is 1
SCALE_BOUNDS = (0.25, 4.0)  # a measured ratio outside this is a broken feed, not a market


@dataclass(frozen=True)
class Volatility:
    """One estimate: what the model uses and what it rests on."""

    sigma: float  # per sqrt-second, scaled: sigma_1s * sqrt(scale)
    sigma_1s: float
    scale: float  # variance scale applied to sigma_1s
    returns: int  # 1-second returns behind sigma_1s
    history_s: int  # seconds of history behind the scale


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
    n = len(times_ms)
    for second in range(start_s, last_s + 1):
        edge = second * 1000
        while i + 1 < n and times_ms[i + 1] <= edge:
            i += 1
        grid.append(math.log(values[i]))
    return grid


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
    grid = second_grid(times_ms, values, times_ms[0] // 1000)
    short_total, short_count = _mean_square(grid, 1)
    long_total, long_count = _mean_square(grid, HORIZON_S)
    history_s = len(grid)
    if not short_count or not long_count or short_total <= 0:
        return 1.0, history_s
    ratio = (long_total / (long_count * HORIZON_S)) / (short_total / short_count)
    m = history_s / HORIZON_S
    scale = (m * ratio + PRIOR_HORIZONS) / (m + PRIOR_HORIZONS)
    return min(SCALE_BOUNDS[1], max(SCALE_BOUNDS[0], scale)), history_s


def estimate(
    times_ms: Sequence[int], values: Sequence[float], scale: tuple[float, int]
) -> Volatility | None:
    """The estimate from the spot's points and a scale from ``horizon_scale``; None while
    there are fewer than ``MIN_RETURNS`` returns."""
    sigma_1s, returns = sigma_one_second(times_ms, values)
    if returns < MIN_RETURNS or not math.isfinite(sigma_1s):
        return None
    factor, history_s = scale
    return Volatility(
        sigma=sigma_1s * math.sqrt(factor),
        sigma_1s=sigma_1s,
        scale=factor,
        returns=returns,
        history_s=history_s,
    )
