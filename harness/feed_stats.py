"""The settlement feed's statistics, measured as they were on the real days.

The real figures (../shared/upstream.md, "The feed is SMOOTHED") were measured per day on a
per-second grid with the last value carried forward: a second with no point repeats the
last one. ``day_figures`` measures a day of a path the same way, ``TARGETS`` holds the
measured ranges, and ``harness.settlement_feed``'s command line prints one against the other.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

BP = 1e4
HORIZONS = (2, 5, 10, 30, 60, 300)  # seconds, for the variance ratios

# name -> (low, high) as measured on the two real days (a one-sided target has inf).
TARGETS: dict[str, tuple[float, float]] = {
    "acf1": (0.21, 0.31),
    "acf2": (0.10, 0.13),
    "acf3": (0.04, 0.07),
    "slope_1s_next5": (0.40, 0.59),
    "corr_1s_next5": (0.15, 0.20),
    "slope_5s_next5": (0.11, 0.15),
    "corr_30s_next30": (-0.10, 0.10),  # "nothing much beyond 30 s": our reading, not measured
    "vr2": (1.21, 1.31),
    "vr5": (1.50, 1.73),
    "vr10": (1.67, 1.98),
    "vr30": (1.89, 2.12),
    "vr60": (2.05, 2.19),
    "vr300": (1.88, 2.38),
    "kurtosis": (36.0, 68.0),
    "still_share": (0.04, 0.12),
    "sd_bp": (0.35, 0.67),
    "minute_2_4": (1.2, 1.4),  # "1.3x the median second"
    "lag_median_s": (1.3, 1.6),
    "lag_p95_s": (1.8, 2.2),  # "about 2 s"
    "missing_share": (0.015, 0.025),  # "about 2 %"
    "gaps_over_3s": (70.0, 130.0),  # "about 100 a day"
}


def carried(logs: Sequence[float], present: Sequence[bool]) -> list[float]:
    """The grid as received: a second with no point carries the last value forward."""
    out: list[float] = []
    last = logs[0]
    for value, seen in zip(logs, present, strict=True):
        if seen:
            last = value
        out.append(last)
    return out


def _slope_corr(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / sxx, sxy / math.sqrt(sxx * syy)


def _ahead(grid: Sequence[float], back: int, ahead: int) -> tuple[list[float], list[float]]:
    """The return over the last ``back`` seconds and over the next ``ahead``, each second."""
    span = range(back, len(grid) - ahead)
    past = [(grid[t] - grid[t - back]) * BP for t in span]
    future = [(grid[t + ahead] - grid[t]) * BP for t in span]
    return past, future


def day_figures(grid: Sequence[float], start_s: int) -> dict[str, float]:
    """The return statistics of one day's grid (log prices, one a second from ``start_s``)."""
    r = [(b - a) * BP for a, b in itertools.pairwise(grid)]
    n = len(r)
    mean = statistics.fmean(r)
    d = [x - mean for x in r]
    m2 = statistics.fmean([x * x for x in d])
    out = {f"acf{k}": sum(d[i] * d[i + k] for i in range(n - k)) / (n - k) / m2 for k in (1, 2, 3)}
    out["slope_1s_next5"], out["corr_1s_next5"] = _slope_corr(*_ahead(grid, 1, 5))
    out["slope_5s_next5"], _ = _slope_corr(*_ahead(grid, 5, 5))
    _, out["corr_30s_next30"] = _slope_corr(*_ahead(grid, 30, 30))
    rv1 = statistics.fmean([x * x for x in r])
    for h in HORIZONS:  # overlapping h-second returns, realised (no mean taken out)
        rv = statistics.fmean([((grid[t + h] - grid[t]) * BP) ** 2 for t in range(len(grid) - h)])
        out[f"vr{h}"] = rv / h / rv1
    out["kurtosis"] = statistics.fmean([x**4 for x in d]) / m2**2
    out["still_share"] = sum(1 for x in r if x == 0.0) / n
    out["sd_bp"] = math.sqrt(m2)
    by_second = [0.0] * 60
    for i, x in enumerate(r):  # r[i] ends at second start_s + i + 1
        by_second[(start_s + i + 1) % 60] += abs(x)
    out["minute_2_4"] = statistics.fmean(by_second[2:5]) / statistics.median(by_second)
    return out


def arrival_figures(lags: Sequence[float | None]) -> dict[str, float]:
    """The relay's statistics of one day: lag median and p95, missing share, gaps."""
    seen = sorted(lag for lag in lags if lag is not None)
    gaps = run = 0
    for lag in lags:
        run = run + 1 if lag is None else 0
        gaps += run == 3  # a run of 3 missing seconds: more than 3 s between two points
    return {
        "lag_median_s": statistics.median(seen),
        "lag_p95_s": seen[int(0.95 * (len(seen) - 1))],
        "missing_share": 1 - len(seen) / len(lags),
        "gaps_over_3s": float(gaps),
    }
