"""The variance factor measured on a TWAP settlement's own horizon and rule
(``volatility.settlement_factors``): 1 on a Brownian path, the discrete average's own
variance in its last seconds, and on the settlement-feed stand-in far below the block
inflation; a spot settlement keeps the inflation."""

from __future__ import annotations

import math
import random

import pytest

from app.markets import SPANS
from app.refresher import volatility
from app.refresher.model import SPOT, TWAP
from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.volatility import settlement
from harness.settlement_feed import FEED_SIGMA, SettlementFeedPath
from harness.spans import WINDOW_S

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
    past = volatility.history(*_brownian(4 * 3600, seed), (WINDOW_S,))
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
    past = volatility.history(*_brownian(4 * 3600, 3), (WINDOW_S,))
    for rule in ((TWAP, 30), (TWAP, 60)):
        factor = dict(dict(past.factors)[rule])[5]
        assert factor == pytest.approx(_discrete_twap_ratio(5), abs=0.12)


def test_a_short_history_keeps_the_block_inflation() -> None:
    """Too few pseudo-windows to say anything: every factor is the inflation."""
    times, values = _feed(volatility.SIGMA_WINDOW_S + WINDOW_S + 3000, 5)
    past = volatility.history(times, values, (WINDOW_S,))
    for _, points in past.factors:
        assert all(factor == past.inflation for _, factor in points)
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    # Then the spread is the inflated one, as before the factors.
    sigma, jump_var = estimate.spread(TWAP, 30, 60.0, WINDOW_S)
    assert sigma == pytest.approx(estimate.sigma)
    assert jump_var == pytest.approx(estimate.jump_var)


def test_factors_interpolate_in_log_horizon_and_take_the_nearest_lookback() -> None:
    factors = (((SPOT, 0), ((10, 1.0), (40, 4.0))), ((TWAP, 30), ((10, 2.0),)))
    assert volatility.factor_at(factors, SPOT, None, 5.0, 9.0, WINDOW_S) == 1.0
    assert volatility.factor_at(factors, SPOT, None, 20.0, 9.0, WINDOW_S) == pytest.approx(2.0)
    assert volatility.factor_at(factors, SPOT, None, 100.0, 9.0, WINDOW_S) == 4.0
    assert (
        volatility.factor_at(factors, TWAP, 45, 60.0, 9.0, WINDOW_S) == 2.0
    )  # 30 s is the nearest
    assert volatility.factor_at((), TWAP, 30, 60.0, 9.0, WINDOW_S) == 9.0


def test_on_the_settlement_feed_stand_in_the_factor_is_far_below_the_inflation() -> None:
    """The block inflation counts each second's fat tails, which a TWAP averages out: on
    the stand-in it doubles the variance, while the settlement's own misses say about 1
    (docs/model.md has the scores: bench/paths.py, bench/real.py)."""
    times, values = _feed(4 * 3600, 1)
    past = volatility.history(times, values, (WINDOW_S,))
    assert past.inflation > 1.5
    for _, points in past.factors:
        for horizon, factor in points:
            if 15 <= horizon <= 180:
                assert 0.6 < factor < 0.75 * past.inflation, (horizon, factor)


def test_a_spot_settlement_keeps_the_inflation() -> None:
    times, values = _feed(4 * 3600, 1)
    past = volatility.history(times, values, (WINDOW_S,))
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    assert past.factors and all(rule == TWAP for (rule, _), _ in past.factors)
    assert estimate.spread(SPOT, None, 60.0, WINDOW_S) == (estimate.sigma, estimate.jump_var)
    sigma, _ = estimate.spread(TWAP, 30, 60.0, WINDOW_S)
    assert sigma < 0.9 * estimate.sigma


def test_factors_given_are_kept_and_not_measured_again() -> None:
    """The live series measures them every 5 minutes and keeps them between (rtds.py)."""
    times, values = _brownian(2 * 3600, 4)
    kept = (((TWAP, 30), ((5, 2.0), (290, 3.0))),)
    past = volatility.history(times, values, (WINDOW_S,), kept)
    assert past.factors == kept
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    assert estimate.factor(TWAP, 30, 5.0, WINDOW_S) == 2.0
    assert volatility.history(times, values, (WINDOW_S,)).factors != kept


def _beyond_the_ratios(seconds: int, seed: int, trend: bool) -> tuple[list[int], list[float]]:
    """A Brownian path plus a part whose variance per second changes beyond the 300 s ratio
    the model measures and holds: a velocity that persists over 600 s (``trend``: the
    variance per second rises, the model under-states a 600 s variance) or a level that
    reverts over 300 s (it falls, the model over-states it)."""
    rng = random.Random(seed)
    keep = math.exp(-1.0 / (600.0 if trend else 300.0))
    shock = SIGMA * math.sqrt((0.006 if trend else 1500.0) * (1.0 - keep * keep))
    walk, part, velocity, times, values = math.log(100_000.0), 0.0, 0.0, [], []
    for t in range(seconds):
        walk += rng.gauss(0.0, SIGMA)
        if trend:
            velocity = keep * velocity + rng.gauss(0.0, shock)
            part += velocity
        else:
            part = keep * part + rng.gauss(0.0, shock)
        times.append(START_MS + t * 1000)
        values.append(math.exp(walk + part))
    return times, values


def test_the_long_horizons_are_measured_only_for_fifteen_minute_windows() -> None:
    """Served 5-minute windows only, the factors are what they were; with 15-minute ones the
    long horizons are added, and the 5-minute horizons (their own pseudo-windows) unchanged."""
    times, values = _brownian(4 * 3600, 5)
    five = volatility.history(times, values, (WINDOW_S,))
    both = volatility.history(times, values, windows=(WINDOW_S, 900))
    long = SPANS["15m"].factor_horizons
    for (rule, short), (same_rule, points) in zip(five.factors, both.factors, strict=True):
        assert rule == same_rule
        assert [h for h, _ in short] == list(volatility.FACTOR_HORIZONS)
        assert points == (*short, *((h, k) for h, k in points if h in long))
        assert [h for h, _ in points][-len(long) :] == list(long)
        for horizon, factor in points:
            if horizon in long:  # a Brownian path: about 1 (the estimate's own noise)
                assert 0.7 < factor < 1.3, (rule, horizon, factor)


@pytest.mark.parametrize("trend", [True, False])
def test_a_long_horizon_is_measured_on_fifteen_minute_pseudo_windows(trend: bool) -> None:
    """Where the variance per second changes beyond the ratios measured, the 15-minute
    pseudo-windows find the model too narrow (a trend) or too wide (a reversion) at 600 s
    left: the factor there moves away from 290 s's in that direction (seeds 6-8: 600 s's
    against 290 s's 1.36-1.72 and 0.57-0.85; on Brownian paths about 1)."""
    times, values = _beyond_the_ratios(12 * 3600, 7, trend)
    past = volatility.history(times, values, windows=(WINDOW_S, 900))
    for rule, points in past.factors:
        factors = dict(points)
        if trend:
            assert factors[600] > 1.25 * factors[290], (rule, factors)
            assert factors[600] > factors[420] > factors[290], (rule, factors)
        else:
            assert factors[600] < 0.88 * factors[290], (rule, factors)
            assert factors[600] < factors[420] < factors[290], (rule, factors)


def test_a_fifteen_minute_window_reads_its_long_horizons_and_a_five_minute_one_never() -> None:
    factors = (((TWAP, 60), ((120, 1.0), (290, 1.2), (420, 0.6), (600, 0.5))),)
    read = volatility.factor_at
    assert read(factors, TWAP, 60, 300.0, 9.0, WINDOW_S) == 1.2  # held beyond 290 s, as before
    assert read(factors, TWAP, 60, 300.0, 9.0, 900) < 1.2  # toward 420 s's
    assert read(factors, TWAP, 60, 600.0, 9.0, 900) == 0.5
    assert read(factors, TWAP, 60, 870.0, 9.0, 900) == 0.5  # 600 s's holds beyond
    assert read(factors, TWAP, 60, 120.0, 9.0, 900) == read(factors, TWAP, 60, 120.0, 9.0, WINDOW_S)


def test_too_short_a_history_for_fifteen_minute_pseudo_windows_keeps_the_inflation() -> None:
    """Enough history for the 5-minute pseudo-windows, not for the 15-minute ones: the long
    horizons are the block inflation, honest as before the factors, not 290 s's held."""
    seconds = (volatility.factor_history_s(WINDOW_S) + volatility.factor_history_s(900)) // 2
    times, values = _feed(seconds, 5)
    past = volatility.history(times, values, windows=(WINDOW_S, 900))
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None and past.inflation > 1.1
    for rule, points in past.factors:
        factors = dict(points)
        assert factors[290] != past.inflation  # measured
        assert all(factors[h] == past.inflation for h in SPANS["15m"].factor_horizons)
        assert estimate.factor(*rule, 600.0, 900) == past.inflation
        assert (
            estimate.factor(*rule, 600.0, WINDOW_S) == factors[290]
        )  # a 5-minute window's reading


def test_the_live_series_measures_the_long_horizons_for_the_windows_it_serves() -> None:
    times, values = _brownian(2 * 3600, 7)
    found = {}
    for windows in ((WINDOW_S,), (WINDOW_S, 900)):
        series = PriceSeries(4 * 3600, clock=lambda: times[-1] / 1000 + 1, windows=windows)
        for ts_ms, value in zip(times, values, strict=True):
            series.offer(ts_ms, value)
        estimate = series.volatility()
        assert estimate is not None
        found[windows] = {h for _, points in estimate.factors for h, _ in points}
    assert found[WINDOW_S,] == set(volatility.FACTOR_HORIZONS)
    assert found[WINDOW_S, 900] == {*volatility.FACTOR_HORIZONS, *SPANS["15m"].factor_horizons}


def test_a_long_horizons_factor_is_the_misses_mean_square_a_single_one_capped() -> None:
    """Beyond 290 s the miss sums hundreds of seconds: its mean square is the factor, and one
    pseudo-window (a jump in it) counts at most ``U_CAP``."""
    misses = [1.2, -0.8, 0.5, -1.1] * 25
    square = sum(z * z for z in misses) / len(misses)
    assert settlement._variance_factor(misses, []) == pytest.approx(square)
    jumped = settlement._variance_factor([*misses[:-1], 50.0], [])
    assert jumped == pytest.approx((square * 100 - 1.1**2 + volatility.U_CAP) / 100)
    assert settlement._variance_factor([0.01] * 10, []) == volatility.FACTOR_RANGE[0]
