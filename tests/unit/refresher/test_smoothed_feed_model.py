"""The model on a smoothed feed (issue 37, point 2): exact answers on simulated paths.

A feed whose 1-second log returns follow an AR(1), ``d_t = phi * d_t-1 + e_t``, is the
simplest smoothed feed (an exponential average of a random walk has such returns): its
returns' autocorrelations are ``phi^k``, and the sum of the next ``tau`` returns given the
last one is Gaussian with a known mean and variance. So P(up) is known exactly, and the
model, fed the autocorrelations it measures on the path itself, must give it; without them
(the model of before) it does not. On a Brownian path nothing is measured and the model is
the plain formula.
"""

from __future__ import annotations

import math
import random

import pytest

from app.refresher import volatility
from app.refresher.model import (
    SPOT,
    continuation,
    horizon_ratio,
    normal_cdf,
    probability_up,
    remaining_variance,
)

PHI = 0.3
INNOVATION = 1e-4  # the sd of e_t, per second
SECONDS = 7200


def _ar1_returns(seed: int, phi: float = PHI, n: int = SECONDS) -> list[float]:
    rng = random.Random(seed)
    found, last = [], 0.0
    for _ in range(n):
        last = phi * last + rng.gauss(0.0, INNOVATION)
        found.append(last)
    return found


def _exact_p_up(distance: float, last: float, tau: int, phi: float = PHI) -> float:
    """P(ln S_T - ln K >= 0) with ``distance`` = ln(S/K) now and ``last`` the last return."""
    mean = last * sum(phi**j for j in range(1, tau + 1))
    variance = INNOVATION**2 * sum(((1 - phi**m) / (1 - phi)) ** 2 for m in range(1, tau + 1))
    return normal_cdf((distance + mean) / math.sqrt(variance))


def test_the_autocorrelations_of_a_smoothed_feed_are_measured() -> None:
    rho = volatility.autocorrelations(_ar1_returns(1))
    assert len(rho) == volatility.LAGS
    for lag in (1, 2):
        assert abs(rho[lag - 1] - PHI**lag) < 0.05, rho[:4]
    assert all(abs(r) < 0.06 for r in rho[3:]), rho  # phi^4 = 0.008: below its errors


@pytest.mark.parametrize("seed", range(5))
def test_a_brownian_feed_has_no_autocorrelation_to_learn(seed: int) -> None:
    rng = random.Random(seed)
    rho = volatility.autocorrelations([rng.gauss(0.0, 1e-4) for _ in range(SECONDS)])
    assert rho == (0.0,) * volatility.LAGS
    assert horizon_ratio(rho, 120.0) == 1.0
    assert continuation(rho, 3e-4, 30.0) == 0.0
    plain = normal_cdf(0.001 / (1e-4 * math.sqrt(30.0)))
    assert probability_up(100.1, 100.0, 30.0, 1e-4, rho=rho, last_return=3e-4) == pytest.approx(
        min(1 - 0.001, plain), abs=1e-3
    )


def test_on_a_smoothed_feed_the_model_gives_the_exact_probability() -> None:
    returns = _ar1_returns(2)
    rho = volatility.autocorrelations(returns)
    # What the live estimate measures: the 1-second returns' own variance.
    sigma = math.sqrt(math.fsum(r * r for r in returns) / len(returns))
    sd = sigma
    worst_now = worst_before = 0.0
    for tau in (3, 5, 15, 30, 60, 120, 290, 3_600, 14_400):  # to the 4-hour kind (issue 49)
        spread = sd * math.sqrt(tau * 2.0)
        for distance in (-2 * spread, -spread, -0.3 * spread, 0.0, 0.5 * spread, 1.5 * spread):
            for last in (-3 * sd, -sd, 0.0, sd, 3 * sd):
                exact = _exact_p_up(distance, last, tau)
                if not 0.002 < exact < 0.998:
                    continue  # the model's floor, not its distribution
                price = 100.0 * math.exp(distance)
                now = probability_up(price, 100.0, tau, sigma, rho=rho, last_return=last)
                before = probability_up(price, 100.0, tau, sigma)
                worst_now = max(worst_now, abs(now - exact))
                worst_before = max(worst_before, abs(before - exact))
    assert worst_now < 0.02, worst_now  # within 2 points everywhere
    assert worst_before > 0.08, worst_before  # what the smoothing cost before


def test_the_continuation_of_a_twap_counts_only_the_share_still_averaged() -> None:
    rho = (0.3, 0.09, 0.027)
    spot = continuation(rho, 1.0, 100.0)
    assert spot == pytest.approx(0.417)
    assert continuation(rho, 1.0, 100.0, "twap", 60.0) == pytest.approx(spot)  # all ahead
    inside = continuation(rho, 1.0, 30.0, "twap", 60.0)
    # 30 s left of a 60 s average: the second 1 s ahead moves 29/60 of it, 2 s ahead 28/60...
    assert inside == pytest.approx(0.3 * 29 / 60 + 0.09 * 28 / 60 + 0.027 * 27 / 60)
    assert continuation(rho, 1.0, 0.5) == 0.0  # no whole second left


def test_the_horizon_ratio_is_the_variance_of_the_sum_of_autocorrelated_returns() -> None:
    rho = tuple(PHI**k for k in range(1, 31))
    for tau in (2, 5, 30):
        exact = tau + 2 * sum((tau - k) * PHI**k for k in range(1, tau))
        assert horizon_ratio(rho, float(tau)) * tau == pytest.approx(exact)
    assert horizon_ratio((), 300.0) == 1.0
    assert horizon_ratio((-0.49,) * 30, 300.0) == 0.25  # a broken feed is bounded
    assert remaining_variance(1.0, 30.0, SPOT) == 30.0


def test_the_exact_reference_is_right() -> None:
    """The reference itself, by simulation: 20,000 AR(1) continuations from one state."""
    rng = random.Random(9)
    tau, last, distance = 15, 2e-4, -3e-4
    ups = 0
    for _ in range(20_000):
        d, total = last, distance
        for _ in range(tau):
            d = PHI * d + rng.gauss(0.0, INNOVATION)
            total += d
        ups += total >= 0
    p = _exact_p_up(distance, last, tau)
    error = math.sqrt(p * (1 - p) / 20_000)
    assert abs(ups / 20_000 - p) < 4 * error
