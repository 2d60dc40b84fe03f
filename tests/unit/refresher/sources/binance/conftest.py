"""The loopback Binance stand-in, started once per module, with one candle set per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.fake_polymarket.binance import FakeBinance

T0 = 1_772_373_600  # 2026-03-01 14:00 UTC: the 9AM ET hourly market
CANDLE = ("66123.45", "66300.00", "66010.12", "66250.01")  # open, high, low, close


@pytest.fixture(scope="module")
def started_binance() -> Iterator[FakeBinance]:
    """The stand-in, two hours after T0 on its clock (a test may drive it)."""
    fake = FakeBinance()
    fake.clock = lambda: T0 + 7200.0
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def binance(started_binance: FakeBinance) -> FakeBinance:
    """The stand-in with only BTC's candle of the hour at T0, answering."""
    started_binance.candles.clear()
    started_binance.refuse = None
    started_binance.set_candle("BTCUSDT", "1h", T0 * 1000, *CANDLE)
    return started_binance
