"""``app.refresher.volatility`` and the spot series' estimate: sigma and the measured scale."""

from __future__ import annotations

import math
import random

import pytest

from app.refresher import volatility
from app.refresher.sources.polymarket.rtds import SPOT_HISTORY_S, PriceSeries

SIGMA = 1.2e-4


def _path(seconds: int, sigma: float, seed: int, noise: float = 0.0) -> list[tuple[int, float]]:
    """1-second points of a Brownian log price; ``noise`` adds independent observation noise
    (a feed whose 1-second returns are negatively autocorrelated)."""
    rng = random.Random(seed)
    x, points = math.log(100_000.0), []
    for t in range(seconds):
        x += rng.gauss(0.0, sigma)
        points.append((1_800_000_000_000 + t * 1000, math.exp(x + rng.gauss(0.0, noise))))
    return points


def _split(points: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    return [t for t, _ in points], [v for _, v in points]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigma_is_recovered_from_a_brownian_path(seed: int) -> None:
    times, values = _split(_path(1800, SIGMA, seed))
    sigma, returns = volatility.sigma_one_second(times, values)
    assert returns == volatility.SIGMA_WINDOW_S
    assert sigma == pytest.approx(SIGMA, rel=0.1)


def test_sparse_points_give_the_same_sigma_per_second() -> None:
    """Points every 5 s: the grid holds each price until the next, so the per-second
    variance stays unbiased."""
    points = _path(5 * 900, SIGMA, seed=4)[::5]
    times, values = _split(points)
    sigma, _ = volatility.sigma_one_second(times, values)
    assert sigma == pytest.approx(SIGMA, rel=0.2)


def test_on_a_brownian_path_the_measured_scale_is_about_one() -> None:
    times, values = _split(_path(4 * 3600, SIGMA, seed=5))
    scale, history_s = volatility.horizon_scale(times, values)
    assert history_s == 4 * 3600
    assert scale == pytest.approx(1.0, abs=0.2)


def test_a_short_history_is_shrunk_toward_one() -> None:
    """15 minutes hold three 5-minute intervals: the raw ratio is noise, the scale is not."""
    for seed in range(6, 16):
        times, values = _split(_path(900, SIGMA, seed))
        scale, _ = volatility.horizon_scale(times, values)
        assert 0.85 <= scale <= 1.2, seed


def test_noisy_one_second_returns_are_scaled_down() -> None:
    """Observation noise inflates 1-second variance but not 5-minute variance: the
    measured scale sees it and brings the model's sigma back toward the true one."""
    times, values = _split(_path(4 * 3600, SIGMA, seed=17, noise=SIGMA))
    scale = volatility.horizon_scale(times, values)
    estimate = volatility.estimate(times, values, scale)
    assert estimate is not None
    assert estimate.scale < 0.75
    assert estimate.sigma_1s > 1.4 * SIGMA  # what a fixed scale of 1 would have used
    assert abs(estimate.sigma - SIGMA) < abs(estimate.sigma_1s - SIGMA)
    assert estimate.sigma == pytest.approx(estimate.sigma_1s * math.sqrt(estimate.scale))


def test_no_estimate_until_enough_returns() -> None:
    times, values = _split(_path(volatility.MIN_RETURNS, SIGMA, seed=8))
    assert volatility.estimate(times, values, (1.0, 0)) is None  # one return short
    times, values = _split(_path(volatility.MIN_RETURNS + 1, SIGMA, seed=8))
    assert volatility.estimate(times, values, (1.0, 0)) is not None
    assert volatility.estimate([], [], (1.0, 0)) is None


def test_the_series_merges_late_points_in_order() -> None:
    """A history snapshot that arrives after live points (or a back-fill after a reconnect)
    gives the same series and the same estimate as points received in order."""
    points = _path(1200, SIGMA, seed=9)
    in_order, shuffled = PriceSeries(SPOT_HISTORY_S), PriceSeries(SPOT_HISTORY_S)
    for t, v in points:
        in_order.add(t, v)
    live, history = points[1000:], points[:1000]
    for t, v in live + history[::-1]:
        shuffled.add(t, v)
    shuffled.add(*points[500])  # a duplicate changes nothing
    assert shuffled.latest() == in_order.latest() == points[-1]
    assert shuffled.mean(points[0][0], points[-1][0]) == in_order.mean(points[0][0], points[-1][0])
    a, b = in_order.volatility(), shuffled.volatility()
    assert a is not None and b is not None
    assert b.sigma_1s == pytest.approx(a.sigma_1s, rel=1e-12)
    assert b.returns == a.returns == volatility.SIGMA_WINDOW_S


def test_coverage_sees_a_hole() -> None:
    series = PriceSeries()
    for t in [*range(0, 10), *range(15, 30)]:
        series.add(t * 1000, 100.0 + t)
    assert series.covered(0, 9000, 3000)
    assert not series.covered(0, 20_000, 3000)  # 9 s to 15 s: a hole
    assert series.covered(15_000, 29_000, 3000)
    assert not series.covered(15_000, 31_000, 3000)  # nothing at or after 31 s yet
    assert series.mean(4000, 6000) == pytest.approx(105.5)  # the points at 5 s and 6 s
    assert series.around(12_000) == ((9000, 109.0), (15_000, 115.0))


def test_a_reconnect_is_a_hole_until_a_history_snapshot_spans_it() -> None:
    """Points on both sides of T0 two seconds apart prove nothing after a reconnect: the
    point at T0 may have been missed. The history snapshot that spans the hole repairs it."""
    series = PriceSeries()
    for t in range(0, 10):
        series.add(t * 1000, 100.0 + t)
    series.connection_lost()
    assert series.has_gap(9000, 20_000)
    series.add(11_000, 111.0)  # the first live point after the reconnect
    assert series.has_gap(9000, 11_000) and not series.has_gap(0, 8000)
    assert not series.covered(5000, 11_000, 3000)
    series.merge([(t * 1000, 100.0 + t) for t in range(5, 12)])  # up to the present
    assert not series.has_gap(9000, 11_000)
    assert series.covered(5000, 11_000, 3000)
    assert series.around(10_000) == ((10_000, 110.0), (11_000, 111.0))
