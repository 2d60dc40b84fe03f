"""Witnesses of a window's price to beat: what the settlement stream's own points allow.

No single upstream is believed alone (issue 35, point 3). Whatever gives a price to beat (the
site, Gamma, a TWAP report), the Chainlink spot on RTDS, the settlement stream's own points,
is its witness (docs/price-to-beat.md):

- A spot window: the value in force at T0 lies on a Brownian bridge between the believed
  points on both sides of T0 (the same point, when one is stamped at T0). Its spread is
  ``sigma * sqrt((T0 - a) * (b - T0) / (b - a))`` for points at ``a`` and ``b``: at most
  ``sigma * sqrt(hole / 4)``, however far the nearer side is, so the bound never grows past
  what the hole's length allows. With points on one side only (the stream stopped before
  T0, or our history starts after it), the nearest one within ``ONE_SIDED_MAX_S`` is the
  witness, with the spread of a Brownian move over that distance; farther, none yet.
- A TWAP window: the report at T0 against the spot's own mean over [T0 - L, T0]. Two means
  of one path over windows ``d`` seconds apart differ by about ``d / L`` of the path's move
  over L, so by ``sigma * d / sqrt(L)`` (one sd); ``d`` is ``TWAP_SHIFT_S``, more than the
  few seconds the report is said to stop averaging before its stamp, when the spot covers
  the lookback (its last ``max_gap`` may still be on their way: inside that ``d``). With a
  hole in it, the mean of the seconds the spot has, within ``sigma * sqrt(L)`` (coarse).

A value is believed within ``BASE + SIGMAS * spread`` (in log terms) of its witness;
``sigma`` is the spot's own measured volatility per root second, jumps included
(``FALLBACK_SIGMA`` until the spot has enough history for an estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.volatility import Volatility

# A floor for rounding and for a neighbouring second's value (BTC's 1 s moves are 0.35-0.67
# bp sd; Gamma's and the site's values may be rounded, or taken a second off T0): 10 bp, as
# the bound before it had.
BASE = 0.001
# How many sds of the Brownian spread a value may be off: 4 (about 1 in 16,000 for a
# Gaussian, two-sided; the spot's fat tails enter through sigma, which counts its jumps,
# and fade over the tens of seconds judged here). A refused honest value costs the window
# its P(up) (stale); a believed wrong one would be fresh and wrong: the tighter side wins.
SIGMAS = 4.0
# How many seconds apart the TWAP report's averaging window and ours may be (the report is
# said to stop averaging about 3 s before its stamp; our points arrive per second, 2 % of
# the seconds missing): 10 s.
TWAP_SHIFT_S = 10.0
# With points on one side of T0 only: the nearest within this many seconds witnesses it
# (the bound then reaches what a bridge over a 120 s hole allows, 0.36 % at sigma 1.2e-4).
ONE_SIDED_MAX_S = 30.0
# The spot's sigma per root second while it has too little history for an estimate: BTC's
# 1.2e-4 of the issue (the real feed's 1 s moves are 0.35-0.67 bp sd: this is wider).
FALLBACK_SIGMA = 1.2e-4


@dataclass(frozen=True)
class Witness:
    """What the settlement stream says a price to beat can be: ``value`` +- ``bound`` (log)."""

    value: float
    bound: float
    what: str  # for the row's reason: "the spot at T0", "the spot's mean over [T0-60s, T0]"

    def admits(self, candidate: float) -> bool:
        """Whether ``candidate`` (a finite positive price) is within the bound."""
        return abs(math.log(candidate / self.value)) <= self.bound

    def reason(self, candidate: float, via: str) -> str:
        """Why ``candidate`` from ``via`` is not believed, for the row's ``suspect``."""
        off = 100 * (candidate / self.value - 1)
        return (
            f"price to beat {candidate:.2f} from {via} is {off:+.3f} % from {self.what} "
            f"{self.value:.2f} (believed within {100 * self.bound:.3f} %)"
        )


def sigma_of(volatility: Volatility | None) -> float:
    """The spot's volatility per root second, its jumps included (``FALLBACK_SIGMA`` without
    an estimate)."""
    if volatility is None:
        return FALLBACK_SIGMA
    variance = volatility.sigma**2 + volatility.jump_rate * volatility.jump_var
    return math.sqrt(variance) if math.isfinite(variance) and variance > 0 else FALLBACK_SIGMA


def bridge_bound(before_ms: int, after_ms: int, at_ms: int, sigma: float) -> float:
    """The bound for a value at ``at_ms`` between believed points at ``before_ms`` and
    ``after_ms``: ``BASE`` plus ``SIGMAS`` sds of the Brownian bridge there."""
    a, b, t = before_ms / 1000, after_ms / 1000, at_ms / 1000
    variance_s = (t - a) * (b - t) / (b - a) if b > a else 0.0
    return BASE + SIGMAS * sigma * math.sqrt(max(0.0, variance_s))


def spot_witness(spot: PriceSeries, t0_ms: int, sigma: float) -> Witness | None:
    """The spot's own value at T0 (a point stamped there), else the bridge between its
    nearest believed points on both sides, else the nearest within ``ONE_SIDED_MAX_S``."""
    before, after = spot.around(t0_ms)
    if before is not None and before[0] == t0_ms:
        return Witness(before[1], BASE, "the spot at T0")
    if before is None or after is None:
        return _one_sided(before or after, t0_ms, sigma)
    a_ms, a_value = before
    b_ms, b_value = after
    weight = (t0_ms - a_ms) / (b_ms - a_ms)
    centre = math.exp((1 - weight) * math.log(a_value) + weight * math.log(b_value))
    hole = f"the spot across its hole of {(b_ms - a_ms) / 1000:.0f} s at T0"
    return Witness(centre, bridge_bound(a_ms, b_ms, t0_ms, sigma), hole)


def _one_sided(point: tuple[int, float] | None, t0_ms: int, sigma: float) -> Witness | None:
    """The only side's nearest point as the witness, when close enough to T0."""
    if point is None:
        return None
    distance_s = abs(point[0] - t0_ms) / 1000
    if distance_s > ONE_SIDED_MAX_S:
        return None
    bound = BASE + SIGMAS * sigma * math.sqrt(distance_s)
    return Witness(point[1], bound, f"the spot {distance_s:.0f} s from T0")


def second_mean(spot: PriceSeries, end_ms: int, lookback_s: int, max_gap_ms: int) -> float | None:
    """The mean of the spot in force at each whole second of (end - L, end] (a second with
    no point within ``max_gap_ms`` is left out; None when none has one). Per second, so a
    stretch of faster points weighs no more than its seconds."""
    values = []
    first_s = -(-(end_ms - lookback_s * 1000 + 1) // 1000)  # the first whole second after
    for second in range(first_s, end_ms // 1000 + 1):
        value = spot.at(second * 1000, max_gap_ms)
        if value is not None:
            values.append(value)
    return math.fsum(values) / len(values) if values else None


def twap_witness(
    spot: PriceSeries,
    end_ms: int,
    lookback_s: int,
    sigma: float,
    max_gap_ms: int,
    *,
    partial: bool = False,
) -> Witness | None:
    """The spot's own mean over the ``lookback_s`` seconds up to ``end_ms``: the witness of
    a TWAP report stamped ``end_ms``; None unless the spot covers them (to ``max_gap_ms``
    before the end). ``partial``: with a hole in them, the mean of the seconds the spot has,
    off the whole mean by at most the spot's move over the lookback, ``sigma * sqrt(L)``
    (a coarse witness: it catches a report far off, not one a little off)."""
    covered = spot.covered(end_ms - lookback_s * 1000, end_ms - max_gap_ms, max_gap_ms)
    if not (covered or partial):
        return None
    mean = second_mean(spot, end_ms, lookback_s, max_gap_ms)
    if mean is None:
        return None
    if covered:
        spread = sigma * TWAP_SHIFT_S / math.sqrt(lookback_s)
        return Witness(mean, BASE + SIGMAS * spread, f"the spot's mean over its {lookback_s} s")
    spread = sigma * math.sqrt(lookback_s)
    what = f"the spot's mean of the seconds it has of its {lookback_s} s"
    return Witness(mean, BASE + SIGMAS * spread, what)


def topic_agrees_now(
    spot: PriceSeries,
    twap: PriceSeries,
    t0_ms: int,
    lookback_s: int,
    sigma: float,
    max_gap_ms: int,
) -> bool:
    """Whether the TWAP topic's latest report after T0 (up to the spot's newest point, so
    the spot can cover its lookback) agrees with the spot's own mean: the topic and the spot
    are on one scale now."""
    latest = spot.latest()
    report = twap.around(latest[0])[0] if latest is not None else None
    if report is None or report[0] <= t0_ms:
        return False
    witness = twap_witness(spot, report[0], lookback_s, sigma, max_gap_ms)
    return witness is not None and witness.admits(report[1])
