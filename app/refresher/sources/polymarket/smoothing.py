"""How the Chainlink spot smooths the exchange price, learnt live (issue 48, point 3).

Chainlink's stream is an aggregate: a move shows on the exchange at once and on the spot over
the next seconds, a share of it at once and the rest as an average catches up. So the spot is
taken as the exchange's path, part direct and part through an exponential average of the
seconds before (``decay`` per second)::

    log S(t) = basis + d log E(t) + (1 - d) (1 - r) sum_{k >= 1} r^(k - 1) log E(t - k)

whose mean lag is ``(1 - d) / (1 - r)`` seconds. It is fitted on 1-second log returns (the
same equation differenced), over the last ``ROWS`` pairs of believed spot points a second
apart: for each decay of ``DECAYS`` the two weights by least squares, the decay whose fit
leaves the least unexplained; the weights are then scaled to sum to one (a level the
exchange holds, the spot reaches: noise on the exchange shrinks both alike). An average has
a tail a fixed trail cannot hold: after a 1 % move into a feed that averages over seconds,
tens of basis points are still to come 3 s later.

A spot point is compared with the exchange's path so smoothed, not with its newest price:
honest fast moves agree, while a value the smoothed path is not at (a frozen spot once the
exchange has moved, a lie inside a move) does not. Until ``MIN_ROWS`` pairs are fitted, or
when the fit finds no link (the exchange's returns explain too little of the spot's, an
adjusted R squared under ``MIN_FIT``, or the weights sum to less than ``MIN_GAIN``), there is
no smoothing and the witness falls back to its fixed trail (``witness.TRAIL_MS``). A wrong
fit is bounded anyway: weights of at least zero summing to one give a value within the
exchange's prices of the last ``HORIZON`` seconds.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

HORIZON = 60  # seconds of the exchange's past an average reaches (0.95^60: 5 % left)
DECAYS = (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # per second
ROWS = 600  # the pairs of seconds the weights are fitted on (10 minutes at 1 Hz)
MIN_ROWS = 40  # pairs fitted before the smoothing is used (its error on a 0.3 % move: ~3 bp)
REFIT_EVERY = 20  # new pairs between two fits
# The raw weights sum to less than this: no link. Noise in the exchange's returns shrinks
# them alike (the fakes': 0.3 bp a quarter against 0.75 bp a second, about x 0.75).
MIN_GAIN = 0.3
# The fit explains less than this share of the spot's returns (adjusted for the three numbers
# fitted: an unrelated walk scores about 0, and above 0.2 on 40 rows about once in 30).
MIN_FIT = 0.2
FITTED = 3  # numbers a fit chooses: the two weights and the decay


@dataclass(frozen=True)
class Smoothing:
    """A fitted smoothing: ``direct`` of the exchange's move at once, the rest through an
    average decaying by ``decay`` a second."""

    direct: float
    decay: float

    @property
    def mean_lag_s(self) -> float:
        """Seconds a move takes to show, on average."""
        return (1 - self.direct) / (1 - self.decay)

    def smoothed(self, exchange_logs: tuple[float, ...]) -> float:
        """The exchange's path as the spot shows it: ``exchange_logs`` are its log prices at
        the point's stamp and each second before, newest first (the average's weights over
        those it has, scaled to sum to one)."""
        past = _average(exchange_logs[1:], self.decay)
        if past is None:
            return exchange_logs[0]
        return self.direct * exchange_logs[0] + (1 - self.direct) * past


class SmoothingKernel:
    """Learns the spot's ``Smoothing`` from pairs of believed seconds (not thread-safe: the
    witness that owns it locks)."""

    def __init__(self, min_rows: int = MIN_ROWS) -> None:
        self._min_rows = min_rows  # pairs fitted before the smoothing is used
        # (spot return, exchange return of the second, its average before for each decay)
        self._rows: collections.deque[tuple[float, float, tuple[float, ...]]] = collections.deque(
            maxlen=ROWS
        )
        self._since_fit = 0
        self.fitted: Smoothing | None = None  # None: not learnt

    def learn(self, spot_return: float, exchange_returns: tuple[float, ...]) -> None:
        """One pair of believed spot seconds: the spot's log return and the exchange's of the
        same second and those before, newest first (at least two; ``HORIZON`` used)."""
        if len(exchange_returns) < 2 or not all(map(math.isfinite, exchange_returns)):
            return
        before = exchange_returns[1:HORIZON]
        averages = tuple(_average(before, decay) or 0.0 for decay in DECAYS)
        self._rows.append((spot_return, exchange_returns[0], averages))
        self._since_fit += 1
        if len(self._rows) >= self._min_rows and (
            self.fitted is None or self._since_fit >= REFIT_EVERY
        ):
            self._since_fit = 0
            self.fitted = _fit(self._rows)

    @property
    def mean_lag_s(self) -> float | None:
        """The fitted smoothing's mean lag in seconds (None before it is learnt)."""
        return self.fitted.mean_lag_s if self.fitted else None


def _average(values: tuple[float, ...], decay: float) -> float | None:
    """The exponential average of ``values`` (newest first) decaying by ``decay`` a step,
    its weights scaled to sum to one over those given; None for none."""
    if not values:
        return None
    weight, total, weights = 1.0, 0.0, 0.0
    for value in values:
        total += weight * value
        weights += weight
        weight *= decay
        if weight < 1e-6:
            break
    return total / weights


def _fit(rows: collections.deque[tuple[float, float, tuple[float, ...]]]) -> Smoothing | None:
    """The decay whose two least-squares weights explain the spot's returns best, the weights
    clipped at zero and scaled to sum to one; None without a link (``MIN_FIT``, ``MIN_GAIN``)."""
    total = math.fsum(y * y for y, _, _ in rows)
    n = len(rows)
    if total <= 0.0 or n <= FITTED:
        return None
    best: tuple[float, float, float, float] | None = None  # (residual, direct, rest, decay)
    for index, decay in enumerate(DECAYS):
        sxx = syy = sxy = sx = sy = 0.0  # x: the second's return, y: the average before
        for spot, now, averages in rows:
            before = averages[index]
            sxx += now * now
            syy += before * before
            sxy += now * before
            sx += now * spot
            sy += before * spot
        det = sxx * syy - sxy * sxy
        if det <= 1e-12 * max(sxx * syy, 1e-300):
            continue
        direct = (sx * syy - sy * sxy) / det
        rest = (sy * sxx - sx * sxy) / det
        residual = total - direct * sx - rest * sy  # least squares: y'y - w'X'y
        if best is None or residual < best[0]:
            best = (residual, direct, rest, decay)
    if best is None or 1 - (best[0] / (n - FITTED)) / (total / n) < MIN_FIT:
        return None
    _, direct, rest, decay = best
    direct, rest = max(0.0, direct), max(0.0, rest)
    if direct + rest < MIN_GAIN:
        return None
    return Smoothing(direct / (direct + rest), decay)
