"""The settlement-feed stand-in: its days measure like the real feed's, and a seed is a path.

Four generated days (one path, fixed seed: nothing here can flake) are measured as the real
days were (``harness.feed_stats``) and each figure is held to the range measured on the two
real days (../shared/upstream.md, "The feed is SMOOTHED"): the mean of the four days inside
the range, and every single day inside it widened by the tolerance below (a day's estimate
has sampling noise of its own, larger than two real days could show).
"""

from __future__ import annotations

import itertools
import math
import statistics
import threading
from decimal import Decimal, localcontext

import pytest

from harness.feed_stats import TARGETS
from harness.paths import SPOT_QUANTUM, TWAP_QUANTUM
from harness.settlement_feed import (
    DAY_S,
    FEED_SIGMA,
    FeedParams,
    SettlementFeedPath,
    measure_day,
)

START = 1_800_000_000 - 1_800_000_000 % DAY_S  # midnight UTC
DAYS = 4

# How far one day may stray outside the measured range (the mean of the days may not).
# The spread of a day's figure across seeds, measured on the stand-in: about 0.1 for the
# 60 s ratio, 0.2 for the 300 s one, 15 for the kurtosis (its fourth moment is carried by a
# few jumps), 0.1 for the 1 s sd (the slow regime moves a day's level).
TOLERANCE: dict[str, float] = {
    "vr30": 0.08,
    "vr60": 0.12,
    "vr300": 0.25,
    "kurtosis": 15.0,
    "sd_bp": 0.08,
    "minute_2_4": 0.05,
    "slope_5s_next5": 0.02,
    "corr_1s_next5": 0.01,
    "acf3": 0.01,
    "gaps_over_3s": 20.0,
    "missing_share": 0.003,
}


@pytest.fixture(scope="module")
def four_days() -> SettlementFeedPath:
    """The path of seed 1 over ``DAYS`` days, generated once for the tests that read it."""
    path = SettlementFeedPath(1, FEED_SIGMA, 100_000, START, DAYS * DAY_S)
    path.log_values(START, START + DAYS * DAY_S)
    return path


@pytest.fixture(scope="module")
def days(four_days: SettlementFeedPath) -> list[dict[str, float]]:
    """Every figure of each of the four days of seed 1."""
    return [measure_day(four_days, START + d * DAY_S) for d in range(DAYS)]


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_figure_of_the_generated_days_is_in_the_measured_range(
    days: list[dict[str, float]], name: str
) -> None:
    low, high = TARGETS[name]
    values = [day[name] for day in days]
    mean = statistics.fmean(values)
    assert low <= mean <= high, f"{name}: mean {mean:.3f} of {values} outside {low}-{high}"
    tol = TOLERANCE.get(name, 0.0)
    for value in values:
        assert low - tol <= value <= high + tol, f"{name}: a day at {value:.3f}: {values}"


def test_sigma_is_the_volatility_over_minutes(four_days: SettlementFeedPath) -> None:
    """Over 5 minutes the path moves by ``sigma`` per sqrt-second, as a Brownian one of the
    same sigma would: the smoothing moves variance between horizons, not in total (on the
    first two of the days measured above)."""
    path = four_days
    logs = path.log_values(START, START + 2 * DAY_S)
    realised = path.realised_sigma(START, START + 2 * DAY_S, horizon=300)
    blocks = [b - a for a, b in zip(logs[::300], logs[300::300], strict=False)]
    assert realised == math.sqrt(math.fsum(x * x for x in blocks) / len(blocks) / 300)
    assert realised == pytest.approx(FEED_SIGMA, rel=0.15)
    with pytest.raises(ValueError, match="shorter than one 60 s move"):
        path.realised_sigma(START, START + 59)
    one_second = math.sqrt(statistics.fmean([(b - a) ** 2 for a, b in itertools.pairwise(logs)]))
    # The 1 s moves are smaller (the feed is smoothed): about sigma / sqrt(2.1).
    assert 1.8 < (realised / one_second) ** 2 < 2.6


def test_the_same_seed_gives_the_same_path_and_arrivals() -> None:
    a = SettlementFeedPath(9, FEED_SIGMA, 100_000, START, 3600)
    b = SettlementFeedPath(9, FEED_SIGMA, 100_000, START, 3600)
    other = SettlementFeedPath(10, FEED_SIGMA, 100_000, START, 3600)
    b.arrival_lag(START + 3600)  # reading the arrivals first changes nothing of the values
    assert a.spot_points(START, START + 3600) == b.spot_points(START, START + 3600)
    assert a.arrivals(START, START + 3600) == b.arrivals(START, START + 3600)
    assert a.spot_points(START, START + 3600) != other.spot_points(START, START + 3600)
    changed = SettlementFeedPath(9, FEED_SIGMA, 100_000, START, 3600, FeedParams(hold_start=0))
    assert changed.arrivals(START, START + 3600) != a.arrivals(START, START + 3600)
    assert [lag for _, lag, _ in changed.arrivals(START, START + 3600)] == [
        lag for _, lag, _ in a.arrivals(START, START + 3600)
    ]  # the relay has a random stream of its own: other values, the same arrivals


def test_values_and_twaps_are_exact_like_the_brownian_path() -> None:
    path = SettlementFeedPath(3, FEED_SIGMA, "100000", START, 600)
    assert path.value(START) == Decimal("100000")
    values = [path.value(t) for t in range(START, START + 601)]
    assert all(v == v.quantize(SPOT_QUANTUM) for v in values)
    with localcontext() as context:
        context.prec = 60
        mean = (sum(values[-60:], Decimal(0)) / 60).quantize(TWAP_QUANTUM)
    assert path.twap(START + 600, 60) == mean
    assert not path.has_twap(START + 58, 60) and path.has_twap(START + 59, 60)
    assert path.twap_points(START, START + 60, 60)[0][0] == (START + 59) * 1000
    with pytest.raises(ValueError, match="outside the path"):
        path.value(START + 601)
    with pytest.raises(ValueError, match="outside the path"):
        path.arrival_lag(START - 1)


def test_reads_from_several_threads_see_one_path() -> None:
    shared = SettlementFeedPath(4, FEED_SIGMA, 100_000, START, 20_000)
    alone = SettlementFeedPath(4, FEED_SIGMA, 100_000, START, 20_000)
    seen: list[list[Decimal]] = []

    def read() -> None:
        seen.append([shared.value(t) for t in range(START, START + 20_001, 7)])

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [alone.value(t) for t in range(START, START + 20_001, 7)]
    assert seen == [expected] * 4


def test_arrivals_skip_the_missing_seconds_and_come_late() -> None:
    path = SettlementFeedPath(5, FEED_SIGMA, 100_000, START, 3600)
    points = path.arrivals(START, START + 3600)
    stamps = {ts // 1000 for ts, _, _ in points}
    missing = [t for t in range(START, START + 3601) if path.missing(t)]
    assert missing and stamps.isdisjoint(missing)
    assert len(stamps) + len(missing) == 3601
    assert all(0.5 < arrival - ts / 1000 < 5 for ts, arrival, _ in points)
    assert all(value == path.value(ts // 1000) for ts, _, value in points)
