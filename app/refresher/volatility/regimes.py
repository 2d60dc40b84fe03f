"""Jumps, the regime's variance (the slow window, or the fast one in a jumpy spell) and the
block inflation for the variance's own uncertainty (``app.refresher.volatility``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.refresher.volatility.sigma import MIN_RETURNS, SIGMA_WINDOW_S

FAST_WINDOW_S = 120  # the regime's short memory: a jumpy minute raises sigma at once
# The short window wins when it is four of its standard errors above the long one: on a
# Brownian path that is rare chance (the backtest test saw three errors win once in 2 h), so
# the model stays the exact one there.
FAST_SIGNIFICANCE = 1.0 + 4.0 * math.sqrt(2.0 / FAST_WINDOW_S)
JUMP_SIGMAS = 4.0  # a 1-second return beyond this many sigmas is a jump
BLOCK_S = 60  # blocks over which the variance's own uncertainty is measured
U_CAP = 10.0  # one block's variance ratio counts at most this much (a single outlier)
INFLATION_CAP = 3.0
PRIOR_BLOCKS = 10.0  # with few blocks, the inflation is shrunk toward 1


def jump_flags(returns: Sequence[float]) -> list[bool]:
    """Which returns are jumps: beyond ``JUMP_SIGMAS`` times the volatility of the
    ``SIGMA_WINDOW_S`` returns before each (once ``MIN_RETURNS`` are there)."""
    flags = [False] * len(returns)
    window_sum = 0.0
    limit = JUMP_SIGMAS * JUMP_SIGMAS
    for k, r in enumerate(returns):
        if k >= MIN_RETURNS:
            before = window_sum / min(k, SIGMA_WINDOW_S)
            flags[k] = before > 0 and r * r > limit * before
        window_sum += r * r
        if k >= SIGMA_WINDOW_S:
            window_sum -= returns[k - SIGMA_WINDOW_S] ** 2
    return flags


def regime_variance(squares: Sequence[float], end: int) -> float:
    """The diffusion's variance per second at ``end`` (exclusive): the mean of the last
    ``SIGMA_WINDOW_S`` squares (jumps already zeroed), or of the last ``FAST_WINDOW_S`` when
    that is higher beyond its own sampling noise (a jumpy spell, not chance)."""
    slow_n = min(end, SIGMA_WINDOW_S)
    fast_n = min(end, FAST_WINDOW_S)
    if slow_n <= 0:
        return 0.0
    slow = math.fsum(squares[end - slow_n : end]) / slow_n
    fast = math.fsum(squares[end - fast_n : end]) / fast_n
    return _regime_of(slow, fast)


def _regime_of(slow: float, fast: float) -> float:
    """The regime's variance from the slow and the fast window's."""
    return fast if fast > slow * FAST_SIGNIFICANCE else slow


def regime_variances(squares: Sequence[float]) -> list[float]:
    """``regime_variance(squares, end)`` for every ``end`` from 0 to ``len(squares)``, by
    running sums (the replay needs it at every second)."""
    prefix = [0.0]
    for q in squares:
        prefix.append(prefix[-1] + q)
    found = [0.0]
    for end in range(1, len(squares) + 1):
        slow_n, fast_n = min(end, SIGMA_WINDOW_S), min(end, FAST_WINDOW_S)
        slow = (prefix[end] - prefix[end - slow_n]) / slow_n
        fast = (prefix[end] - prefix[end - fast_n]) / fast_n
        found.append(_regime_of(slow, fast))
    return found


def block_inflation(returns: Sequence[float], regimes: Sequence[float], jump_per_s: float) -> float:
    """The variance's inflation for its own uncertainty (at most ``INFLATION_CAP``): over
    blocks of ``BLOCK_S`` seconds, the dispersion of the realised variance against what the
    estimate at the block's start predicted (``regimes[t]``, the diffusion's variance known
    at second ``t``, plus ``jump_per_s``), beyond what sampling alone gives on a Brownian
    path, shrunk toward 1 by ``PRIOR_BLOCKS``."""
    # Blocks start once a full SIGMA_WINDOW_S lies behind them (the estimate is then stable).
    prefix = [0.0]
    for r in returns:
        prefix.append(prefix[-1] + r * r)
    ratios = []
    for start in range(SIGMA_WINDOW_S, len(returns) - BLOCK_S + 1, BLOCK_S):
        predicted = (regimes[start] + jump_per_s) * BLOCK_S
        if predicted > 0:
            ratios.append(min(U_CAP, (prefix[start + BLOCK_S] - prefix[start]) / predicted))
    inflation = 1.0
    if len(ratios) >= 2:
        mean = math.fsum(ratios) / len(ratios)
        spread = math.fsum((u - mean) ** 2 for u in ratios) / (len(ratios) - 1)
        excess = max(0.0, spread - 2.0 / BLOCK_S)  # beyond a Brownian block's own sampling
        m = len(ratios)
        inflation = min(INFLATION_CAP, 1.0 + m * excess / (m + PRIOR_BLOCKS))
    return inflation
