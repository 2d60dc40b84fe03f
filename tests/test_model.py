"""``app.refresher.model``: the digital-option probability, its variance and the vol estimate."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest

from app.refresher.model import (
    SPOT,
    TWAP,
    RealizedVolatility,
    normal_cdf,
    percentages,
    probability_up,
    remaining_variance,
)

SIGMA = 0.5 / math.sqrt(365 * 24 * 3600)  # about 50% a year, per sqrt-second
RULES = (SPOT, TWAP)


# -- percentages ------------------------------------------------------------------------------


def _probabilities() -> list[float]:
    rng = random.Random(20240501)
    grid = [i / 100_000 for i in range(100_001)]
    randoms = [rng.random() for _ in range(20_000)]
    edges = [0.0, 1.0, 5e-324, 1 - 1e-16, 0.004999, 0.005, 0.005001, 0.995, 0.99499999, 1 / 3]
    return grid + randoms + edges


def test_percentages_add_up_to_exactly_100() -> None:
    failures = []
    for p in _probabilities():
        up, down = percentages(p)
        if up + down != 100.0 or not (0.0 <= up <= 100.0 and 0.0 <= down <= 100.0):
            failures.append((p, up, down))
    assert failures == []


def test_percentages_have_two_decimals_and_follow_p() -> None:
    previous_up = -1.0
    for i in range(0, 10_001):
        p = i / 10_000
        up, down = percentages(p)
        assert up == round(up, 2) and down == round(down, 2)
        assert abs(up - p * 100) <= 0.005 + 1e-9
        assert up >= previous_up  # monotone in p
        previous_up = up


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.0, (0.0, 100.0)),
        (1.0, (100.0, 0.0)),
        (0.5, (50.0, 50.0)),
        (0.123456, (12.35, 87.65)),
        (-0.25, (0.0, 100.0)),
        (1.75, (100.0, 0.0)),
    ],
)
def test_percentages_known_values_and_clamping(p: float, expected: tuple[float, float]) -> None:
    assert percentages(p) == expected


# -- normal distribution and probability_up ----------------------------------------------------


def test_normal_cdf_matches_the_standard_normal() -> None:
    reference = NormalDist()
    for i in range(-600, 601):
        x = i / 100
        assert normal_cdf(x) == pytest.approx(reference.cdf(x), abs=1e-12)
    assert normal_cdf(0.0) == 0.5
    assert normal_cdf(1.959963984540054) == pytest.approx(0.975, abs=1e-12)


def _cases() -> list[tuple[float, float, float, float]]:
    """(price, price_to_beat, tau_s, sigma) with price != price_to_beat."""
    rng = random.Random(7)
    cases = []
    for _ in range(2_000):
        k = rng.uniform(1_000, 200_000)
        s = k * math.exp(rng.choice((-1, 1)) * rng.uniform(1e-6, 0.02))
        tau = rng.choice((0.001, 1.0, 30.0, 60.0, 60.5, 299.999, 300.0, rng.uniform(0.01, 300)))
        sigma = rng.choice((SIGMA, 1e-5, 1e-3, rng.uniform(1e-6, 1e-3)))
        cases.append((s, k, tau, sigma))
    return cases


@pytest.mark.parametrize("rule", RULES)
def test_price_above_the_price_to_beat_means_up_is_more_likely(rule: str) -> None:
    for s, k, tau, sigma in _cases():
        p = probability_up(s, k, tau, sigma, rule)
        assert 0.0 <= p <= 1.0
        if s > k:
            assert p > 0.5, (s, k, tau, sigma)
        else:
            assert p < 0.5, (s, k, tau, sigma)
        # Mirror image: swapping S and K swaps up and down.
        assert probability_up(k, s, tau, sigma, rule) == pytest.approx(1.0 - p, abs=1e-12)


@pytest.mark.parametrize("rule", RULES)
def test_at_the_money_is_even(rule: str) -> None:
    for tau in (0.5, 10.0, 60.0, 120.0, 300.0):
        assert probability_up(95_000.0, 95_000.0, tau, SIGMA, rule) == 0.5


@pytest.mark.parametrize("rule", RULES)
def test_probability_grows_with_the_price(rule: str) -> None:
    prices = [94_000 + 10 * i for i in range(201)]
    values = [probability_up(s, 95_000.0, 120.0, SIGMA, rule) for s in prices]
    assert values == sorted(values)
    assert values[0] < 0.01 and values[-1] > 0.99


def test_probability_matches_the_formula() -> None:
    s, k, tau, sigma = 95_100.0, 95_000.0, 100.0, SIGMA
    expected = NormalDist().cdf(math.log(s / k) / (sigma * math.sqrt(tau)))
    assert probability_up(s, k, tau, sigma, SPOT) == pytest.approx(expected, abs=1e-12)
    twap = NormalDist().cdf(math.log(s / k) / (sigma * math.sqrt(tau - 40)))
    assert probability_up(s, k, tau, sigma, TWAP) == pytest.approx(twap, abs=1e-12)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("tau", [0.0, -0.001, -5.0])
def test_a_finished_window_is_decided(rule: str, tau: float) -> None:
    assert probability_up(95_000.01, 95_000.0, tau, SIGMA, rule) == 1.0
    assert probability_up(95_000.0, 95_000.0, tau, SIGMA, rule) == 1.0  # ties resolve UP
    assert probability_up(94_999.99, 95_000.0, tau, SIGMA, rule) == 0.0
    assert percentages(probability_up(95_000.0, 95_000.0, tau, SIGMA, rule)) == (100.0, 0.0)


def test_zero_volatility_is_decided_too() -> None:
    assert probability_up(101.0, 100.0, 120.0, 0.0) == 1.0
    assert probability_up(100.0, 100.0, 120.0, 0.0) == 1.0
    assert probability_up(99.0, 100.0, 120.0, 0.0) == 0.0


@pytest.mark.parametrize(("price", "price_to_beat"), [(0.0, 1.0), (1.0, 0.0), (-5.0, 1.0)])
def test_non_positive_prices_are_refused(price: float, price_to_beat: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        probability_up(price, price_to_beat, 60.0, SIGMA)


# -- remaining variance ----------------------------------------------------------------------


@pytest.mark.parametrize("tau", [60.001, 61.0, 100.0, 180.5, 299.0, 300.0, 1000.0])
def test_twap_variance_more_than_a_minute_before_the_end(tau: float) -> None:
    sigma = 3e-4
    assert remaining_variance(sigma, tau, TWAP) == pytest.approx(sigma**2 * (tau - 40), rel=1e-12)


@pytest.mark.parametrize("tau", [0.001, 1.0, 15.0, 30.0, 45.5, 59.999, 60.0])
def test_twap_variance_inside_the_last_minute(tau: float) -> None:
    sigma = 3e-4
    expected = sigma**2 * tau**3 / (3 * 3600)
    assert remaining_variance(sigma, tau, TWAP) == pytest.approx(expected, rel=1e-12)


def test_twap_variance_known_values_and_continuity() -> None:
    sigma = 1e-3
    assert remaining_variance(sigma, 300.0, TWAP) == pytest.approx(260e-6, rel=1e-12)
    assert remaining_variance(sigma, 30.0, TWAP) == pytest.approx(2.5e-6, rel=1e-12)
    assert remaining_variance(sigma, 60.0, TWAP) == pytest.approx(20e-6, rel=1e-12)
    # The two branches meet at 60 s: no jump in P(up) when the last minute starts.
    just_above = remaining_variance(sigma, 60.0 + 1e-9, TWAP)
    assert just_above == pytest.approx(remaining_variance(sigma, 60.0, TWAP), rel=1e-6)


def test_spot_variance_and_twap_is_never_larger() -> None:
    sigma = 2e-4
    for i in range(1, 3001):
        tau = i / 10
        spot = remaining_variance(sigma, tau, SPOT)
        assert spot == pytest.approx(sigma**2 * tau, rel=1e-12)
        assert remaining_variance(sigma, tau, TWAP) <= spot


@pytest.mark.parametrize("rule", RULES)
def test_variance_is_zero_at_or_after_the_end(rule: str) -> None:
    assert remaining_variance(1e-3, 0.0, rule) == 0.0
    assert remaining_variance(1e-3, -10.0, rule) == 0.0


# -- realized volatility ----------------------------------------------------------------------


def _walk(sigma: float, steps: int, dt: float, seed: int, start: float = 95_000.0) -> list[float]:
    rng = random.Random(seed)
    prices = [start]
    for _ in range(steps):
        prices.append(prices[-1] * math.exp(rng.gauss(0.0, sigma * math.sqrt(dt))))
    return prices


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("sigma", [SIGMA, 1e-5, 5e-4])
def test_recovers_a_known_sigma_from_a_random_walk(seed: int, sigma: float) -> None:
    vol = RealizedVolatility()
    for t, price in enumerate(_walk(sigma, 900, 1.0, seed)):
        vol.add(float(t), price)

    assert vol.samples == 900
    assert vol.sigma() == pytest.approx(sigma, rel=0.10)


def test_returns_are_scaled_per_second_when_samples_are_sparse() -> None:
    vol = RealizedVolatility()
    for i, price in enumerate(_walk(SIGMA, 600, 5.0, seed=11)):
        vol.add(i * 5.0, price)

    assert vol.sigma() == pytest.approx(SIGMA, rel=0.10)


def test_samples_closer_than_a_second_are_skipped() -> None:
    vol = RealizedVolatility()
    for i, price in enumerate(_walk(SIGMA, 4 * 900, 0.25, seed=12)):
        vol.add(i * 0.25, price)

    assert vol.samples == 900
    assert vol.sigma() == pytest.approx(SIGMA, rel=0.10)


def test_the_window_forgets_old_returns() -> None:
    vol = RealizedVolatility(window=300)
    calm = _walk(1e-5, 300, 1.0, seed=21)
    wild = _walk(4e-4, 300, 1.0, seed=22, start=calm[-1])
    for t, price in enumerate(calm + wild[1:]):
        vol.add(float(t), price)

    assert vol.samples == 300
    assert vol.sigma() == pytest.approx(4e-4, rel=0.10)


def test_fallback_until_thirty_returns() -> None:
    vol = RealizedVolatility(fallback=0.123)
    prices = _walk(1e-4, 40, 1.0, seed=3)
    for t, price in enumerate(prices[:30]):
        vol.add(float(t), price)
    assert vol.samples == 29
    assert vol.sigma() == 0.123

    vol.add(30.0, prices[30])
    assert vol.samples == 30
    assert vol.sigma() == pytest.approx(1e-4, rel=0.5)
    assert vol.sigma() != 0.123


def test_non_positive_prices_are_ignored() -> None:
    vol = RealizedVolatility()
    for t, price in enumerate(_walk(SIGMA, 100, 1.0, seed=4)):
        vol.add(float(t), price)
        vol.add(t + 0.5, 0.0)
        vol.add(t + 0.6, -1.0)

    assert vol.samples == 100
    assert math.isfinite(vol.sigma())
    assert vol.sigma() == pytest.approx(SIGMA, rel=0.25)


def test_scale_multiplies_the_variance() -> None:
    plain, scaled = RealizedVolatility(), RealizedVolatility(scale=4.0)
    for t, price in enumerate(_walk(SIGMA, 200, 1.0, seed=5)):
        plain.add(float(t), price)
        scaled.add(float(t), price)

    assert scaled.sigma() == pytest.approx(2 * plain.sigma(), rel=1e-9)
