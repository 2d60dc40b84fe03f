"""A coin's 1-minute closes from Binance's klines, fetched at start and kept up to date
(issue 49, point 3: ``minute_history.py``), from the loopback stand-in on a driven clock."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from app.refresher.sources.binance.klines import KlinesClient
from app.refresher.sources.binance.minute_history import ERROR_PAUSE_S, MinuteHistory
from harness.fake_polymarket.binance import FakeBinance

D = 1_795_478_400  # 2026-11-22 00:00 UTC
NOW = D + 2 * 86_400 + 30.0  # half a minute into a minute: that one is still running


def _price(minute: int) -> str:
    return f"{100_000 * math.exp(4e-4 * math.sin(minute / 7)):.2f}"


@pytest.fixture
def history(started_binance: FakeBinance) -> Iterator[tuple[FakeBinance, MinuteHistory]]:
    fake = started_binance
    fake.candles.clear()
    fake.refuse = None
    for minute in range(-60, 2 * 1440 + 5):  # an hour before the two days, and 5 after
        t = D + 60 * minute
        fake.set_candle("BTCUSDT", "1m", t * 1000, _price(minute - 1), "1", "1", _price(minute))
    fake.clock = lambda: NOW
    klines = KlinesClient(fake.url)
    try:
        yield fake, MinuteHistory(klines, "BTCUSDT", days=2)
    finally:
        klines.close()


def _asked(fake: FakeBinance) -> int:
    return len(fake.requests_to("/api/v3/klines"))


def test_a_cold_start_fetches_the_closed_minutes_of_the_last_two_days(
    history: tuple[FakeBinance, MinuteHistory],
) -> None:
    fake, kept = history
    before = _asked(fake)
    kept.refresh(NOW)
    closes = kept.closes()
    assert closes[0] == (D, float(_price(0)))  # from two days back, on the minute
    assert closes[-1][0] == D + 2 * 86_400 - 60  # the minute running at NOW is not kept
    assert len(closes) == 2 * 1440 and _asked(fake) - before == 3  # 1,000 an answer
    assert kept.horizon() is not None and kept.error is None


def test_each_new_minute_is_one_small_answer_and_the_oldest_goes(
    history: tuple[FakeBinance, MinuteHistory],
) -> None:
    fake, kept = history
    kept.refresh(NOW)
    first = kept.horizon()
    fake.clock = lambda: NOW + 60
    before = _asked(fake)
    kept.refresh(NOW + 60)
    closes = kept.closes()
    assert _asked(fake) - before == 1
    assert closes[0][0] == D + 60 and closes[-1][0] == D + 2 * 86_400
    assert len(closes) == 2 * 1440 and kept.horizon() is not first
    kept.refresh(NOW + 61)  # nothing closed since: not asked, nothing new
    assert kept.closes() == closes


def test_a_refusal_keeps_what_is_held_and_the_next_call_catches_up(
    history: tuple[FakeBinance, MinuteHistory],
) -> None:
    fake, kept = history
    kept.refresh(NOW)
    held = kept.closes()
    fake.refuse = (418, "IP banned until 1795651200000")
    fake.clock = lambda: NOW + 120
    kept.refresh(NOW + 120)
    assert kept.closes() == held
    assert kept.error is not None and "418" in kept.error and "IP banned" in kept.error
    fake.refuse = None
    asked = _asked(fake)
    kept.refresh(NOW + 120 + ERROR_PAUSE_S / 2)  # paused: Binance is not asked again yet
    assert _asked(fake) == asked and kept.error is not None
    fake.clock = lambda: NOW + 120 + ERROR_PAUSE_S
    kept.refresh(NOW + 120 + ERROR_PAUSE_S)
    assert kept.error is None and kept.closes()[-1][0] == D + 2 * 86_400 + 120
