"""``app.refresher.model``: the digital-option probability, its variance and the vol estimate."""

from __future__ import annotations

import functools
import math
import random
from statistics import NormalDist

import pytest

from app.refresher.model import (
    P_FLOOR,
    SPOT,
    TWAP,
    RealizedVolatility,
    normal_cdf,
    percentages,
    probability_up,
    remaining_variance,
    settlement_centre,
)

SIGMA = 0.5 / math.sqrt(365 * 24 * 3600)  # about 50% a year, per sqrt-second
RULES = (SPOT, TWAP)


def _p(s: float, k: float, tau: float, sigma: float, rule: str = SPOT) -> float:
    """P(up) with the spot as the centre: a 60-second TWAP whose observed mean equals S."""
    if rule == TWAP:
        return probability_up(s, k, tau, sigma, TWAP, 60.0, known_mean=s)
    return probability_up(s, k, tau, sigma, rule)


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
        p = _p(s, k, tau, sigma, rule)
        assert 0.0 <= p <= 1.0
        if s > k:
            assert p > 0.5, (s, k, tau, sigma)
        else:
            assert p < 0.5, (s, k, tau, sigma)
        # Mirror image: swapping S and K swaps up and down.
        assert _p(k, s, tau, sigma, rule) == pytest.approx(1.0 - p, abs=1e-12)


@pytest.mark.parametrize("rule", RULES)
def test_at_the_money_is_even(rule: str) -> None:
    for tau in (0.5, 10.0, 60.0, 120.0, 300.0):
        assert _p(95_000.0, 95_000.0, tau, SIGMA, rule) == 0.5


@pytest.mark.parametrize("rule", RULES)
def test_probability_grows_with_the_price(rule: str) -> None:
    prices = [94_000 + 10 * i for i in range(201)]
    values = [_p(s, 95_000.0, 120.0, SIGMA, rule) for s in prices]
    assert values == sorted(values)
    assert values[0] < 0.01 and values[-1] > 0.99


def test_probability_matches_the_formula() -> None:
    s, k, tau, sigma = 95_100.0, 95_000.0, 100.0, SIGMA
    expected = NormalDist().cdf(math.log(s / k) / (sigma * math.sqrt(tau)))
    assert _p(s, k, tau, sigma, SPOT) == pytest.approx(expected, abs=1e-12)
    twap = NormalDist().cdf(math.log(s / k) / (sigma * math.sqrt(tau - 40)))
    assert _p(s, k, tau, sigma, TWAP) == pytest.approx(twap, abs=1e-12)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("tau", [0.0, -0.001, -5.0])
def test_a_finished_window_is_decided(rule: str, tau: float) -> None:
    assert _p(95_000.01, 95_000.0, tau, SIGMA, rule) == 1.0
    assert _p(95_000.0, 95_000.0, tau, SIGMA, rule) == 1.0  # ties resolve UP
    assert _p(94_999.99, 95_000.0, tau, SIGMA, rule) == 0.0
    assert percentages(_p(95_000.0, 95_000.0, tau, SIGMA, rule)) == (100.0, 0.0)


def test_zero_volatility_is_decided_too() -> None:
    assert _p(101.0, 100.0, 120.0, 0.0) == 1.0
    assert _p(100.0, 100.0, 120.0, 0.0) == 1.0
    assert _p(99.0, 100.0, 120.0, 0.0) == 0.0


@pytest.mark.parametrize(("price", "price_to_beat"), [(0.0, 1.0), (1.0, 0.0), (-5.0, 1.0)])
def test_non_positive_prices_are_refused(price: float, price_to_beat: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        _p(price, price_to_beat, 60.0, SIGMA)


# -- remaining variance ----------------------------------------------------------------------


@pytest.mark.parametrize("tau", [60.001, 61.0, 100.0, 180.5, 299.0, 300.0, 1000.0])
def test_twap_variance_more_than_a_minute_before_the_end(tau: float) -> None:
    sigma = 3e-4
    assert remaining_variance(sigma, tau, TWAP, 60.0) == pytest.approx(
        sigma**2 * (tau - 40), rel=1e-12
    )


@pytest.mark.parametrize("tau", [0.001, 1.0, 15.0, 30.0, 45.5, 59.999, 60.0])
def test_twap_variance_inside_the_last_minute(tau: float) -> None:
    sigma = 3e-4
    expected = sigma**2 * tau**3 / (3 * 3600)
    assert remaining_variance(sigma, tau, TWAP, 60.0) == pytest.approx(expected, rel=1e-12)


def test_twap_variance_known_values_and_continuity() -> None:
    sigma = 1e-3
    assert remaining_variance(sigma, 300.0, TWAP, 60.0) == pytest.approx(260e-6, rel=1e-12)
    assert remaining_variance(sigma, 30.0, TWAP, 60.0) == pytest.approx(2.5e-6, rel=1e-12)
    assert remaining_variance(sigma, 60.0, TWAP, 60.0) == pytest.approx(20e-6, rel=1e-12)
    # The two branches meet at 60 s: no jump in P(up) when the last minute starts.
    just_above = remaining_variance(sigma, 60.0 + 1e-9, TWAP, 60.0)
    assert just_above == pytest.approx(remaining_variance(sigma, 60.0, TWAP, 60.0), rel=1e-6)


def test_spot_variance_and_twap_is_never_larger() -> None:
    sigma = 2e-4
    for i in range(1, 3001):
        tau = i / 10
        spot = remaining_variance(sigma, tau, SPOT)
        assert spot == pytest.approx(sigma**2 * tau, rel=1e-12)
        assert remaining_variance(sigma, tau, TWAP, 60.0) <= spot


@pytest.mark.parametrize("rule", RULES)
def test_variance_is_zero_at_or_after_the_end(rule: str) -> None:
    assert remaining_variance(1e-3, 0.0, rule, 60.0) == 0.0
    assert remaining_variance(1e-3, -10.0, rule, 60.0) == 0.0


@pytest.mark.parametrize("lookback", [30.0, 60.0])
def test_twap_variance_follows_the_markets_lookback(lookback: float) -> None:
    sigma = 1e-3
    assert remaining_variance(sigma, 200.0, TWAP, lookback) == pytest.approx(
        sigma**2 * (200.0 - 2 * lookback / 3), rel=1e-12
    )
    assert remaining_variance(sigma, 20.0, TWAP, lookback) == pytest.approx(
        sigma**2 * 20.0**3 / (3 * lookback**2), rel=1e-12
    )
    # Continuous where the two branches meet, whatever the lookback.
    assert remaining_variance(sigma, lookback + 1e-9, TWAP, lookback) == pytest.approx(
        remaining_variance(sigma, lookback, TWAP, lookback), rel=1e-6
    )


@pytest.mark.parametrize("lookback", [None, 0.0, -60.0, math.nan])
def test_a_twap_without_a_lookback_is_refused(lookback: float | None) -> None:
    """The lookback is never assumed: markets have settled on 30 s and on 60 s."""
    with pytest.raises(ValueError, match="lookback"):
        remaining_variance(1e-4, 100.0, TWAP, lookback)


def test_inside_the_lookback_the_centre_blends_the_known_mean_and_the_spot() -> None:
    # 45 of 60 seconds averaged at 100, spot now 104: centre = 0.75 * 100 + 0.25 * 104.
    assert settlement_centre(104.0, 15.0, TWAP, 60.0, 100.0) == pytest.approx(101.0)
    assert settlement_centre(104.0, 60.0, TWAP, 60.0, 100.0) == 104.0  # nothing averaged yet
    assert settlement_centre(104.0, 0.0, TWAP, 60.0, 100.0) == pytest.approx(100.0)
    assert settlement_centre(104.0, 15.0, SPOT, None, 100.0) == 104.0
    with pytest.raises(ValueError, match="mean"):
        settlement_centre(104.0, 15.0, TWAP, 60.0, None)
    # The spot above K but the known average far below it: DOWN is likely with 10 s left.
    p = probability_up(100_050.0, 100_000.0, 10.0, 1.2e-4, TWAP, 60.0, known_mean=99_900.0)
    assert p < 0.01


def _settles_up(
    rng: random.Random,
    s: float,
    k: float,
    tau: float,
    sigma: float,
    rule: str,
    lookback: float,
    known_mean: float,
    dt: float,
) -> bool:
    """One continuation of a Brownian log price on a fine grid, settled by the rule."""
    steps = round(tau / dt)
    x = math.log(s)
    step_sd = sigma * math.sqrt(dt)
    if rule == SPOT:
        return x + rng.gauss(0.0, step_sd * math.sqrt(steps)) >= math.log(k)
    averaged_before = max(0.0, lookback - tau)  # seconds of the average already known
    total = known_mean * averaged_before
    # The steps before the average's span add up to one Gaussian step (the same law, drawn
    # once): only the span's own steps are walked.
    before = _steps_before_the_average(steps, tau, lookback, dt)
    if before:
        x += rng.gauss(0.0, step_sd * math.sqrt(before))
    for i in range(before + 1, steps + 1):
        x += rng.gauss(0.0, step_sd)
        if tau - i * dt < lookback:
            total += math.exp(x) * dt
    return total / lookback >= k


@functools.cache  # the same count for every path of a case
def _steps_before_the_average(steps: int, tau: float, lookback: float, dt: float) -> int:
    """How many of the first steps end before the average's span (``tau - i dt >= lookback``)."""
    return sum(1 for i in range(1, steps + 1) if tau - i * dt >= lookback)


@pytest.mark.parametrize(
    ("rule", "lookback", "tau", "moneyness", "known"),
    [
        (SPOT, 60.0, 240.0, 1.0005, 0.0),
        (SPOT, 60.0, 20.0, 0.9998, 0.0),
        (TWAP, 60.0, 290.0, 1.0006, 0.0),
        (TWAP, 60.0, 120.0, 0.9995, 0.0),
        (TWAP, 60.0, 45.0, 1.0001, -0.0003),
        (TWAP, 60.0, 10.0, 1.0001, -0.00001),
        (TWAP, 30.0, 200.0, 0.9994, 0.0),
        (TWAP, 30.0, 25.0, 1.0002, 0.0001),
        # The 4-hour and hourly kinds' times left (issue 49, point 3): the same model.
        (TWAP, 60.0, 14_400.0, 1.003, 0.0),
        (TWAP, 60.0, 3_600.0, 0.999, 0.0),
        (SPOT, 60.0, 7_200.0, 0.998, 0.0),
    ],
)
def test_probability_is_the_frequency_of_up_on_simulated_paths(
    rule: str, lookback: float, tau: float, moneyness: float, known: float
) -> None:
    """Exact answers by simulation: the model's P(up) against the share of Brownian
    continuations (0.25 s steps, sigma known) that settle UP under the rule."""
    sigma, k = 1.2e-4, 100_000.0
    s = k * moneyness
    known_mean = k * (1.0 + known) if tau < lookback else s
    model = probability_up(s, k, tau, sigma, rule, lookback, known_mean=known_mean)
    assert 0.05 < model < 0.95  # a case that tests something, not a decided window
    rng = random.Random(f"{rule}{lookback}{tau}")
    n = 4000
    ups = sum(
        _settles_up(rng, s, k, tau, sigma, rule, lookback, known_mean, 0.25) for _ in range(n)
    )
    # Four standard errors of the simulated frequency (at most 0.8 point each).
    assert ups / n == pytest.approx(model, abs=4 * math.sqrt(0.25 / n))


def test_the_twap_rule_is_not_the_spot_rule_on_simulated_paths() -> None:
    """The same state under both rules gives different answers, and the simulation sees it:
    with 20 s left and the minute's average below K, the spot rule would say UP."""
    sigma, k, s, tau = 1.2e-4, 100_000.0, 100_030.0, 20.0
    twap = probability_up(s, k, tau, sigma, TWAP, 60.0, known_mean=99_970.0)
    spot = probability_up(s, k, tau, sigma, SPOT)
    assert spot > 0.7 and twap < 0.3
    rng = random.Random(99)
    n = 2000
    ups = sum(_settles_up(rng, s, k, tau, sigma, TWAP, 60.0, 99_970.0, 0.25) for _ in range(n))
    assert ups / n == pytest.approx(twap, abs=4 * math.sqrt(0.25 / n))


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


# -- jumps: Merton's mixture against simulation -----------------------------------------------


def _settles_up_with_jumps(
    rng: random.Random,
    s: float,
    k: float,
    tau: float,
    sigma: float,
    jump_rate: float,
    jump_sd: float,
    rule: str,
    lookback: float,
    dt: float = 0.5,
) -> bool:
    """One continuation of a jump-diffusion log price (Poisson jumps, Gaussian sizes) on a
    grid of ``dt``, settled by the rule (the TWAP's known part equal to ``s``)."""
    steps = round(tau / dt)
    x = math.log(s)
    averaged_before = max(0.0, lookback - tau)
    total = s * averaged_before
    # The steps that no average sees add up at once: their diffusion is one Gaussian step,
    # their jumps a binomial count of Gaussian sizes (the same law as step by step).
    before = steps if rule == SPOT else _steps_before_the_average(steps, tau, lookback, dt)
    if before:
        jumps = sum(1 for _ in range(before) if rng.random() < jump_rate * dt)
        x += rng.gauss(0.0, sigma * math.sqrt(dt * before))
        if jumps:
            x += rng.gauss(0.0, jump_sd * math.sqrt(jumps))
    for i in range(before + 1, steps + 1):
        x += rng.gauss(0.0, sigma * math.sqrt(dt))
        if rng.random() < jump_rate * dt:
            x += rng.gauss(0.0, jump_sd)
        if rule == TWAP and tau - i * dt < lookback:
            total += math.exp(x) * dt
    if rule == SPOT:
        return x >= math.log(k)
    return total / lookback >= k


@pytest.mark.parametrize(
    ("rule", "tau", "moneyness"),
    [
        (SPOT, 5.0, 1.0003),  # the last seconds: a jump is the only way back
        (SPOT, 30.0, 0.9996),
        (SPOT, 120.0, 1.0008),
        (TWAP, 200.0, 1.0008),
        (TWAP, 40.0, 0.9997),
    ],
)
def test_jump_probability_is_the_frequency_of_up_on_jump_diffusion_paths(
    rule: str, tau: float, moneyness: float
) -> None:
    """A jump-diffusion with known parameters (one jump a minute, 8 sigma-seconds in size):
    the model's P(up) is the share of simulated continuations that settle UP, within four
    standard errors; the plain Gaussian is visibly off in the same cases."""
    sigma, k, jump_rate, jump_sd = 1.0e-4, 100_000.0, 1 / 60, 8e-4
    s = k * moneyness
    known = s if rule == TWAP and tau < 60 else None
    model = probability_up(
        s, k, tau, sigma, rule, 60.0, known, jump_rate=jump_rate, jump_var=jump_sd**2
    )
    assert 0.02 < model < 0.98
    rng = random.Random(f"jumps{rule}{tau}")
    n = 4000
    ups = sum(
        _settles_up_with_jumps(rng, s, k, tau, sigma, jump_rate, jump_sd, rule, 60.0)
        for _ in range(n)
    )
    se = math.sqrt(model * (1 - model) / n)
    assert ups / n == pytest.approx(model, abs=4 * se + 0.002)
    plain = probability_up(s, k, tau, sigma, rule, 60.0, known)
    assert abs(plain - ups / n) > abs(model - ups / n)


def test_no_jumps_is_the_plain_formula_and_an_open_window_is_never_certain() -> None:
    s, k = 100_500.0, 100_000.0
    plain = probability_up(s, k, 60.0, 1e-4, SPOT)
    assert probability_up(s, k, 60.0, 1e-4, SPOT, jump_rate=0.0, jump_var=1e-6) == plain
    assert probability_up(s, k, 60.0, 1e-4, SPOT, jump_rate=0.1, jump_var=0.0) == plain
    # Far from the price to beat with seconds left: the floor, not 100 %.
    assert probability_up(s, k, 2.0, 1e-5, SPOT) == 1 - P_FLOOR
    assert probability_up(k, s, 2.0, 1e-5, SPOT) == P_FLOOR
    assert percentages(probability_up(s, k, 2.0, 1e-5, SPOT)) == (99.9, 0.1)
    # Decided: the floor does not apply.
    assert probability_up(s, k, 0.0, 1e-5, SPOT, jump_rate=0.1, jump_var=1e-6) == 1.0
