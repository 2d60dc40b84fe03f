"""The autocorrelations of 1-second returns, each kept only beyond its own standard errors
(``app.refresher.volatility``), and the longer horizons measured directly beyond them."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

LAGS = 30  # autocorrelations measured: the real feed's fade within 30 s
RHO_WINDOW_S = 7200  # over the last 2 hours of returns (the cost is lags x returns)
# Beyond the lags, the variance ratio is measured at these horizons directly (shrunk toward 1
# as the 5-minute scale is): an exchange's feed has no short autocorrelation to see, yet
# its 5-minute variance is 1.2-1.5 times its 1-second one (docs/model.md).
LONG_HORIZONS = (60, 120, 300)
# One is kept (as measured) beyond this many standard errors, else it is chance: 0. With 30
# lags a Brownian path keeps one by chance about once in 500 estimates.
RHO_ERRORS = 4.0


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
