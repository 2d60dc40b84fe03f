"""The zero-drift digital-option model of P(up) for a 5-minute window.

``P(up) = Phi(ln(S / K) / sqrt(V))`` where ``V`` is the variance of the log price still to
come before settlement: ``sigma^2 * tau`` for a spot-settled window; for a window settled on
a 60-second TWAP, ``sigma^2 * (tau - 40)`` with more than a minute left and
``sigma^2 * tau^3 / (3 * 60^2)`` inside the last minute (part of the average is known).
"""

from __future__ import annotations

import math
from collections import deque

SPOT = "spot"
TWAP = "twap"
TWAP_LOOKBACK_S = 60.0


def normal_cdf(x: float) -> float:
    """Standard normal distribution function."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def remaining_variance(sigma: float, tau_s: float, rule: str = SPOT) -> float:
    """Variance of the settlement log price still to come, ``tau_s`` seconds before the end."""
    if tau_s <= 0:
        return 0.0
    if rule == TWAP:
        if tau_s > TWAP_LOOKBACK_S:
            return sigma * sigma * (tau_s - 40.0)
        return sigma * sigma * tau_s**3 / (3.0 * TWAP_LOOKBACK_S**2)
    return sigma * sigma * tau_s


def probability_up(
    price: float, price_to_beat: float, tau_s: float, sigma: float, rule: str = SPOT
) -> float:
    """P(settlement >= price to beat); ties resolve UP, so a decided window is 0 or 1."""
    if price <= 0 or price_to_beat <= 0:
        raise ValueError("prices must be positive")
    variance = remaining_variance(sigma, tau_s, rule)
    if variance <= 0:
        return 1.0 if price >= price_to_beat else 0.0
    return normal_cdf(math.log(price / price_to_beat) / math.sqrt(variance))


def percentages(p_up: float) -> tuple[float, float]:
    """P(up) and P(down) in percent, two decimals, adding up to exactly 100."""
    up = round(min(1.0, max(0.0, p_up)) * 100.0, 2)
    return up, round(100.0 - up, 2)


class RealizedVolatility:
    """Volatility per sqrt-second from the squared log returns of 1-second samples."""

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
