"""``app.refresher.volatility`` and the spot series' estimate: sigma and the measured scale."""

from __future__ import annotations

import math
import random

import pytest

from app.refresher import volatility
from app.refresher.model import horizon_ratio
from app.refresher.sources.polymarket.price_series import SPOT_HISTORY_S, PriceSeries
from harness.spans import WINDOW_S

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
    returns' negative autocorrelation (and the measured scale) see it, and bring the
    model's volatility over the time left back toward the true one."""
    times, values = _split(_path(4 * 3600, SIGMA, seed=17, noise=SIGMA))
    estimate = volatility.estimate(times, values, volatility.history(times, values, (WINDOW_S,)))
    assert estimate is not None
    assert estimate.scale < 0.75
    assert estimate.rho[0] < -0.25  # noise of the path's own size: -1/3 at lag 1
    assert estimate.sigma_1s > 1.4 * SIGMA  # what a fixed scale of 1 would have used
    for tau in (30.0, 120.0, 300.0):
        ratio = horizon_ratio(estimate.rho, tau, estimate.ratios)
        effective = estimate.sigma * math.sqrt(ratio)
        assert abs(effective - SIGMA) < abs(estimate.sigma_1s - SIGMA), tau
        assert abs(effective - SIGMA) < 0.2 * SIGMA, (tau, effective)


def test_no_estimate_until_enough_returns() -> None:
    times, values = _split(_path(volatility.MIN_RETURNS, SIGMA, seed=8))
    none = volatility.History()
    assert volatility.estimate(times, values, none) is None  # one return short
    times, values = _split(_path(volatility.MIN_RETURNS + 1, SIGMA, seed=8))
    assert volatility.estimate(times, values, none) is not None
    assert volatility.estimate([], [], none) is None


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


# -- jumps, regimes and the variance's own uncertainty ---------------------------------------


def _jump_path(
    seconds: int, sigmas: list[float], seed: int, jump_rate: float = 0.0, jump_sd: float = 0.0
) -> list[tuple[int, float]]:
    """1-second points of a jump-diffusion: the diffusion's sigma cycles through ``sigmas``
    (ten minutes each), plus Poisson jumps of ``jump_rate`` per second, Gaussian of ``jump_sd``."""
    rng = random.Random(seed)
    x, points = math.log(100_000.0), []
    for t in range(seconds):
        x += rng.gauss(0.0, sigmas[(t // 600) % len(sigmas)])
        if jump_rate and rng.random() < jump_rate:
            x += rng.gauss(0.0, jump_sd)
        points.append((1_800_000_000_000 + t * 1000, math.exp(x)))
    return points


@pytest.mark.parametrize("seed", [21, 22])
def test_on_a_brownian_path_the_model_is_the_plain_one(seed: int) -> None:
    """No jumps found to speak of, no inflation: the digital option of the exact sigma."""
    times, values = _split(_path(4 * 3600, SIGMA, seed))
    past = volatility.history(times, values, (WINDOW_S,))
    assert past.jump_rate * past.jump_var * 300 < 0.02 * SIGMA**2 * 300
    assert past.inflation < 1.05
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    assert estimate.sigma == pytest.approx(SIGMA, rel=0.12)


def test_jumps_are_found_and_measured() -> None:
    """A known jump-diffusion: one jump every 100 s, ten sigmas in size on average."""
    jump_sd = 10 * SIGMA
    times, values = _split(_jump_path(4 * 3600, [SIGMA], 23, jump_rate=0.01, jump_sd=jump_sd))
    past = volatility.history(times, values, (WINDOW_S,))
    # A jump under four sigmas is taken for diffusion (about a third of N(0, 10 sigma) are):
    # fewer jumps are found, larger on average, and the variance they carry is the same.
    assert 0.005 < past.jump_rate < 0.012
    assert past.jump_rate * past.jump_var == pytest.approx(0.01 * jump_sd**2, rel=0.25)
    estimate = volatility.estimate(times, values, past)
    assert estimate is not None
    # The jumps are left out of the diffusion (the inflation, about blocks' dispersion, sees
    # them again: on such a path the model errs on the safe side; docs/model.md).
    diffusion = estimate.sigma / math.sqrt(estimate.scale * estimate.inflation)
    assert diffusion < 1.3 * SIGMA


def test_regimes_raise_sigma_within_a_minute_and_inflate_the_variance() -> None:
    calm, jumpy = SIGMA / 2, 3 * SIGMA
    times, values = _split(_jump_path(2 * 3600, [calm, jumpy], 24))
    past = volatility.history(times, values, (WINDOW_S,))
    assert past.inflation > 1.2  # the variance is uncertain when regimes switch
    # 60 s into a jumpy spell (it starts at 600 s in the second ten-minute block).
    cut = 600 + 60
    before = volatility.estimate(times[:600], values[:600], past)
    after = volatility.estimate(times[:cut], values[:cut], past)
    assert before is not None and after is not None
    assert after.sigma > 2.5 * before.sigma


def test_a_move_across_a_hole_is_no_one_second_return_to_continue() -> None:
    """Points every second, then none for 10 s (missing, or refused by the witnesses), then
    one 0.3 % above the last believed point: the grid's last return is that whole move, but
    it is no second's return, and nothing of it is expected to continue (issue 48, point 4:
    read as one second's move and extended by the continuation term, it gave P(up) 11.1 where
    the truth was 17.1). The same move one second after the last point is the last return."""
    points = _path(600, SIGMA, seed=5)
    t_last = points[-1][0]
    across_hole = [*points[:-11], (t_last, points[-12][1] * 1.003)]
    estimate = volatility.estimate(*_split(across_hole), volatility.History())
    assert estimate is not None and estimate.last_return == 0.0

    next_second = [*points[:-1], (t_last, points[-2][1] * 1.003)]
    estimate = volatility.estimate(*_split(next_second), volatility.History())
    assert estimate is not None
    assert estimate.last_return == pytest.approx(math.log(1.003), rel=1e-9)


class ReadMidMerge(PriceSeries):
    """A series whose volatility is read (a row built in another thread) after ``read_after``
    points of a history snapshot are merged, before the rest: the interleaving under load."""

    read_after: int | None = None

    def offer(self, ts_ms: int, value: float) -> str | None:
        """Take the point; the row reads the volatility after the ``read_after``-th."""
        kind = super().offer(ts_ms, value)
        if self.read_after is not None and self.version == self.read_after:
            self.read_after = None
            self.volatility()
        return kind


@pytest.mark.parametrize("read_after", [150, 300, 440])
def test_a_snapshot_read_half_merged_is_measured_whole_once_in(read_after: int) -> None:
    """A row built while the feed's thread merges a history snapshot measures the scale on
    part of it; once the snapshot is in, the estimate is the one of the whole snapshot (the
    one its replay gives, where the frame is handled between two rows), not a scale of part
    of it kept for ``SCALE_EVERY_S`` (the tape replay's test under load: the live scale
    measured on 437 of the snapshot's 601 points, P(up) 0.16074 live, 0.16078 replayed)."""
    snapshot = _path(601, SIGMA, seed=9, noise=0.5 * SIGMA)
    half_read = ReadMidMerge(SPOT_HISTORY_S, clock=lambda: 1_800_000_700.0)
    half_read.read_after = read_after
    half_read.merge(snapshot)
    whole = PriceSeries(SPOT_HISTORY_S, clock=lambda: 1_800_000_700.0)
    whole.merge(snapshot)
    assert half_read.read_after is None  # it was read half merged
    assert half_read.volatility() == whole.volatility()
