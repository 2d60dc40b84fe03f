"""The zero-drift digital-option model of P(up) for a 5-minute window, by settlement rule.

``P(up) = Phi(ln(C / K) / sqrt(V))``: ``C`` the expected settlement value, ``K`` the price to
beat, ``V`` the variance of the settlement's log still to come, ``sigma`` the SPOT's
volatility per sqrt-second, ``tau`` the seconds left (counted from the spot's own timestamp).

- Spot-settled window: ``C = S`` (the spot now), ``V = sigma^2 * tau``.
- TWAP-settled window with lookback ``L`` (the settlement is the mean spot over the last ``L``
  seconds): with ``tau > L`` left, ``C = S`` and ``V = sigma^2 * (tau - 2L/3)``; inside the last
  ``L`` seconds the elapsed part of the average is known: ``C = w * A + (1 - w) * S`` with ``A``
  the mean spot since ``T - L`` and ``w = (L - tau) / L``, and ``V = sigma^2 * tau^3 / (3 L^2)``.

Jumps (docs/model.md): on real data the settlement's log also moves by jumps, a compound
Poisson part of rate ``lambda`` per second and mean square size ``J``. A jump moves the
settlement by the weight its time has in it (all of it for the spot; inside a TWAP's lookback,
the part of the lookback after it), so each of the ``m = lambda * tau`` expected jumps has a
mean square effect ``J' = J * (V / sigma^2) / tau`` and ``P(up) = sum_n Poisson(n; m) *
Phi(ln(C / K) / sqrt(V + n * J'))`` (Merton's mixture). With no jumps it is the plain formula.
While the outcome is not known P(up) stays within [``P_FLOOR``, 1 - ``P_FLOOR``]: no feed is
sure enough for 0 % or 100 %.

A smoothed feed (docs/model.md): with ``rho`` the autocorrelations of its 1-second returns
(lags 1, 2, ...; measured on the feed, ``app.refresher.volatility``), the variance over ``h``
seconds is ``sigma^2 * h * R(h)``, ``R(h) = 1 + 2 * sum_k (1 - k/h) * rho_k`` (``horizon_ratio``,
applied to the rule's variance and the jumps'), and the last return ``r`` continues:
``E[r_t+j | r_t] = rho_j * r``, each future second weighted by its share of the settlement
(``continuation``): the centre's log moves by ``r * sum_j a_j * rho_j``. With every ``rho``
0 (a Brownian path) both are the plain model.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence

SPOT = "spot"
TWAP = "twap"
P_FLOOR = 0.001  # 0.1 %: what the board says at most about an outcome not yet known
MAX_JUMPS = 12  # Poisson terms summed (the expected count over 5 minutes is well under 1)
RATIO_BOUNDS = (0.25, 4.0)  # a horizon ratio outside this is a broken feed, not a market


def normal_cdf(x: float) -> float:
    """Standard normal distribution function."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def remaining_variance(
    sigma: float, tau_s: float, rule: str = SPOT, lookback_s: float | None = None
) -> float:
    """Variance of the settlement log price still to come, ``tau_s`` seconds before the end."""
    if tau_s <= 0:
        return 0.0
    if rule == TWAP:
        lookback = _lookback(lookback_s)
        if tau_s > lookback:
            return sigma * sigma * (tau_s - 2.0 * lookback / 3.0)
        return sigma * sigma * tau_s**3 / (3.0 * lookback * lookback)
    return sigma * sigma * tau_s


def settlement_centre(
    spot: float,
    tau_s: float,
    rule: str = SPOT,
    lookback_s: float | None = None,
    known_mean: float | None = None,
) -> float:
    """The expected settlement value: the spot, or inside a TWAP's lookback the blend of the
    mean already observed (``known_mean``, the spot's mean since ``T - L``) and the spot."""
    if rule != TWAP:
        return spot
    lookback = _lookback(lookback_s)
    if tau_s >= lookback:
        return spot
    if known_mean is None:
        raise ValueError("inside the TWAP lookback the mean spot since T - L is needed")
    elapsed = (lookback - max(tau_s, 0.0)) / lookback
    return elapsed * known_mean + (1.0 - elapsed) * spot


def horizon_ratio(
    rho: Sequence[float], tau_s: float, measured: Sequence[tuple[int, float]] = ()
) -> float:
    """``R(tau)``: the variance over ``tau_s`` seconds against ``tau_s`` 1-second variances,
    within ``RATIO_BOUNDS``. Up to ``len(rho)`` seconds from the autocorrelations ``rho`` (lag
    1 first); beyond, interpolated (in log horizon) toward the ratios ``measured`` at longer
    horizons ((horizon, ratio), ascending), the last one holding beyond it."""
    reach = len(rho)
    ratio = ratio_from_autocorrelations(rho, min(tau_s, reach) if reach else tau_s)
    if measured and tau_s > reach:
        points = [(float(max(reach, 1)), ratio), *((float(h), r) for h, r in measured)]
        ratio = points[-1][1]
        for (h0, r0), (h1, r1) in itertools.pairwise(points):
            if tau_s <= h1:
                share = math.log(tau_s / h0) / math.log(h1 / h0) if h1 > h0 else 1.0
                ratio = r0 + share * (r1 - r0)
                break
    return min(RATIO_BOUNDS[1], max(RATIO_BOUNDS[0], ratio))


def ratio_from_autocorrelations(rho: Sequence[float], tau_s: float) -> float:
    """``1 + 2 * sum_k (1 - k / tau) * rho_k`` over the lags below ``tau_s``: the variance of
    a sum of ``tau_s`` returns with those autocorrelations, per return (unbounded)."""
    ratio = 1.0
    for lag, value in enumerate(rho, start=1):
        if lag >= tau_s:
            break
        ratio += 2.0 * (1.0 - lag / tau_s) * value
    return ratio


def continuation(
    rho: Sequence[float],
    last_return: float,
    tau_s: float,
    rule: str = SPOT,
    lookback_s: float | None = None,
) -> float:
    """The expected move of the settlement's log from the last 1-second return going on:
    ``last_return * sum_j a_j * rho_j`` over the seconds ``j`` still to come, ``a_j`` the share
    of the settlement that second ``j`` moves (1 for the spot; for a TWAP, the part of the
    lookback at or after it)."""
    if not last_return or tau_s <= 0:
        return 0.0
    lookback = _lookback(lookback_s) if rule == TWAP else 0.0
    total = 0.0
    for lag, value in enumerate(rho, start=1):
        if lag > tau_s:
            break
        share = 1.0 if rule != TWAP else min(1.0, (tau_s - lag) / lookback)
        total += share * value
    return last_return * total


def probability_up(
    price: float,
    price_to_beat: float,
    tau_s: float,
    sigma: float,
    rule: str = SPOT,
    lookback_s: float | None = None,
    known_mean: float | None = None,
    jump_rate: float = 0.0,
    jump_var: float = 0.0,
    rho: Sequence[float] = (),
    last_return: float = 0.0,
    ratios: Sequence[tuple[int, float]] = (),
) -> float:
    """P(settlement >= price to beat); ties resolve UP, so a decided window is 0 or 1.

    ``price`` is the spot now; for a TWAP window inside its last ``lookback_s`` seconds,
    ``known_mean`` is the mean spot since ``T - lookback_s``. ``jump_rate`` (per second) and
    ``jump_var`` (a jump's mean square log size) add the jumps; ``rho`` (the 1-second
    returns' autocorrelations), ``last_return`` and ``ratios`` (the variance ratio measured
    at longer horizons) the feed's smoothing; an undecided
    window's answer stays within [``P_FLOOR``, 1 - ``P_FLOOR``].
    """
    if price <= 0 or price_to_beat <= 0 or (known_mean is not None and known_mean <= 0):
        raise ValueError("prices must be positive")
    centre = settlement_centre(price, tau_s, rule, lookback_s, known_mean)
    # The time left, weighted by the rule, and by how the feed's variance grows with it.
    seconds = remaining_variance(1.0, tau_s, rule, lookback_s) * horizon_ratio(rho, tau_s, ratios)
    variance = sigma * sigma * seconds
    # Every jump of the time left counts, by the weight its time has in the settlement (all of
    # it for the spot; inside a TWAP's lookback the part of the lookback after it): the same
    # variance as the diffusion's weighting, and the right shape when many small ones count.
    expected_jumps = jump_rate * tau_s if jump_var > 0 and tau_s > 0 else 0.0
    weighted_var = jump_var * seconds / tau_s if expected_jumps > 0 else 0.0
    if variance <= 0 and expected_jumps <= 0:
        return 1.0 if centre >= price_to_beat else 0.0
    distance = math.log(centre / price_to_beat) + continuation(
        rho, last_return, tau_s, rule, lookback_s
    )
    p = _mixture(distance, variance, expected_jumps, weighted_var)
    return min(1.0 - P_FLOOR, max(P_FLOOR, p))


def _mixture(distance: float, variance: float, expected_jumps: float, jump_var: float) -> float:
    """Merton's sum over the number of jumps (the plain formula when none are expected)."""
    if expected_jumps <= 0:
        return normal_cdf(distance / math.sqrt(variance))
    weight = math.exp(-expected_jumps)
    total = left = 0.0
    for n in range(MAX_JUMPS + 1):
        spread = variance + n * jump_var
        total += weight * (normal_cdf(distance / math.sqrt(spread)) if spread > 0 else 0.5)
        left += weight
        weight *= expected_jumps / (n + 1)
    # What the terms left out would add: a coin flip (they are vanishingly rare).
    return total + (1.0 - left) * 0.5


def percentages(p_up: float) -> tuple[float, float]:
    """P(up) and P(down) in percent, two decimals, adding up to exactly 100."""
    up = round(min(1.0, max(0.0, p_up)) * 100.0, 2)
    return up, round(100.0 - up, 2)


def _lookback(lookback_s: float | None) -> float:
    # Never assume a lookback: markets have used 30 s and 60 s, and each says which.
    if lookback_s is None or not math.isfinite(lookback_s) or lookback_s <= 0:
        raise ValueError("a TWAP rule needs its lookback in seconds")
    return float(lookback_s)


class RealizedVolatility:
    """Volatility per sqrt-second from the squared log returns of 1-second samples, fed in
    time order (the simulated source's estimate; the live source uses ``volatility``)."""

    def __init__(self, window: int = 900, scale: float = 1.0, fallback: float = 1e-4) -> None:
        self._returns: deque[float] = deque(maxlen=window)
        self._sum_sq = 0.0
        self._last: tuple[float, float] | None = None
        self._scale = scale
        self._fallback = fallback

    def add(self, t: float, price: float) -> None:
        """Feed a price observed at time ``t``; returns are taken per elapsed second."""
        if not (math.isfinite(price) and math.isfinite(t)) or price <= 0:
            return  # one garbage point must not poison the estimate for good
        if self._last is not None:
            last_t, last_price = self._last
            dt = t - last_t
            if dt < 1.0:
                return
            r = math.log(price / last_price) / math.sqrt(dt)
            if len(self._returns) == self._returns.maxlen:
                self._sum_sq -= self._returns[0] ** 2
            self._returns.append(r)
            self._sum_sq += r * r
        self._last = (t, price)

    @property
    def samples(self) -> int:
        """How many returns the estimate rests on."""
        return len(self._returns)

    def sigma(self) -> float:
        """The estimate; the fallback until 30 returns have been seen."""
        n = len(self._returns)
        if n < 30:
            return self._fallback
        return math.sqrt(max(self._sum_sq, 0.0) / n * self._scale)
