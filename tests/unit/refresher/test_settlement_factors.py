"""The variance factor measured on a TWAP settlement's own horizon and rule
(``volatility.settlement_factors``): 1 on a Brownian path, the discrete average's own
variance in its last seconds, and on the settlement-feed stand-in far below the block
inflation; a spot settlement keeps the inflation."""

from __future__ import annotations

import math
import random

import pytest

from app.markets import WINDOW_S
from app.refresher import volatility
from app.refresher.model import SPOT, TWAP
from harness.settlement_feed import FEED_SIGMA, SettlementFeedPath

SIGMA = 1.2e-4
START_MS = 1_800_000_000_000


def _brownian(seconds: int, seed: int) -> tuple[list[int], list[float]]:
    rng = random.Random(seed)
    x, times, values = math.log(100_000.0), [], []
    for t in range(seconds):
        x += rng.gauss(0.0, SIGMA)
        times.append(START_MS + t * 1000)
        values.append(math.exp(x))
    return times, values


def _feed(seconds: int, seed: int) -> tuple[list[int], list[float]]:
    start = START_MS // 1000
    path = SettlementFeedPath(seed, FEED_SIGMA, 100_000, start, seconds)
    return [(start + k) * 1000 for k in range(seconds)], [
        float(path.value(start + k)) for k in range(seconds)
    ]


def _discrete_twap_ratio(tau: int) -> float:
    """The variance of a per-second TWAP's last ``tau`` seconds against the continuous
    formula's ``tau^3 / 3``: the seconds still to come move the mean by 1, 2, ... tau steps."""
    return sum(k * k for k in range(1, tau + 1)) / (tau**3 / 3)


@pytest.mark.parametrize("seed", [1, 2])
def test_on_a_brownian_path_the_factors_are_the_exact_models(seed: int) -> None:
    past = volatility.history(*_brownian(4 * 3600, seed))
    assert past.inflation < 1.05
    factors = dict(past.factors)
    assert set(factors) == set(volatility.RULES)
    for (rule, lookback), points in factors.items():
        assert [h for h, _ in points] == list(volatility.FACTOR_HORIZONS)
        for horizon, factor in points:
            if horizon < 30:
                continue  # below: the discrete average's own variance (next test)
            assert 0.85 < factor < 1.18, (rule, lookback, horizon, factor)


def test_in_a_twaps_last_seconds_the_factor_is_the_discrete_averages_variance() -> None:
    """5 s before the end of a per-second TWAP the future seconds weigh 1..5 steps: 55/41.7
    of the continuous formula. The replay finds it without being told."""
    past = volatility.history(*_brownian(4 * 3600, 3))
    for rule in ((TWAP, 30), (TWAP, 60)):
        factor = dict(dict(past.factors)[rule])[5]
        assert factor == pytest.approx(_discrete_twap_ratio(5), abs=0.12)


def test_a_short_history_keeps_the_block_inflation() -> None:
    """Too few pseudo-windows to say anything: every factor is the inflation."""
    times, values = _feed(volatility.SIGMA_WINDOW_S + WINDOW_S + 3000, 5)
    past = volatility.history(times, values)
    for _, points in past.factors:
        assert all(factor == past.inflation for _, factor in points)
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    # Then the spread is the inflated one, as before the factors.
    sigma, jump_var = estimate.spread(TWAP, 30, 60.0)
    assert sigma == pytest.approx(estimate.sigma)
    assert jump_var == pytest.approx(estimate.jump_var)


def test_factors_interpolate_in_log_horizon_and_take_the_nearest_lookback() -> None:
    factors = (((SPOT, 0), ((10, 1.0), (40, 4.0))), ((TWAP, 30), ((10, 2.0),)))
    assert volatility.factor_at(factors, SPOT, None, 5.0, 9.0) == 1.0
    assert volatility.factor_at(factors, SPOT, None, 20.0, 9.0) == pytest.approx(2.0)
    assert volatility.factor_at(factors, SPOT, None, 100.0, 9.0) == 4.0
    assert volatility.factor_at(factors, TWAP, 45, 60.0, 9.0) == 2.0  # 30 s is the nearest
    assert volatility.factor_at((), TWAP, 30, 60.0, 9.0) == 9.0


def test_on_the_settlement_feed_stand_in_the_factor_is_far_below_the_inflation() -> None:
    """The block inflation counts each second's fat tails, which a TWAP averages out: on
    the stand-in it doubles the variance, while the settlement's own misses say about 1
    (docs/model.md has the scores: bench/paths.py, bench/real.py)."""
    times, values = _feed(4 * 3600, 1)
    past = volatility.history(times, values)
    assert past.inflation > 1.5
    for _, points in past.factors:
        for horizon, factor in points:
            if 15 <= horizon <= 180:
                assert 0.6 < factor < 0.75 * past.inflation, (horizon, factor)


def test_a_spot_settlement_keeps_the_inflation() -> None:
    times, values = _feed(4 * 3600, 1)
    past = volatility.history(times, values)
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    assert past.factors and all(rule == TWAP for (rule, _), _ in past.factors)
    assert estimate.spread(SPOT, None, 60.0) == (estimate.sigma, estimate.jump_var)
    sigma, _ = estimate.spread(TWAP, 30, 60.0)
    assert sigma < 0.9 * estimate.sigma


def test_factors_given_are_kept_and_not_measured_again() -> None:
    """The live series measures them every 5 minutes and keeps them between (rtds.py)."""
    times, values = _brownian(2 * 3600, 4)
    kept = (((TWAP, 30), ((5, 2.0), (290, 3.0))),)
    past = volatility.history(times, values, kept)
    assert past.factors == kept
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    assert estimate.factor(TWAP, 30, 5.0) == 2.0
    assert volatility.history(times, values).factors != kept
