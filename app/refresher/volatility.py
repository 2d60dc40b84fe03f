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

Real 1-second returns are not Gaussian (docs/model.md): they come with jumps, and their size
comes in regimes. So the history also gives, once a minute (``history``):

- jumps: a 1-second return larger than ``JUMP_SIGMAS`` times the volatility of the
  ``SIGMA_WINDOW_S`` before it is a jump; their rate per second and mean square size are the
  jump part of the model (compound Poisson), and they are left out of the diffusion's
  variance;
- the vol of vol: over blocks of ``BLOCK_S`` seconds, the realised variance against what
  the estimate at the block's start predicted. Its dispersion beyond what sampling alone gives
  on a Brownian path (``2 / BLOCK_S``) is how uncertain the variance is; the variance used is
  inflated by it (``inflation``, at most ``INFLATION_CAP``). On a Brownian path the jump rate
  is nearly 0 and the inflation 1: the model is the plain digital option again.

The diffusion's variance follows the regime: that of the last ``SIGMA_WINDOW_S`` seconds, or
of the last ``FAST_WINDOW_S`` when it is clearly higher, jumps left out, so it rises within a
minute of a jumpy spell and falls back when it ends.

The settlement feed is smoothed (docs/model.md): its 1-second returns are autocorrelated
(+0.2 to +0.3 at lag 1 on real days), so the variance per second grows with the horizon and
the last seconds' move continues. ``history`` measures the autocorrelation of the 1-second
returns at lags 1 to ``LAGS`` on the feed itself (the last ``RHO_WINDOW_S``), each kept only
beyond ``RHO_ERRORS`` of its own (heteroskedasticity-robust) standard error, so a Brownian
path's are 0 and the model is the exact one there. From them the model takes the variance over
the time left up to ``LAGS`` seconds and the expected continuation of the last return
(``app.refresher.model``); beyond, the variance ratio measured at ``LONG_HORIZONS``.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

from app.refresher.model import ratio_from_autocorrelations

SIGMA_WINDOW_S = 900  # the last 15 minutes of 1-second returns
MIN_RETURNS = 60  # fewer than this: no estimate (the board shows no probability)
HORIZON_S = 300
PRIOR_HORIZONS = 24.0  # two hours' worth of belief that the scale is 1
SCALE_BOUNDS = (0.25, 4.0)  # a measured ratio outside this is a broken feed, not a market
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
LAGS = 30  # autocorrelations measured: the real feed's fade within 30 s
RHO_WINDOW_S = 7200  # over the last 2 hours of returns (the cost is lags x returns)
# Beyond the lags, the variance ratio is measured at these horizons directly (shrunk toward 1
# as the 5-minute scale is): an exchange's feed has no short autocorrelation to see, yet
# its 5-minute variance is 1.2-1.5 times its 1-second one (docs/model.md).
LONG_HORIZONS = (60, 120, 300)
# One is kept (as measured) beyond this many standard errors, else it is chance: 0. With 30
# lags a Brownian path keeps one by chance about once in 500 estimates.
RHO_ERRORS = 4.0


@dataclass(frozen=True)
class History:
    """What the whole history says (recomputed about once a minute)."""

    scale: float = 1.0  # variance scale of the 5-minute horizon against 1-second returns
    history_s: int = 0  # seconds of history behind it
    jump_rate: float = 0.0  # jumps per second
    jump_var: float = 0.0  # mean square log size of a jump
    inflation: float = 1.0  # variance inflation for the variance's own uncertainty
    # Autocorrelations of 1-second returns at lags 1..LAGS (0 where not significant).
    rho: tuple[float, ...] = ()
    # (horizon, its variance ratio to 1-second returns, shrunk) beyond the lags' reach.
    ratios: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Volatility:
    """One estimate: what the model uses and what it rests on."""

    sigma: float  # 1-second diffusion, per sqrt-second: sqrt(regime variance * inflation)
    sigma_1s: float  # plain realised volatility of the last SIGMA_WINDOW_S, jumps included
    scale: float  # the 5-minute against 1-second variance ratio measured (a check: the model
    # scales by the autocorrelations, ``model.horizon_ratio``)
    returns: int  # 1-second returns behind sigma_1s
    history_s: int  # seconds of history behind the scale
    jump_rate: float = 0.0  # jumps per second
    jump_var: float = 0.0  # a jump's mean square log size, scaled as the diffusion is
    inflation: float = 1.0
    rho: tuple[float, ...] = ()  # the history's autocorrelations (``History.rho``)
    ratios: tuple[tuple[int, float], ...] = ()  # ``History.ratios``
    last_return: float = 0.0  # the last 1-second log return: what may continue


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
    return _scale_of(second_grid(times_ms, values, times_ms[0] // 1000))


def _scale_of(
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


def _returns(grid: Sequence[float]) -> list[float]:
    return [grid[k] - grid[k - 1] for k in range(1, len(grid))]


def _jumps(returns: Sequence[float]) -> list[bool]:
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


def _regime_variance(squares: Sequence[float], end: int) -> float:
    """The diffusion's variance per second at ``end`` (exclusive): the mean of the last
    ``SIGMA_WINDOW_S`` squares (jumps already zeroed), or of the last ``FAST_WINDOW_S`` when
    that is higher beyond its own sampling noise (a jumpy spell, not chance)."""
    slow_n = min(end, SIGMA_WINDOW_S)
    fast_n = min(end, FAST_WINDOW_S)
    if slow_n <= 0:
        return 0.0
    slow = math.fsum(squares[end - slow_n : end]) / slow_n
    fast = math.fsum(squares[end - fast_n : end]) / fast_n
    return fast if fast > slow * FAST_SIGNIFICANCE else slow


def autocorrelations(returns: Sequence[float], lags: int = LAGS) -> tuple[float, ...]:
    """The autocorrelation of ``returns`` at lags 1..``lags``, each set to 0 unless it is
    beyond ``RHO_ERRORS`` standard errors. The error is White's (robust to fat tails and to
    volatility that comes in spells): ``sqrt(sum (r_t r_t+k)^2) / sum r_t^2``."""
    total = math.fsum(r * r for r in returns)
    if total <= 0 or len(returns) <= 2 * lags:
        return ()
    found = []
    for lag in range(1, lags + 1):
        # map(mul) keeps the passes in C: about 50 ms a minute per market here.
        products = list(map(operator.mul, returns, returns[lag:]))
        rho = math.fsum(products) / total
        error = math.sqrt(math.fsum(map(operator.mul, products, products))) / total
        found.append(rho if abs(rho) > RHO_ERRORS * error else 0.0)
    return tuple(found)


def history(times_ms: Sequence[int], values: Sequence[float]) -> History:
    """The horizon scale, the jumps, the variance's inflation and the autocorrelations over
    the whole history."""
    if not times_ms:
        return History()
    grid = second_grid(times_ms, values, times_ms[0] // 1000)
    scale, history_s = _scale_of(grid)
    returns = _returns(grid)
    flags = _jumps(returns)
    jumps = [r * r for r, jump in zip(returns, flags, strict=True) if jump]
    rate = len(jumps) / len(returns) if returns else 0.0
    jump_var = math.fsum(jumps) / len(jumps) if jumps else 0.0
    diffusion = [0.0 if jump else r * r for r, jump in zip(returns, flags, strict=True)]
    # Blocks start once a full SIGMA_WINDOW_S lies behind them (the estimate is then stable).
    prefix = [0.0]
    for r in returns:
        prefix.append(prefix[-1] + r * r)
    ratios = []
    for start in range(SIGMA_WINDOW_S, len(returns) - BLOCK_S + 1, BLOCK_S):
        predicted = (_regime_variance(diffusion, start) + rate * jump_var) * BLOCK_S
        if predicted > 0:
            ratios.append(min(U_CAP, (prefix[start + BLOCK_S] - prefix[start]) / predicted))
    inflation = 1.0
    if len(ratios) >= 2:
        mean = math.fsum(ratios) / len(ratios)
        spread = math.fsum((u - mean) ** 2 for u in ratios) / (len(ratios) - 1)
        excess = max(0.0, spread - 2.0 / BLOCK_S)  # beyond a Brownian block's own sampling
        m = len(ratios)
        inflation = min(INFLATION_CAP, 1.0 + m * excess / (m + PRIOR_BLOCKS))
    rho = autocorrelations(returns[-RHO_WINDOW_S:])
    # Each long horizon's ratio is shrunk toward what the autocorrelations alone imply (1 on a
    # Brownian path), not toward 1: a smoothed or a noisy feed's short structure is known well.
    horizons = tuple(
        (h, _scale_of(grid, h, ratio_from_autocorrelations(rho, h))[0]) for h in LONG_HORIZONS
    )
    return History(scale, history_s, rate, jump_var, inflation, rho, horizons)


def estimate(times_ms: Sequence[int], values: Sequence[float], past: History) -> Volatility | None:
    """The estimate from the spot's points and what ``history`` found; None while there are
    fewer than ``MIN_RETURNS`` returns."""
    if not times_ms:
        return None
    start = times_ms[-1] // 1000 - SIGMA_WINDOW_S
    returns = _returns(second_grid(times_ms, values, start))
    n = len(returns)
    if n < MIN_RETURNS:
        return None
    squares = [r * r for r in returns]
    total = math.fsum(squares)
    sigma_1s = math.sqrt(total / n)
    if not math.isfinite(sigma_1s):
        return None
    limit = JUMP_SIGMAS * JUMP_SIGMAS * total / n
    diffusion = [0.0 if q > limit else q for q in squares]
    # The horizon's scale is the model's, from the autocorrelations (``model.horizon_ratio``):
    # sigma here is the 1-second diffusion, inflated for its own uncertainty.
    factor = past.inflation
    return Volatility(
        sigma=math.sqrt(_regime_variance(diffusion, n) * factor),
        sigma_1s=sigma_1s,
        scale=past.scale,
        returns=n,
        history_s=past.history_s,
        jump_rate=past.jump_rate,
        jump_var=past.jump_var * factor,
        inflation=past.inflation,
        rho=past.rho,
        ratios=past.ratios,
        last_return=returns[-1],
    )
