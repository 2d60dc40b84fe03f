"""The variance over hours ahead from 1-minute closes (issue 49, point 3:
``app/refresher/volatility/long_horizon.py``), against exact answers on made-up paths."""

from __future__ import annotations

import math

import pytest

from app.refresher.volatility import long_horizon as lh

DAY0 = 1_795_478_400  # 2026-11-22 00:00 UTC
A = 4e-4  # a 1-minute move of 4 bp


def _closes(moves: list[float], start: int = DAY0) -> list[tuple[int, float]]:
    """1-minute closes from ``start`` whose log returns are ``moves``."""
    log_price, closes = math.log(100_000.0), [(start, 100_000.0)]
    for i, move in enumerate(moves, start=1):
        log_price += move
        closes.append((start + 60 * i, math.exp(log_price)))
    return closes


def _alternating(n: int, size: float = A) -> list[float]:
    return [size if i % 2 else -size for i in range(n)]


def test_a_steady_day_gives_a_flat_profile_and_the_variance_of_the_minutes_ahead() -> None:
    horizon = lh.long_horizon(_closes(_alternating(lh.DAY_MIN)))
    assert horizon is not None and horizon.minutes == lh.DAY_MIN
    assert horizon.regime == pytest.approx(1.0)
    assert all(p == pytest.approx(A * A) for p in horizon.profile)
    now = DAY0 + 86_400 + 17.0  # mid-minute: its part counts
    assert horizon.variance_ahead(now, 3600.0) == pytest.approx(60 * A * A)
    assert horizon.variance_ahead(now, 30.0) == pytest.approx(A * A / 2)
    assert horizon.sigma_ahead(now, 3600.0) == pytest.approx(A / math.sqrt(60))
    assert horizon.variance_ahead(now, 0.0) == 0.0


def test_a_busy_hour_of_the_day_is_busy_in_the_profile() -> None:
    """Moves twice as large from 14:00 to 16:00 UTC each day: from 14:30 (well inside, past
    the smoothing's reach) the next half hour has four times the quiet hours' variance."""
    moves = [
        (2 * A if 14 * 60 <= (i + 1) % lh.DAY_MIN < 16 * 60 else A) * (1 if i % 2 else -1)
        for i in range(2 * lh.DAY_MIN)
    ]
    # The regime must not interfere: the last hour (22:00-00:00) is a quiet one.
    horizon = lh.long_horizon(_closes(moves))
    assert horizon is not None and horizon.regime == pytest.approx(1.0)
    busy = DAY0 + 2 * 86_400 + 14 * 3600 + 1800
    quiet = DAY0 + 2 * 86_400 + 4 * 3600
    assert horizon.variance_ahead(busy, 1800.0) == pytest.approx(30 * 4 * A * A)
    assert horizon.variance_ahead(quiet, 1800.0) == pytest.approx(30 * A * A)


def test_a_burst_raises_the_regime_shrunk_and_fading_back() -> None:
    """The last REGIME_MIN minutes move twice as much (four times the variance): the regime
    is that ratio shrunk toward 1, and its excess halves every REGIME_HALF_LIFE_S."""
    n = 3 * lh.DAY_MIN  # three days: the burst is a small part of its minutes' profile
    moves = _alternating(n - lh.REGIME_MIN) + _alternating(lh.REGIME_MIN, 2 * A)
    horizon = lh.long_horizon(_closes(moves))
    assert horizon is not None
    expected = (lh.REGIME_MIN * 4.0 * _flat_share(horizon) + lh.REGIME_PRIOR_MIN) / (
        lh.REGIME_MIN + lh.REGIME_PRIOR_MIN
    )
    assert horizon.regime == pytest.approx(expected)
    assert horizon.regime > 1.3
    now = DAY0 + 3 * 86_400.0
    first = horizon.variance_ahead(now, 60.0)
    minute = horizon.profile[0]
    assert first == pytest.approx(minute * horizon.regime)
    faded = horizon.variance_ahead(now, lh.REGIME_HALF_LIFE_S + 60.0) - horizon.variance_ahead(
        now, lh.REGIME_HALF_LIFE_S
    )
    then = horizon.profile[int(lh.REGIME_HALF_LIFE_S) // 60 % lh.DAY_MIN]
    assert faded == pytest.approx(then * (1 + (horizon.regime - 1) / 2), rel=0.02)


def _flat_share(horizon: lh.LongHorizon) -> float:
    """A^2 over the profile's mean of the burst's minutes: the burst's ratio is 4 times it
    (the profile itself holds the burst, smoothed in)."""
    # A return is stamped with the minute it is made over: the last one's is 00:00.
    last = [horizon.profile[(lh.DAY_MIN - k) % lh.DAY_MIN] for k in range(lh.REGIME_MIN)]
    return A * A / (math.fsum(last) / len(last))


def test_a_gap_is_no_minutes_return_and_half_a_day_is_needed() -> None:
    closes = _closes(_alternating(lh.MIN_HISTORY_MIN))
    assert lh.long_horizon(closes) is not None
    holed = closes[: len(closes) // 2] + closes[len(closes) // 2 + 1 :]  # a minute missing
    assert len(lh.minute_returns(holed)) == lh.MIN_HISTORY_MIN - 2
    assert lh.long_horizon(holed) is None
