"""The variance over hours ahead, from 1-minute closes (issue 49, point 3).

Over minutes, the last quarter hour's 1-second returns say how much the price will move. Over
one to four hours they do not: the variance follows the time of day (the US open, the
Asian and European mornings, the hour's turn) and drifts back from a burst to its usual
level. So the variance of the log price over the next ``tau`` seconds is read from a longer
history of 1-minute closes (Binance's 1-minute klines: the last day or more):

- **the profile**: the mean square 1-minute log return at each minute of the UTC day, over
  every day of the history, smoothed over ``SMOOTH_MIN`` minutes on each side (one day gives
  ``2 * SMOOTH_MIN + 1`` returns per minute; the noise of a mean of ``n`` squares is
  ``sqrt(2 / n)``), floored at a fraction of the day's mean (a quiet minute is never
  certain);
- **the regime**: the realised variance of the last ``REGIME_MIN`` minutes against what
  the profile expected for them, shrunk toward 1 by ``REGIME_PRIOR_MIN`` minutes' worth;
- **ahead**: the profile summed over the minutes still to come (the current minute by its
  part), each times the regime decaying back to 1 with half-life ``REGIME_HALF_LIFE_S``.

Pure functions of their inputs; the live source keeps the closes up to date and calls them
once a minute, the benches call them on recorded days.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

MINUTE_S = 60
DAY_MIN = 1440
SMOOTH_MIN = 15  # each minute's profile: the mean over it and 15 minutes on each side
PROFILE_FLOOR = 0.2  # of the day's mean: no minute of the day is taken as still
# The regime: the last quarter hour against its profile, not shrunk, fading back by half each
# hour. Chosen on the fit days (2026-03-13 and -14, four coins, 2,304 checkpoints, bench/
# hourly_real.py with --history-days 1) among 15, 30 and 60 minutes, shrinkage by 0, 15 and 60
# minutes and half-lives of 1 and 4 hours: log loss 0.2955 here, 0.3011 at an hour shrunk by
# an hour (the first guess); the last 15 minutes of 1-second returns alone scored 0.2963.
REGIME_MIN = 15
REGIME_PRIOR_MIN = 0.0
REGIME_HALF_LIFE_S = 3600.0
MIN_HISTORY_MIN = 12 * 60  # less than half a day of closes: no profile


@dataclass(frozen=True)
class LongHorizon:
    """What the 1-minute history says: the per-minute-of-day variance (log return squared
    per minute) and the regime now."""

    profile: tuple[float, ...]  # DAY_MIN entries, minute 0 = 00:00 UTC
    regime: float  # the last REGIME_MIN minutes against the profile, shrunk toward 1
    minutes: int  # 1-minute returns behind the profile

    def variance_ahead(self, now: float, tau_s: float) -> float:
        """The variance of the log price over ``tau_s`` seconds from ``now`` (unix s)."""
        if tau_s <= 0:
            return 0.0
        total = 0.0
        t, end = now, now + tau_s
        while t < end:
            minute = math.floor(t / MINUTE_S)
            step = min(end, (minute + 1) * MINUTE_S) - t
            fade = 0.5 ** ((t - now) / REGIME_HALF_LIFE_S)
            scale = 1.0 + (self.regime - 1.0) * fade
            total += self.profile[minute % DAY_MIN] * scale * step / MINUTE_S
            t += step
        return total

    def sigma_ahead(self, now: float, tau_s: float) -> float:
        """The variance ahead as a sigma per square-root second (the model's ``sigma``
        over ``tau_s``); 0 when no time is left."""
        return math.sqrt(self.variance_ahead(now, tau_s) / tau_s) if tau_s > 0 else 0.0


def minute_returns(closes: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(minute start, log return over that minute) for consecutive 1-minute closes
    ``(minute start s, close)`` in time order; a gap's return is left out (it is not one
    minute's)."""
    found = []
    for (t0, c0), (t1, c1) in itertools.pairwise(closes):
        if t1 - t0 == MINUTE_S and c0 > 0 and c1 > 0:
            found.append((t1, math.log(c1 / c0)))
    return found


def long_horizon(closes: Sequence[tuple[int, float]]) -> LongHorizon | None:
    """The profile and the regime from 1-minute closes ``(minute start s, close)`` in time
    order; None with less than ``MIN_HISTORY_MIN`` returns."""
    returns = minute_returns(closes)
    if len(returns) < MIN_HISTORY_MIN:
        return None
    sums, counts = [0.0] * DAY_MIN, [0] * DAY_MIN
    for t, r in returns:
        m = (t // MINUTE_S) % DAY_MIN
        sums[m] += r * r
        counts[m] += 1
    day_mean = math.fsum(sums) / len(returns)
    profile = []
    for m in range(DAY_MIN):
        near = [(m + k) % DAY_MIN for k in range(-SMOOTH_MIN, SMOOTH_MIN + 1)]
        n = sum(counts[i] for i in near)
        mean = math.fsum(sums[i] for i in near) / n if n else day_mean
        profile.append(max(mean, PROFILE_FLOOR * day_mean))
    recent = returns[-REGIME_MIN:]
    seen = math.fsum(r * r for _, r in recent)
    expected = math.fsum(profile[(t // MINUTE_S) % DAY_MIN] for t, _ in recent)
    ratio = seen / expected if expected > 0 else 1.0
    n = len(recent)
    regime = (n * ratio + REGIME_PRIOR_MIN) / (n + REGIME_PRIOR_MIN)
    return LongHorizon(tuple(profile), regime, len(returns))
