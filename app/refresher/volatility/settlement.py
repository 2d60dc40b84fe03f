"""The settlement's own spread: the model replayed on pseudo-windows of the feed's past, per
TWAP rule and horizon, and the variance factor that scores best (``app.refresher.volatility``
says why and how)."""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Collection, Sequence

from app.markets import SPANS
from app.refresher.model import TWAP, continuation, horizon_ratio, normal_cdf, remaining_variance
from app.refresher.volatility.regimes import U_CAP
from app.refresher.volatility.sigma import SIGMA_WINDOW_S

# The settlement's own spread: the rules replayed (the lookbacks markets have used; another
# lookback takes the nearest), the horizons measured (seconds left; interpolated in log between
# them), a pseudo-window ending every PSEUDO_STEP_S seconds, the multipliers tried.
# Spot settlements keep the block inflation: replayed the same way on real exchange days
# (2026-03-14 to -18), their factor broke the tails (UP came 6.9 % where 2.5 % was said), for
# a spot settlement's last second carries it whole, and a regime the estimate lags moves the
# distance and the miss together, which pairing every distance with every miss cannot see.
RULES: tuple[tuple[str, int], ...] = ((TWAP, 30), (TWAP, 60))
# The horizons are each window kind's own (``Span.factor_horizons``, app/markets.py): the
# shortest kind's are measured on pseudo-windows of its length for every kind.
SHORTEST = min(SPANS.values(), key=operator.attrgetter("seconds"))
FACTOR_HORIZONS = SHORTEST.factor_horizons
# A longer kind's time left beyond those (issue 39: a 15-minute window's beyond 290 s) is
# measured on pseudo-windows of its own length, only when that kind is served (``history``'s
# ``windows``), by the
# misses' mean square (``_variance_factor``). Its shorter horizons keep the 5-minute
# pseudo-windows: there a 15-minute window's price has wandered far from the price to beat,
# nearly every pseudo-window is decided by the sign of its distance, and the factor is not
# identified (on Brownian paths the 60 s TWAP's at 5 s left came out anywhere in 0.3-1.5).
# Not at 890 s either: 10 s into the window the distance is about 0 and so is what the
# factor changes; 600 s's holds beyond.
PSEUDO_STEP_S = 10
FACTOR_RANGE = (0.3, 4.0)  # a factor outside this is a broken feed, not a market
FACTOR_TOLERANCE = 0.02  # in log: the factor to 2 %
DISTANCE_QUANTILES = 64  # the distances d each factor is scored on
MIN_PSEUDO_S = 3600  # fewer seconds of pseudo-windows (an hour): the block inflation
PRIOR_SPANS = 20.0  # a horizon's factor is shrunk toward the shorter one's by 20 spans' worth


def factor_history_s(window_s: int) -> int:
    """The history the factors of ``window_s``-second windows need before all are measured
    (``MIN_PSEUDO_S`` of the longest lookback's pseudo-windows of that length)."""
    return SIGMA_WINDOW_S + window_s + 60 + MIN_PSEUDO_S


# Per settlement rule (rule, lookback): (horizon, variance factor) ascending.
Factors = tuple[tuple[tuple[str, int], tuple[tuple[int, float], ...]], ...]


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
    windows: Collection[int],
) -> Factors:
    """Per TWAP rule of ``RULES``, (horizon, variance factor) at ``FACTOR_HORIZONS`` (and at
    each longer kind's own horizons, on pseudo-windows of its length, when its length is in
    ``windows``, the kinds served): the model
    replayed on pseudo-windows of the history ``grid`` (log prices per second; ``regimes[t]``
    the diffusion's variance known at second ``t``, ``jump_per_s`` the jumps' variance per
    second), scored as the module says, shrunk toward ``prior``."""
    prefix = [0.0]
    for x in grid:
        prefix.append(prefix[-1] + x)
    passes = [(SHORTEST.seconds, FACTOR_HORIZONS)] + [
        (span.seconds, span.factor_horizons)
        for span in SPANS.values()
        if span is not SHORTEST and span.seconds in windows and span.factor_horizons
    ]
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
            score = _variance_factor if h > SHORTEST.seconds else _best_factor
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
    window_s: int,
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
