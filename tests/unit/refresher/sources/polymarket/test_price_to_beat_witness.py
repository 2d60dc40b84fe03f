"""The witnesses of a price to beat (issue 35, point 3): the settlement stream's own points.

Each bound is stated here as a number (docs/price-to-beat.md derives them); the fault suite
(tests/integration/faults/test_price_to_beat_witness.py) plays the attacks through the fakes.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from app.refresher.sources.polymarket.gamma import WindowMarket
from app.refresher.sources.polymarket.price_series import SPOT_HISTORY_S, PriceSeries
from app.refresher.sources.polymarket.price_to_beat_witness import (
    second_mean,
    sigma_of,
    spot_witness,
    twap_witness,
)
from app.refresher.sources.polymarket.rtds import SPOT_KEY
from app.refresher.volatility import Volatility
from harness.spans import FIVE_MINUTES
from tests.support.live_source import BTC_ONLY

T0 = 1_800_000_000
T0_MS = T0 * 1000
BTC = 100_000.0
SIGMA = 1.2e-4  # per root second: the fault suite's path
MAX_GAP_MS = 3000


def _spot(seconds: range, value: float = BTC) -> PriceSeries:
    """A spot series with one point per second (relative to T0) at ``value``."""
    series = PriceSeries(SPOT_HISTORY_S, clock=lambda: T0 + 400.0)
    for t in seconds:
        series.add((T0 + t) * 1000, value)
    return series


def _walk(seconds: range, seed: int = 35) -> PriceSeries:
    """A Brownian spot at ``SIGMA``, one point per second."""
    rng = random.Random(seed)
    series = PriceSeries(SPOT_HISTORY_S, clock=lambda: T0 + 400.0)
    log_price = math.log(BTC)
    for t in seconds:
        log_price += rng.gauss(0.0, SIGMA)
        series.add((T0 + t) * 1000, math.exp(log_price))
    return series


# -- a spot window: the stream's value at T0, else a bridge across its hole ------------------


def test_a_point_at_t0_is_its_own_witness_within_10_bp() -> None:
    witness = spot_witness(_spot(range(-5, 6)), T0_MS, SIGMA)
    assert witness is not None and witness.value == BTC
    assert witness.bound == pytest.approx(0.001)
    assert witness.admits(BTC + 90) and not witness.admits(BTC * 1.0011)


def test_half_a_percent_across_a_hole_of_60_s_each_side_is_refused() -> None:
    """The issue's row: the old bound grew with the distance to the nearer side (0.57 % at
    60 s); the bridge between both sides allows 0.36 % at the hole's middle."""
    spot = _spot(range(-300, -59))
    for t in range(60, 100):
        spot.add((T0 + t) * 1000, BTC)
    witness = spot_witness(spot, T0_MS, SIGMA)
    assert witness is not None
    assert 0.0036 < witness.bound < 0.0037
    assert not witness.admits(BTC * 1.005) and not witness.admits(BTC * 1.004)
    assert witness.admits(BTC * 1.003) and witness.admits(BTC * 0.997)
    assert "hole of 120 s" in witness.reason(BTC * 1.005, "gamma")


@pytest.mark.parametrize("hole_s", [120, 600, 3600])
def test_the_bound_never_grows_past_what_the_hole_allows(hole_s: int) -> None:
    """Wherever T0 falls in a hole, the bound is at most that of its middle: 0.1 % + 4 sd
    of a bridge over the hole (0.36 % for 120 s, 0.69 % for 600 s, 1.54 % for an hour at
    sigma 1.2e-4), and near a side it is that side's: 2 s after the last point before T0,
    0.17 % whatever the hole."""
    largest = {120: 0.00363, 600: 0.00688, 3600: 0.0154}[hole_s]
    for before_s in range(1, hole_s, max(1, hole_s // 37)):
        spot = _spot(range(-before_s - 5, -before_s + 1))
        spot.add((T0 - before_s + hole_s) * 1000, BTC)
        witness = spot_witness(spot, T0_MS, SIGMA)
        assert witness is not None and witness.bound <= largest, before_s
    spot = _spot(range(-10, -1))
    spot.add((T0 - 2 + hole_s) * 1000, BTC)
    near = spot_witness(spot, T0_MS, SIGMA)
    assert near is not None and near.bound < 0.0017


def test_the_bridge_centres_on_both_sides() -> None:
    """Halfway between 100,000 and 101,000 the witness is their geometric mean."""
    spot = _spot(range(-40, -29))
    spot.add((T0 + 30) * 1000, 101_000.0)
    witness = spot_witness(spot, T0_MS, SIGMA)
    assert witness is not None
    assert witness.value == pytest.approx(math.sqrt(BTC * 101_000.0))


def test_points_on_one_side_only_witness_within_30_s() -> None:
    """The stream stopped before T0 (or our history starts after it): the nearest point
    within 30 s, with the bound of a Brownian move over that distance (0.31 % at 20 s)."""
    witness = spot_witness(_spot(range(-60, -19)), T0_MS, SIGMA)
    assert witness is not None and 0.0031 < witness.bound < 0.0032
    assert spot_witness(_spot(range(-60, -30)), T0_MS, SIGMA) is None
    assert spot_witness(_spot(range(31, 60)), T0_MS, SIGMA) is None
    assert spot_witness(_spot(range(0, 0)), T0_MS, SIGMA) is None


def test_the_one_sided_limit_holds_at_exactly_30_s_and_not_a_millisecond_beyond() -> None:
    """At its edge: a point 30 s from T0 witnesses it (0.1 % + 4 sigma root 30 s: 0.363 %), on
    either side; one 30.001 s away does not."""
    for side in (-1, 1):
        witness = spot_witness(_spot(range(30 * side, 30 * side + 1)), T0_MS, SIGMA)
        assert witness is not None, side
        assert witness.bound == pytest.approx(0.001 + 4 * SIGMA * math.sqrt(30), rel=1e-12)
        beyond = _spot(range(0, 0))
        beyond.add(T0_MS + side * 30_001, BTC)
        beyond.add(T0_MS + side * 30_001 + side * 1000, BTC)
        assert spot_witness(beyond, T0_MS, SIGMA) is None, side


# -- a TWAP window: the report at T0 against the spot's own mean -----------------------------


def test_a_twap_report_is_witnessed_by_the_spots_own_mean_within_0_16_percent() -> None:
    spot = _walk(range(-120, 10))
    witness = twap_witness(spot, T0_MS, 60, SIGMA, MAX_GAP_MS)
    assert witness is not None
    mean = math.fsum(v for v in (spot.at((T0 + t) * 1000, 0) for t in range(-59, 1)) if v) / 60
    assert witness.value == pytest.approx(mean, rel=1e-15)
    assert 0.0016 < witness.bound < 0.0017
    assert witness.admits(mean * 1.001)
    assert not witness.admits(mean * 1.01) and not witness.admits(mean * 0.99)


def test_a_twap_report_has_only_a_coarse_witness_while_the_spot_has_a_hole_in_its_lookback() -> (
    None
):
    spot = _walk(range(-120, 10))
    holey = PriceSeries(SPOT_HISTORY_S, clock=lambda: T0 + 400.0)
    for t in [*range(-120, -40), *range(-30, 10)]:
        value = spot.at((T0 + t) * 1000, 0)
        assert value is not None
        holey.add((T0 + t) * 1000, value)
    assert twap_witness(holey, T0_MS, 60, SIGMA, MAX_GAP_MS) is None
    # Coarsely, the seconds it has: within 0.1 % + 4 sd of the move over 60 s (0.47 %).
    coarse = twap_witness(holey, T0_MS, 60, SIGMA, MAX_GAP_MS, partial=True)
    assert coarse is not None and 0.0047 < coarse.bound < 0.0048
    assert not coarse.admits(coarse.value * 1.01) and coarse.admits(coarse.value * 1.004)
    nothing = _walk(range(-120, -80))
    assert twap_witness(nothing, T0_MS, 60, SIGMA, MAX_GAP_MS, partial=True) is None
    # The last 3 s may still be on their way: the witness does not wait for them.
    assert twap_witness(_walk(range(-120, -2)), T0_MS, 60, SIGMA, MAX_GAP_MS) is not None


def test_the_mean_counts_seconds_not_points() -> None:
    """Five points a second in the last 10 s weigh no more than their 10 seconds."""
    spot = _spot(range(-70, -9), BTC)
    for k in range(50):
        spot.add(T0_MS - 9_800 + 200 * k, BTC + 600)
    assert second_mean(spot, T0_MS, 60, MAX_GAP_MS) == pytest.approx(BTC + 100)


def test_sigma_counts_the_jumps_and_falls_back_without_an_estimate() -> None:
    estimate = Volatility(
        sigma=1.0e-4, sigma_1s=1.0e-4, scale=1.0, returns=900, history_s=900,
        jump_rate=0.01, jump_var=3.0e-6,
    )  # fmt: skip
    assert sigma_of(estimate) == pytest.approx(math.sqrt(1.0e-8 + 3.0e-8))
    assert sigma_of(None) == pytest.approx(1.2e-4)


# -- the source: refused, stale with the reason, then the spot's mean ------------------------


def test_a_twap_report_the_spot_does_not_witness_is_refused_until_the_topic_agrees() -> None:
    """The report at T0 1 % high: no price to beat, the row stale with the reason; once the
    topic's latest report agrees with the spot again, the spot's own mean is the price to
    beat (the settlement stream's own points)."""
    from app.refresher.sources.polymarket.source import PolymarketSource, Upstreams

    nowhere = "http://127.0.0.1:9"
    source = PolymarketSource(
        Upstreams(nowhere, nowhere, "ws://127.0.0.1:9", "ws://127.0.0.1:9", nowhere),
        BTC_ONLY,
        clock=lambda: T0 + 12.0,
        background=False,
    )
    try:
        coin = BTC_ONLY[0]
        walk = _walk(range(-900, 14))
        series = source.rtds.of(coin)
        spot, twap = series[SPOT_KEY], series["twap60"]

        def spot_until(last: int) -> dict[int, float]:
            """The walk's spot up to T0 + ``last``; the spot's means up to each second."""
            for t in range(-900, last + 1):
                value = walk.at((T0 + t) * 1000, 0)
                assert value is not None
                spot.add((T0 + t) * 1000, value)
            means = {
                t: second_mean(spot, (T0 + t) * 1000, 60, MAX_GAP_MS) for t in range(-3, last + 1)
            }
            return {t: mean for t, mean in means.items() if mean is not None}

        means = spot_until(12)
        for t in range(-3, 13):
            twap.add((T0 + t) * 1000, means[t] * 1.01)  # the whole topic 1 % high
        market = WindowMarket(
            T0, "btc-updown-5m", "up", "down", "twap", 60, None, None, FIVE_MINUTES
        )
        window = source.windows.get(coin, T0, FIVE_MINUTES)
        window.market = market
        source.price_to_beat.latch(window, T0 + 12.0)
        assert window.price_to_beat is None
        [reason] = window.doubts.values()
        assert "crypto_prices_twap_sixty" in reason and "+1.000 %" in reason
        [row] = source.rows(T0 + 12.0)
        # (Beside, possibly, the market's own doubt: this market has no conditionId to check.)
        assert reason in row.as_json()["suspect"]
        assert row.as_json()["priceToBeat"] is None

        means = spot_until(13)
        twap.add((T0 + 13) * 1000, means[13])  # the topic agrees with the spot again
        source.price_to_beat.latch(window, T0 + 13.0)
        assert window.final
        assert "price_to_beat" not in window.doubts  # its doubt about the price to beat is gone
        assert window.price_to_beat == pytest.approx(means[0], rel=1e-12)
        assert window.price_to_beat_via == "rtds:crypto_prices_chainlink:mean60s"
    finally:
        source.close()


def test_a_twap_report_waits_for_the_spots_history() -> None:
    """The TWAP topic's history came first (the spot's history may come after its live
    points): with no spot before the lookback, the report waits for its witness."""
    from app.refresher.sources.polymarket.source import PolymarketSource, Upstreams

    nowhere = "http://127.0.0.1:9"
    source = PolymarketSource(
        Upstreams(nowhere, nowhere, "ws://127.0.0.1:9", "ws://127.0.0.1:9", nowhere),
        BTC_ONLY,
        clock=lambda: T0 + 30.0,
        background=False,
    )
    try:
        coin = BTC_ONLY[0]
        series = source.rtds.of(coin)
        for t in range(20, 30):  # live spot points only
            series[SPOT_KEY].add((T0 + t) * 1000, BTC)
        for t in range(-3, 30):
            series["twap60"].add((T0 + t) * 1000, BTC * 1.01)
        market = WindowMarket(
            T0, "btc-updown-5m", "up", "down", "twap", 60, None, None, FIVE_MINUTES
        )
        window = source.windows.get(coin, T0, FIVE_MINUTES)
        window.market = market
        source.price_to_beat.latch(window, T0 + 30.0)
        assert window.price_to_beat is None and window.doubts == {}

        for t in range(-900, 20):  # the spot's history: the report is judged, and refused
            series[SPOT_KEY].add((T0 + t) * 1000, BTC)
        source.price_to_beat.latch(window, T0 + 30.0)
        assert window.price_to_beat is None and "+1.000 %" in window.doubts["price_to_beat"]
    finally:
        source.close()


def _twap_source(now: list[float]) -> Any:
    from app.refresher.sources.polymarket.source import PolymarketSource, Upstreams

    nowhere = "http://127.0.0.1:9"
    return PolymarketSource(
        Upstreams(nowhere, nowhere, "ws://127.0.0.1:9", "ws://127.0.0.1:9", nowhere),
        BTC_ONLY,
        clock=lambda: now[0],
        background=False,
    )


@pytest.mark.parametrize("t0_report_comes", [True, False])
def test_the_price_to_beat_is_the_report_stamped_t0_even_when_a_later_one_comes_first(
    t0_report_comes: bool,
) -> None:
    """Issue 37: around T0 the report for T0 can arrive 2.6-3.1 s late, after the report for
    T0 + 1 s. The price to beat waits for it rather than latch the next second's (from 5 s
    the spot's own mean stands in, provisional); only a T0 report that never comes (8 s)
    lets the next one be final."""
    now = [T0 + 3.0]
    source = _twap_source(now)
    try:
        from app.refresher.sources.polymarket.price_to_beat import T0_REPORT_WAIT_S

        coin = BTC_ONLY[0]
        walk = _walk(range(-900, 12))
        series = source.rtds.of(coin)
        spot, twap = series[SPOT_KEY], series["twap60"]
        for t in range(-900, 12):
            value = walk.at((T0 + t) * 1000, 0)
            assert value is not None
            spot.add((T0 + t) * 1000, value)
        means = {t: second_mean(spot, (T0 + t) * 1000, 60, MAX_GAP_MS) for t in range(-3, 12)}
        for t in (-3, -2, -1, 1):  # T0 + 1 s before T0's own report
            twap.add((T0 + t) * 1000, means[t])
        assert means[1] != means[0]
        market = WindowMarket(
            T0, "btc-updown-5m", "up", "down", "twap", 60, None, None, FIVE_MINUTES
        )
        window = source.windows.get(coin, T0, FIVE_MINUTES)
        window.market = market
        source.price_to_beat.latch(window, now[0])
        assert window.price_to_beat is None  # not the next second's report
        for t in range(2, 6):
            twap.add((T0 + t) * 1000, means[t])
        if t0_report_comes:
            twap.add(T0_MS, means[0])  # 3 s late
            now[0] = T0 + 5.5
            source.price_to_beat.latch(window, now[0])
            assert window.price_to_beat == means[0] and window.final
        else:
            now[0] = T0 + T0_REPORT_WAIT_S - 0.5
            source.price_to_beat.latch(window, now[0])
            assert not window.final  # at most the spot's own mean, provisional (after 5 s)
            now[0] = T0 + T0_REPORT_WAIT_S
            source.price_to_beat.latch(window, now[0])
            assert window.price_to_beat == means[1]  # the T0 report never came: the next
        assert window.price_to_beat_via == "rtds:crypto_prices_twap_sixty"
    finally:
        source.close()
