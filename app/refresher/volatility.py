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

The settlement's own spread (``settlement_factors``): the block inflation above measures how
uncertain the 1-second variance is, but on a fat-tailed feed it counts each second's tails,
which the settlement's horizon averages out (on the settlement-feed stand-in and on real
exchange days the model's variance was about twice what scored best). So ``history`` also
replays the model on the feed's own past: pseudo-windows ending every ``PSEUDO_STEP_S``
seconds, for each TWAP settlement rule (``RULES``; a spot settlement keeps the inflation,
see there) and horizon (``FACTOR_HORIZONS``), the
settlement's standardised miss ``z`` (what it came to, less the model's centre, over the
model's spread without the inflation) and the standardised distance ``d`` of the centre from
the price to beat. The factor at a horizon is the variance multiplier ``k`` whose digital
answers ``Phi(d / sqrt(k))`` score the best log loss over every pair of a distance and a
miss seen (``k`` within ``FACTOR_RANGE``): the settlement's own horizon and rule judge it, and
on a Brownian path it is 1 (in a TWAP's last seconds, the discrete average's own variance,
which the continuous formula misses by up to a third). Under ``MIN_PSEUDO_S`` seconds of
pseudo-windows the block inflation stands; each horizon's factor is shrunk (in log) toward
the shorter horizon's (the first toward the inflation) as if ``PRIOR_SPANS`` spans of it had
said so. A 15-minute window's time left beyond them (``LONG_FACTOR_HORIZONS``) is measured
on 15-minute pseudo-windows, only when such windows are served (``history``'s ``windows``).
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from app.markets import SPANS, WINDOW_S
from app.refresher.model import (
    TWAP,
    continuation,
    horizon_ratio,
    normal_cdf,
    ratio_from_autocorrelations,
    remaining_variance,
)

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
# The settlement's own spread: the rules replayed (the lookbacks markets have used; another
# lookback takes the nearest), the horizons measured (seconds left; interpolated in log between
# them), a pseudo-window ending every PSEUDO_STEP_S seconds, the multipliers tried.
# Spot settlements keep the block inflation: replayed the same way on real exchange days
# (2026-03-14 to -18), their factor broke the tails (UP came 6.9 % where 2.5 % was said), for
# a spot settlement's last second carries it whole, and a regime the estimate lags moves the
# distance and the miss together, which pairing every distance with every miss cannot see.
RULES: tuple[tuple[str, int], ...] = ((TWAP, 30), (TWAP, 60))
FACTOR_HORIZONS = (5, 15, 30, 60, 120, 180, 290)
# A 15-minute window's time left beyond 290 s (issue 39) is measured on pseudo-windows of its
# own length, and only when a 15-minute window is served (``history``'s ``windows``), by the
# misses' mean square (``_variance_factor``). Its shorter horizons keep the 5-minute
# pseudo-windows: there a 15-minute window's price has wandered far from the price to beat,
# nearly every pseudo-window is decided by the sign of its distance, and the factor is not
# identified (on Brownian paths the 60 s TWAP's at 5 s left came out anywhere in 0.3-1.5).
# Not at 890 s either: 10 s into the window the distance is about 0 and so is what the
# factor changes; 600 s's holds beyond.
LONG_FACTOR_WINDOW_S = SPANS["15m"].seconds
LONG_FACTOR_HORIZONS = (420, 600)
PSEUDO_STEP_S = 10
FACTOR_RANGE = (0.3, 4.0)  # a factor outside this is a broken feed, not a market
FACTOR_TOLERANCE = 0.02  # in log: the factor to 2 %
DISTANCE_QUANTILES = 64  # the distances d each factor is scored on
MIN_PSEUDO_S = 3600  # fewer seconds of pseudo-windows (an hour): the block inflation
PRIOR_SPANS = 20.0  # a horizon's factor is shrunk toward the shorter one's by 20 spans' worth


def factor_history_s(window_s: int = WINDOW_S) -> int:
    """The history the factors of ``window_s``-second windows need before all are measured
    (``MIN_PSEUDO_S`` of the longest lookback's pseudo-windows of that length)."""
    return SIGMA_WINDOW_S + window_s + 60 + MIN_PSEUDO_S


FACTOR_HISTORY_S = factor_history_s()  # the 5-minute windows'


# Per settlement rule (rule, lookback): (horizon, variance factor) ascending.
Factors = tuple[tuple[tuple[str, int], tuple[tuple[int, float], ...]], ...]


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
    # ``settlement_factors``; empty: the block inflation at every horizon.
    factors: Factors = ()


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
    factors: Factors = field(default=(), repr=False)

    def factor(
        self, rule: str, lookback_s: int | None, tau_s: float, window_s: int = WINDOW_S
    ) -> float:
        """The variance factor at ``tau_s`` seconds left for a settlement of ``rule`` (and
        ``lookback_s``) in a ``window_s``-second window: measured on the settlement's own
        horizon and rule, else the block inflation."""
        return factor_at(self.factors, rule, lookback_s, tau_s, self.inflation, window_s)

    def spread(
        self, rule: str, lookback_s: int | None, tau_s: float, window_s: int = WINDOW_S
    ) -> tuple[float, float]:
        """(sigma, a jump's mean square size) for the model at ``tau_s`` left under ``rule``
        in a ``window_s``-second window: the diffusion and the jumps times the settlement's
        own factor."""
        # sigma and jump_var carry the inflation: the factor takes its place.
        share = self.factor(rule, lookback_s, tau_s, window_s) / self.inflation
        return self.sigma * math.sqrt(share), self.jump_var * share


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
    return _regime_of(slow, fast)


def _regime_of(slow: float, fast: float) -> float:
    """The regime's variance from the slow and the fast window's."""
    return fast if fast > slow * FAST_SIGNIFICANCE else slow


def _regimes(squares: Sequence[float]) -> list[float]:
    """``_regime_variance(squares, end)`` for every ``end`` from 0 to ``len(squares)``, by
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


def _best_factor(misses: list[float], distances: list[float]) -> float:
    """The multiplier ``k`` in ``FACTOR_RANGE`` whose answers ``Phi(d / sqrt(k))`` score the
    best log loss over every pair of a distance (``DISTANCE_QUANTILES`` quantiles of
    ``distances``) and a miss: UP comes when ``miss > -d``. Sorted misses make each distance
    one bisect; a golden-section search in log ``k`` (the loss has one minimum) finds it."""
    misses.sort()
    distances.sort()
    m, n = len(misses), len(distances)
    picked = [distances[int((i + 0.5) * n / DISTANCE_QUANTILES)] for i in range(DISTANCE_QUANTILES)]
    ups = [m - bisect.bisect_right(misses, -d) for d in picked]

    def loss(log_k: float) -> float:
        root, total = math.exp(0.5 * log_k), 0.0
        for d, up in zip(picked, ups, strict=True):
            p = min(1.0 - 1e-9, max(1e-9, normal_cdf(d / root)))
            total -= up * math.log(p) + (m - up) * math.log(1.0 - p)
        return total

    low, high = (math.log(bound) for bound in FACTOR_RANGE)
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = high - golden * (high - low), low + golden * (high - low)
    loss_a, loss_b = loss(a), loss(b)
    while high - low > FACTOR_TOLERANCE:
        if loss_a <= loss_b:
            high, b, loss_b = b, a, loss_a
            a = high - golden * (high - low)
            loss_a = loss(a)
        else:
            low, a, loss_a = a, b, loss_b
            b = low + golden * (high - low)
            loss_b = loss(b)
    return math.exp((low + high) / 2.0)


def _replay(
    grid: Sequence[float],
    prefix: Sequence[float],
    regimes: Sequence[float],
    jump_per_s: float,
    rho: Sequence[float],
    ratios: Sequence[tuple[int, float]],
    rule: str,
    lookback: int,
    window_s: int,
    horizons: Sequence[int],
) -> dict[int, tuple[list[float], list[float]]]:
    """Per horizon, (misses, distances) of the model replayed on ``window_s``-second
    pseudo-windows ending every ``PSEUDO_STEP_S`` (``prefix``: the running sums of ``grid``)."""
    n = len(grid)
    lb = float(lookback)  # the settlement: the mean of its last lookback seconds
    found: dict[int, tuple[list[float], list[float]]] = {h: ([], []) for h in horizons}
    seconds = {
        h: remaining_variance(1.0, h, rule, lb) * horizon_ratio(rho, h, ratios) for h in horizons
    }
    # The continuation is linear in the last return: its coefficient once per horizon.
    carried = {h: continuation(rho, 1.0, h, rule, lb) for h in horizons}
    for end in range(SIGMA_WINDOW_S + window_s + lookback, n, PSEUDO_STEP_S):
        start = end - window_s
        beat = (prefix[start + 1] - prefix[start + 1 - lookback]) / lookback
        first = end + 1 - lookback  # the first second the settlement averages
        settled = (prefix[end + 1] - prefix[first]) / lookback
        for h in horizons:
            t = end - h
            variance = (regimes[t] + jump_per_s) * seconds[h]
            if variance <= 0:
                continue
            centre = grid[t]
            if h < lookback:
                known = (prefix[t + 1] - prefix[first]) / (t + 1 - first)
                centre += (lookback - h) / lookback * (known - centre)
            centre += carried[h] * (grid[t] - grid[t - 1])
            root = math.sqrt(variance)
            misses, distances = found[h]
            misses.append((settled - centre) / root)
            distances.append((centre - beat) / root)
    return found


def _variance_factor(misses: list[float], distances: list[float]) -> float:
    """The mean square miss (within ``FACTOR_RANGE``): a long horizon's factor. There the
    settlement sums hundreds of seconds, so its miss is about Gaussian and its variance is
    what scores best; and the distances are small (the window has just begun), where pairing
    every distance with every miss came out 6-10 % low on Brownian paths (at 600 s left, 40
    paths of 4 h: 0.92 against a mean square of 1.02). ``distances`` are not needed."""
    del distances
    # One pseudo-window counts at most U_CAP: a single jump is in about 60 overlapping ones.
    square = math.fsum(min(U_CAP, z * z) for z in misses) / len(misses)
    return min(FACTOR_RANGE[1], max(FACTOR_RANGE[0], square))


def settlement_factors(
    grid: Sequence[float],
    regimes: Sequence[float],
    jump_per_s: float,
    rho: Sequence[float],
    ratios: Sequence[tuple[int, float]],
    prior: float,
    long: bool = False,
) -> Factors:
    """Per TWAP rule of ``RULES``, (horizon, variance factor) at ``FACTOR_HORIZONS`` (and with
    ``long`` at ``LONG_FACTOR_HORIZONS``, on ``LONG_FACTOR_WINDOW_S`` pseudo-windows): the model
    replayed on pseudo-windows of the history ``grid`` (log prices per second; ``regimes[t]``
    the diffusion's variance known at second ``t``, ``jump_per_s`` the jumps' variance per
    second), scored as the module says, shrunk toward ``prior``."""
    prefix = [0.0]
    for x in grid:
        prefix.append(prefix[-1] + x)
    passes: list[tuple[int, tuple[int, ...]]] = [(WINDOW_S, FACTOR_HORIZONS)]
    if long:
        passes.append((LONG_FACTOR_WINDOW_S, LONG_FACTOR_HORIZONS))
    found = []
    for rule, lookback in RULES:
        seen: dict[int, tuple[list[float], list[float]]] = {}
        for window_s, horizons in passes:
            seen.update(
                _replay(
                    grid,
                    prefix,
                    regimes,
                    jump_per_s,
                    rho,
                    ratios,
                    rule,
                    lookback,
                    window_s,
                    horizons,
                )
            )
        factors = []
        toward = prior
        for h, (misses, distances) in seen.items():
            seen_s = len(misses) * PSEUDO_STEP_S
            if seen_s < MIN_PSEUDO_S:
                factors.append((h, prior))
                continue
            # What a horizon's misses say is worth the lookbacks of it they hold, not their
            # count (they overlap); each is shrunk toward the shorter horizon's factor, which
            # is known better (a long horizon's pseudo-windows start near their price to
            # beat, where the factor hardly changes the score).
            lookbacks = seen_s / h
            score = _variance_factor if h in LONG_FACTOR_HORIZONS else _best_factor
            log_k = math.log(score(misses, distances))
            toward = math.exp(
                (lookbacks * log_k + PRIOR_SPANS * math.log(toward)) / (lookbacks + PRIOR_SPANS)
            )
            factors.append((h, toward))
        found.append(((rule, lookback), tuple(factors)))
    return tuple(found)


def factor_at(
    factors: Sequence[tuple[tuple[str, int], Sequence[tuple[int, float]]]],
    rule: str,
    lookback_s: int | None,
    tau_s: float,
    default: float,
    window_s: int = WINDOW_S,
) -> float:
    """The factor of ``rule`` (the nearest lookback of a TWAP) at ``tau_s`` in a
    ``window_s``-second window (its horizons: those shorter than it), interpolated in log
    horizon and log factor, held beyond the first and last horizon; ``default`` when there
    is none."""
    same = [(abs(lb - (lookback_s or 0)), points) for (r, lb), points in factors if r == rule]
    if not same:
        return default
    # A 5-minute window never reads the 15-minute windows' long horizons.
    points = [(h, k) for h, k in min(same, key=operator.itemgetter(0))[1] if h < window_s]
    if not points:
        return default
    if tau_s <= points[0][0]:
        return points[0][1]
    for (h0, k0), (h1, k1) in itertools.pairwise(points):
        if tau_s <= h1:
            share = math.log(tau_s / h0) / math.log(h1 / h0)
            return math.exp(math.log(k0) + share * (math.log(k1) - math.log(k0)))
    return points[-1][1]


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


def history(
    times_ms: Sequence[int],
    values: Sequence[float],
    factors: Factors | None = None,
    windows: Collection[int] = (WINDOW_S,),
) -> History:
    """The horizon scale, the jumps, the variance's inflation, the autocorrelations and the
    settlement factors over the whole history, for windows of ``windows`` seconds (those
    served: the long horizons cost a replay of their own); ``factors`` given are kept
    instead of measured again (they move over hours, and cost as much as the rest
    together)."""
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
    regimes = _regimes(diffusion)
    # Blocks start once a full SIGMA_WINDOW_S lies behind them (the estimate is then stable).
    prefix = [0.0]
    for r in returns:
        prefix.append(prefix[-1] + r * r)
    ratios = []
    for start in range(SIGMA_WINDOW_S, len(returns) - BLOCK_S + 1, BLOCK_S):
        predicted = (regimes[start] + rate * jump_var) * BLOCK_S
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
    if factors is None:
        long = LONG_FACTOR_WINDOW_S in windows
        factors = settlement_factors(grid, regimes, rate * jump_var, rho, horizons, inflation, long)
    return History(scale, history_s, rate, jump_var, inflation, rho, horizons, factors)


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
        factors=past.factors,
    )
